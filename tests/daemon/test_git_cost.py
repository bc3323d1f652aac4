"""What a daemon pass costs in Git processes: one status fetch, refs read in process.

A pass fetches the status branch once, fetches the catalog only when its listing (``git
ls-remote``, or the refs' files of a remote on this machine) says it moved, and reads the refs it needs from the repositories' files (no ``git
rev-parse``): the daemon polls every few seconds, and each Git process is a fork, a
start-up and a look at the repository. Counted from Git's own trace
(``tests/source/gittrace.py``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from reconciler.source.ledger import StatusLedger
from reconciler.source.scaffold import commit_file
from tests.daemon.conftest import World
from tests.daemon.test_pass import WEB
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import git

__all__ = ["git_trace"]

STATUS_FETCH = ("fetch", "--quiet", "--no-tags", "origin")


def status_fetches(trace: GitTrace) -> int:
    return sum(
        1
        for args in trace.commands()
        if tuple(args[:4]) == STATUS_FETCH and "refs/heads/status/prod" in " ".join(args)
    )


def test_the_first_pass_fetches_the_status_branch_once(world: World, git_trace: GitTrace) -> None:
    """It reads the last records (a restarted daemon continues from them) and writes on that
    same fetch; before, the write fetched the branch a second time."""
    outcome = world.daemon.run_pass()
    assert outcome.ok and len(outcome.commits) == 2, outcome
    assert status_fetches(git_trace) == 1
    assert git_trace.count("push") == 1


def test_a_pass_fetches_what_moved_once_and_runs_no_rev_parse(
    world: World, git_trace: GitTrace
) -> None:
    """The catalog's one ``git ls-remote`` lists the status branch too: where the pass's
    own push left it, it is not fetched again."""
    world.daemon.run_pass()
    for moved in (False, True):
        if moved:
            world.commit("clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
        git_trace.clear()
        outcome = world.daemon.run_pass()
        assert outcome.ok, outcome
        assert status_fetches(git_trace) == 0
        # the catalog: one listing says whether it moved (in process: the remote is a
        # repository on this machine); fetched only when it did
        assert git_trace.listings() == 1 and git_trace.count("ls-remote") == 0
        assert git_trace.count("fetch") == (1 if moved else 0)
        assert git_trace.count("rev-parse") == 0
        assert outcome.source_changed is moved
    assert git_trace.count("push") == 1  # web's new record, on the branch as listed


def test_a_status_branch_another_writer_moved_is_fetched_and_built_on(
    world: World, git_trace: GitTrace, tmp_path: Path
) -> None:
    """The listing shows the other writer's commit: the pass fetches the branch once and
    records on top of it (its own view of ``api`` included), with no refused push."""
    world.daemon.run_pass()
    other = StatusLedger(world.repo.url, "prod", cache_dir=tmp_path / "other-writer")
    api = other.snapshot().statuses["api"]
    (written,) = other.record([replace(api, message="checked by another replica")])
    world.commit("clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
    git_trace.clear()
    outcome = world.daemon.run_pass()
    assert outcome.ok and [c.instance for c in outcome.commits] == ["api", "web"], outcome
    assert status_fetches(git_trace) == 1
    assert git_trace.count("push") == 1
    first = outcome.commits[0].commit
    assert git(world.repo.remote, "rev-parse", f"{first}~1") == written.commit
    assert other.snapshot().statuses["api"].message == api.message  # the daemon's view


def test_a_catalog_edit_is_two_processes_a_new_file_three(
    world: World, git_trace: GitTrace
) -> None:
    """``commit_file`` (the demo's edit; ``World.commit`` publishes without its push): a
    tracked file is committed by
    ``git commit -- <file>`` and pushed; a new one is added first. The new commit is read
    from the ref files (no ``git cat-file`` of its own)."""
    new = commit_file(world.repo, "clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
    assert [git_trace.count(c) for c in ("add", "commit", "push", "cat-file")] == [0, 1, 1, 0]
    assert git_trace.count("rev-parse") == 0
    assert git(world.repo.remote, "rev-parse", "refs/heads/main") == new
    assert git(world.repo.work, "show", "--format=%s", "--name-only", new).split("\n") == [
        "web: 3 replicas",
        "",
        "clusters/prod/instances/web.yaml",
    ]
    git_trace.clear()
    extra = WEB.replace("web", "extra")
    added = commit_file(world.repo, "clusters/prod/instances/extra.yaml", extra, "edit")
    assert [git_trace.count(c) for c in ("add", "commit", "push", "cat-file")] == [1, 1, 1, 0]
    assert git(world.repo.remote, "rev-parse", "refs/heads/main") == added
    assert git(world.repo.work, "status", "--porcelain") == ""
