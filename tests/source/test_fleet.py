"""``FleetStatus``: every cluster's records for the wave gate, read again only where a head moved."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.model.errors import SourceError
from reconciler.model.status import Phase
from reconciler.source.fleet import FleetStatus
from reconciler.source.ledger import StatusLedger
from reconciler.source.runner import MissingRemoteBranch
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
    writer(bare, tmp_path, "a").record([status("a", "web")])
    ledger = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader")
    fleet = ledger.fleet()
    fleet.refresh()
    mirror = Path(fleet.repo.git_dir)
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
    fleet = StatusLedger(bare.as_uri(), "me", cache_dir=tmp_path / "reader").fleet()
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
