"""``FleetStatus``: every cluster's records for the wave gate, read again only where a head moved."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.model.errors import SourceError
from reconciler.model.status import Phase
from reconciler.model.waves import SeenRecord
from reconciler.source import objects
from reconciler.source.fleet import FleetStatus
from reconciler.source.ledger import StatusLedger
from reconciler.source.remote import NetworkPolicy
from reconciler.source.runner import GC_PACKS, MissingRemoteBranch
from tests.report.conftest import record as status
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import git

__all__ = ["git_trace"]

T0 = "2026-01-01T00:00:00Z"


def at(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """The time of the status commits written next (soak counts from commit times)."""
    monkeypatch.setenv("GIT_COMMITTER_DATE", when)


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.git"
    git(tmp_path, "init", "-q", "--bare", str(path))
    return path


def branch_off(bare: Path, head: str, count: int) -> None:
    """``status/c00``, ``status/c01``, ... at ``head``: one ``git update-ref --stdin``."""
    lines = "".join(f"create refs/heads/status/c{n:02d} {head}\n" for n in range(count))
    subprocess.run(["git", "update-ref", "--stdin"], cwd=bare, input=lines, text=True, check=True)


def writer(bare: Path, tmp_path: Path, cluster: str) -> StatusLedger:
    return StatusLedger(bare.as_uri(), cluster, cache_dir=tmp_path / f"writer-{cluster}")


def test_only_branches_whose_head_moved_are_read_again(
    bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch, T0)
    for cluster in ("a", "b", "c"):
        writer(bare, tmp_path, cluster).record([status(cluster, "web"), status(cluster, "api")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    records = fleet.records(skip="c")
    assert sorted(records) == [("a", "api"), ("a", "web"), ("b", "api"), ("b", "web")]
    assert fleet.reads == 2
    assert records[("a", "web")].since == datetime(2026, 1, 1, tzinfo=UTC)
    # nothing moved: nothing read
    fleet.refresh()
    assert fleet.records(skip="c") == records and fleet.reads == 2
    # b moves: only b is read again, from its new commits (never its whole history again);
    # its unchanged record keeps its run's start
    monkeypatch.setattr(FleetStatus, "_history", lambda *_: pytest.fail("read whole again"))
    at(monkeypatch, "2026-01-01T01:00:00Z")
    writer(bare, tmp_path, "b").record([status("b", "web", phase=Phase.PROGRESSING)])
    fleet.refresh()
    again = fleet.records(skip="c")
    assert fleet.reads == 3
    assert again[("b", "web")].status.phase is Phase.PROGRESSING
    assert again[("b", "web")].since == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert again[("b", "api")].since == datetime(2026, 1, 1, tzinfo=UTC)
    assert again[("a", "web")] == records[("a", "web")]


def test_a_rewritten_branch_is_read_from_its_new_history(
    bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch, T0)
    writer(bare, tmp_path, "a").record([status("a", "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    assert fleet.records()[("a", "web")].since == datetime(2026, 1, 1, tzinfo=UTC)
    # someone replaces status/a with a new history, Ready on the same version since later
    git(bare, "branch", "-D", "status/a")
    at(monkeypatch, "2026-01-02T00:00:00Z")
    elsewhere = tmp_path / "writer-rewrite"
    StatusLedger(bare.as_uri(), "a", branch="status/a2", cache_dir=elsewhere).record(
        [status("a", "web")]
    )
    git(bare, "branch", "-m", "status/a2", "status/a")
    fleet.refresh()
    seen = fleet.records()[("a", "web")]
    # the old run does not continue into an unrelated history: Ready since its own commit
    assert seen.since == datetime(2026, 1, 2, tzinfo=UTC)


def test_the_mirror_keeps_a_commit_graph(bare: Path, tmp_path: Path) -> None:
    """Set by the fleet reader before its first fetch; a reader that never fetches (a
    daemon whose catalog has no waves) leaves the mirror's config as its ledger wrote it."""
    writer(bare, tmp_path, "a").record([status("a", "web")])
    ledger = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader")
    fleet = ledger.fleet()
    mirror = Path(fleet.repo.git_dir)
    unset = subprocess.run(
        ["git", "-C", str(mirror), "config", "--local", "fetch.writeCommitGraph"]
    )
    assert unset.returncode == 1
    fleet.refresh()
    assert git(mirror, "config", "fetch.writeCommitGraph") == "true"
    info = mirror / "objects" / "info"
    assert (info / "commit-graph").exists() or any((info / "commit-graphs").glob("*.graph"))


