"""``FleetStatus``: every cluster's records for the wave gate, read again only where a head moved."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.model.status import Phase
from reconciler.source.fleet import FleetStatus
from reconciler.source.ledger import StatusLedger
from tests.report.conftest import record as status
from tests.source.servers import git

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
