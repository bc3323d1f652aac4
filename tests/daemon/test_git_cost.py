"""What a daemon pass costs in Git processes: fetches of what moved, refs read in process.

A pass fetches the status branch and the catalog only when ``git ls-remote`` says
they moved, and reads the refs it needs from the repositories' files (no ``git
rev-parse``): the daemon polls every few seconds, and each Git process is a fork, a
start-up and a look at the repository. Counted from Git's own trace
(``tests/source/gittrace.py``).
"""

from __future__ import annotations

from tests.daemon.conftest import World
from tests.daemon.test_pass import WEB
from tests.source.gittrace import GitTrace, git_trace

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


def test_a_pass_fetches_only_what_moved_and_runs_no_rev_parse(
    world: World, git_trace: GitTrace
) -> None:
    """The catalog's one ``git ls-remote`` lists this cluster's status branch too: the
    branch is fetched only when another writer moved it (the pass's own push needs no
    fetch before it), the catalog only when it moved."""
    world.daemon.run_pass()
    for catalog_moved, status_moved in ((False, False), (True, False), (False, True)):
        if catalog_moved:
            world.commit("clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
        if status_moved:
            world.move_status_branch("prod")
        git_trace.clear()
        outcome = world.daemon.run_pass()
        assert outcome.ok, outcome
        assert status_fetches(git_trace) == int(status_moved)
        assert git_trace.count("ls-remote") == 1
        assert git_trace.count("fetch") == int(catalog_moved) + int(status_moved)
        assert git_trace.count("rev-parse") == 0
        assert outcome.source_changed is catalog_moved
        assert bool(outcome.commits) is catalog_moved  # web's record, pushed on the listed head