def test_a_refresh_with_nothing_moved_lists_the_heads_and_fetches_nothing(
    bare: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    for cluster in ("a", "b"):
        writer(bare, tmp_path, cluster).record([status(cluster, "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh("refs/heads/status/a")  # any branch stands for the catalog's here
    records = fleet.records()
    git_trace.clear()
    fleet.refresh("refs/heads/status/a")
    assert fleet.records() == records
    assert git_trace.count("ls-remote") == 1
    assert git_trace.count("fetch") == 0


def test_a_refresh_fetches_only_the_moved_and_new_branches(
    bare: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    for cluster in ("a", "b", "c"):
        writer(bare, tmp_path, cluster).record([status(cluster, "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    fleet.records()
    old_b = git(bare, "rev-parse", "status/b")
    writer(bare, tmp_path, "b").record([status("b", "web", phase=Phase.PROGRESSING)])
    writer(bare, tmp_path, "d").record([status("d", "web")])
    git_trace.clear()
    fleet.refresh()
    [fetch] = [args for args in git_trace.commands() if "fetch" in args]
    refspecs = sorted(arg for arg in fetch if arg.startswith("+"))
    assert refspecs == [
        "+refs/heads/status/b:refs/remotes/origin/status/b",
        "+refs/heads/status/d:refs/remotes/origin/status/d",
    ]
    # Git offers only b's old head as common ground, not every branch's history
    assert [arg for arg in fetch if arg.startswith("--negotiation-tip")] == [
        f"--negotiation-tip={old_b}"
    ]
    records = fleet.records()
    assert records[("b", "web")].status.phase is Phase.PROGRESSING
    assert ("d", "web") in records and fleet.reads == 5


def test_a_deleted_status_branch_leaves_the_fleet(bare: Path, tmp_path: Path) -> None:
    for cluster in ("a", "b"):
        writer(bare, tmp_path, cluster).record([status(cluster, "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    assert sorted(fleet.records()) == [("a", "web"), ("b", "web")]
    git(bare, "branch", "-D", "status/b")
    fleet.refresh()
    assert sorted(fleet.records()) == [("a", "web")]
    assert git(Path(fleet.repo.git_dir), "for-each-ref", "refs/remotes/origin/status/b") == ""


def test_a_failed_fetch_names_its_cause_and_keeps_the_last_records(
    bare: Path, tmp_path: Path
) -> None:
    """The listing works but the fetch cannot: the moved head's tree is missing on the
    remote. The refresh fails (the gate then holds); the records read before remain."""
    writer(bare, tmp_path, "a").record([status("a", "web")])
    # each attempt of the failing fetch is made, none waits for the next (1 s, then 2)
    retried = NetworkPolicy(backoff=0)
    ledger = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader", policy=retried)
    fleet = ledger.fleet()
    fleet.refresh()
    records = fleet.records()
    # a commit whose tree the remote lost: listed, but no pack can be made of it
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=bare,
        input="lost\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = subprocess.run(
        ["git", "mktree"],
        cwd=bare,
        input=f"100644 blob {blob}\tlost.yaml\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    commit = git(bare, "commit-tree", tree, "-p", "status/a", "-m", "lost")
    git(bare, "update-ref", "refs/heads/status/a", commit)
    (bare / "objects" / tree[:2] / tree[2:]).unlink()
    with pytest.raises(SourceError, match="fetch the status branches of"):
        fleet.refresh()
    assert fleet.records() == records


def test_a_catalog_branch_the_remote_does_not_have_fails_the_refresh(
    bare: Path, tmp_path: Path
) -> None:
    writer(bare, tmp_path, "a").record([status("a", "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    with pytest.raises(MissingRemoteBranch, match="no such branch"):
        fleet.refresh("refs/heads/gone")
    fleet.refresh("refs/heads/status/a")
    assert git(Path(fleet.repo.git_dir), "rev-parse", "refs/reconciler/catalog") == git(
        bare, "rev-parse", "status/a"
    )


def fresh(bare: Path, tmp_path: Path, name: str) -> dict[tuple[str, str], SeenRecord]:
    """What a reader that never saw the branches before makes of them (whole histories)."""
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / name).fleet()
    fleet.refresh()
    return fleet.records()


@pytest.mark.parametrize(("commits", "logs"), [(3, 0), (20, 1)])
def test_new_commits_since_the_last_read_give_what_a_whole_read_gives(
    bare: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    git_trace: GitTrace,
    commits: int,
    logs: int,
) -> None:
    """A few new commits are walked in process; more than the walk's bound come from
    ``git log``; either way each run's start is the one a whole read finds."""
    at(monkeypatch, T0)
    writer(bare, tmp_path, "a").record([status("a", "web"), status("a", "api")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    fleet.records()
    ledger = writer(bare, tmp_path, "a")
    for n in range(commits):  # api flips phase each commit; web stays Ready since T0
        at(monkeypatch, f"2026-01-01T01:{n:02d}:00Z")
        phase = Phase.PROGRESSING if n % 2 == 0 else Phase.READY
        ledger.record([status("a", "api", phase=phase, message=f"step {n}")])
    git_trace.clear()
    fleet.refresh()
    records = fleet.records()
    assert git_trace.count("log") == logs
    assert records == fresh(bare, tmp_path, "whole")
    assert records[("a", "web")].since == datetime(2026, 1, 1, tzinfo=UTC)
    assert records[("a", "api")].since == datetime(2026, 1, 1, 1, commits - 1, tzinfo=UTC)


def read_a_then_commit_by_hand(bare: Path, tmp_path: Path, message: str) -> FleetStatus:
    """A reader that has read status/a; then a commit made by hand (same tree) on it."""
    writer(bare, tmp_path, "a").record([status("a", "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    fleet.records()
    tree = git(bare, "rev-parse", "status/a^{tree}")
    commit = git(bare, "commit-tree", tree, "-p", "status/a", "-m", message)
    git(bare, "update-ref", "refs/heads/status/a", commit)
    return fleet


def test_a_hand_made_commit_is_read_by_git_log(
    bare: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    """Trailers in a paragraph Git's rules might read otherwise (a ``(cherry picked``
    line) are left to ``git log``."""
    fleet = read_a_then_commit_by_hand(
        bare, tmp_path, "by hand\n\nReconciler-Instance: web\n(cherry picked from commit 123)\n"
    )
    git_trace.clear()
    fleet.refresh()
    records = fleet.records()
    assert git_trace.count("log") == 1
    assert records == fresh(bare, tmp_path, "whole")


def test_a_commit_made_elsewhere_with_plain_trailers_is_dated_as_git_prints_it(
    bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_trace: GitTrace
) -> None:
    at(monkeypatch, "2025-12-31T23:30:00-02:00")  # the time of the commit made by hand
    fleet = read_a_then_commit_by_hand(
        bare, tmp_path, "by hand\n\nReconciler-Instance: web\nReconciler-Phase: Progressing\n"
    )
    git_trace.clear()
    fleet.refresh()
    seen = fleet.records()[("a", "web")]
    assert git_trace.count("log") == 0  # walked in process
    whole = fresh(bare, tmp_path, "whole")[("a", "web")]
    assert seen == whole and seen.since == datetime(2026, 1, 1, 1, 30, tzinfo=UTC)
    assert seen.since.utcoffset() == whole.since.utcoffset() == timedelta(hours=-2)


def test_records_that_leave_a_moved_branch_leave_the_answer(bare: Path, tmp_path: Path) -> None:
    """The answer is kept between calls and changed where branches moved: a record
    deleted from a moved branch, and a deleted branch, are gone from it."""
    for cluster in ("a", "b"):
        writer(bare, tmp_path, cluster).record([status(cluster, "web"), status(cluster, "api")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    first = fleet.records(skip="b")
    assert sorted(first) == [("a", "api"), ("a", "web")]
    first.clear()  # a caller's copy: changing it changes nothing kept
    writer(bare, tmp_path, "a").record([], known=["web"])  # api's record leaves status/a
    fleet.refresh()
    assert sorted(fleet.records(skip="b")) == [("a", "web")]
    assert sorted(fleet.records()) == [("a", "web"), ("b", "api"), ("b", "web")]
    git(bare, "branch", "-D", "status/a")
    fleet.refresh()
    assert sorted(fleet.records(skip="b")) == []
    assert sorted(fleet.records()) == [("b", "api"), ("b", "web")]


def test_the_mirror_packs_its_refs_and_lets_git_gc_after_fetches(
    bare: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    """A reader that writes nothing of its own still keeps the mirror tidy: each fetch
    leaves a pack and a loose ref per moved branch (Git's ``gc --auto`` thresholds, and
    ``pack-refs`` past 32 loose status refs)."""
    writer(bare, tmp_path, "a").record([status("a", "web")])
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    fleet.refresh()
    head = git(bare, "rev-parse", "status/a")
    branch_off(bare, head, 40)
    packs = Path(fleet.repo.git_dir) / "objects" / "pack"
    for n in range(GC_PACKS + 1):  # what a pack per fetch comes to (no index: Git skips them)
        (packs / f"pack-{n:040x}.pack").write_bytes(b"")
    git_trace.clear()
    fleet.refresh()
    assert git_trace.count("gc", "--auto", "--quiet") == 1
    assert objects.loose_refs(fleet.repo, "refs/remotes/origin/status/") == 0
    heads = objects.list_refs(fleet.repo, "refs/remotes/origin/status/")
    assert len(heads) == 41 and set(heads.values()) == {head}
    assert len(fleet.records()) == 41


def test_many_moved_heads_come_in_one_refspec(
    bare: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    """A new mirror (or a fleet that all moved) fetches ``status/*`` whole, not a
    command line of a refspec per branch."""
    writer(bare, tmp_path, "a").record([status("a", "web")])
    head = git(bare, "rev-parse", "status/a")
    branch_off(bare, head, 70)
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
    git_trace.clear()
    fleet.refresh()
    [fetch] = [args for args in git_trace.commands() if "fetch" in args]
    assert [arg for arg in fetch if arg.startswith("+")] == [
        "+refs/heads/status/*:refs/remotes/origin/status/*"
    ]
    assert len(fleet.records()) == 71
