"""Read commands inside a clone: the remote's status branch, and unknown clusters (exit 2).

After ``git clone`` and ``git fetch`` a checkout has ``origin/status/prod`` and no
local ``status/prod``; ``status --repo .`` must read the remote's copy. A cluster
that neither the catalog nor any status branch knows is a typo: exit 2, naming
the known ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.model.errors import SourceError
from reconciler.model.status import Phase
from reconciler.source.ledger import StatusLedger
from tests.ledger.test_ledger import NOW, status
from tests.source.servers import git


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def clone(bare_remote: Path, catalog_repo: Path) -> Path:
    """The catalog checkout after the daemon pushed status/prod and ``git fetch`` ran."""
    ledger = StatusLedger(bare_remote.as_uri(), "prod")
    ledger.record([status(phase=Phase.PROGRESSING, version=None)], now=NOW)
    ledger.record([status()], now=NOW)
    git(catalog_repo, "fetch", "-q", "origin")
    assert "status/prod" not in git(catalog_repo, "branch", "--list")
    return catalog_repo


def test_status_in_a_checkout_reads_the_remote_tracking_branch(
    capsys: pytest.CaptureFixture[str], clone: Path
) -> None:
    code, out, _ = run(capsys, "status", "--repo", str(clone), "--cluster", "prod", "-o", "json")
    assert code == 0
    assert [(r["instance"], r["phase"]) for r in json.loads(out)] == [("web", "Ready")]
    code, out, _ = run(capsys, "history", "--repo", str(clone), "--cluster", "prod", "-o", "json")
    assert code == 0 and [e["phase"] for e in json.loads(out)] == ["Ready", "Progressing"]
    code, out, _ = run(
        capsys,
        "status",
        "--repo",
        str(clone),
        "--cluster",
        "prod",
        "--status-branch",
        "origin/status/prod",
        "-o",
        "name",
    )
    assert code == 0 and out == "web\n"


def test_a_local_branch_wins_over_the_remote_copy(
    capsys: pytest.CaptureFixture[str], clone: Path
) -> None:
    StatusLedger(str(clone), "prod").record([status("api")], now=NOW)
    code, out, _ = run(capsys, "status", "--repo", str(clone), "--cluster", "prod", "-o", "name")
    assert code == 0 and out == "api\n"


def test_a_remote_tracking_branch_is_never_written(clone: Path) -> None:
    ledger = StatusLedger(str(clone), "prod", remote_fallback=True)
    assert ledger.source_ref == "origin/status/prod"
    with pytest.raises(SourceError, match="read-only"):
        ledger.record([status("api")], now=NOW)
    assert "status/prod" not in git(clone, "branch", "--list")


@pytest.mark.parametrize("command", ["status", "history", "migrations"])
def test_unknown_cluster_exits_2_naming_the_known_ones(
    capsys: pytest.CaptureFixture[str], clone: Path, command: str
) -> None:
    code, out, err = run(capsys, command, "--repo", str(clone), "--cluster", "prdo")
    assert code == 2 and out == ""
    assert "no cluster named prdo; known: prod" in err


def test_unknown_cluster_through_a_url_knows_catalog_and_branches(
    capsys: pytest.CaptureFixture[str], clone: Path, bare_remote: Path
) -> None:
    # "staging" has a status branch only; "prod" is in the catalog and has one
    StatusLedger(bare_remote.as_uri(), "staging").record([status(cluster="staging")], now=NOW)
    url = bare_remote.as_uri()
    code, _, err = run(capsys, "status", "--repo", url, "--cluster", "nope")
    assert code == 2 and "no cluster named nope; known: prod, staging" in err
    code, _, err = run(capsys, "rollout", "status", "web", "--repo", url, "--cluster", "nope")
    assert code == 2 and "no cluster named nope; known: prod, staging" in err


def test_a_catalog_cluster_without_status_yet_is_not_an_error(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path
) -> None:
    code, out, _ = run(capsys, "status", "--repo", str(catalog_repo), "--cluster", "prod")
    assert code == 0 and "no status recorded yet for cluster prod" in out


def test_report_in_a_checkout_finds_and_reads_the_remote_copies(
    capsys: pytest.CaptureFixture[str], clone: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    code, out, err = run(capsys, "report", "--repo", str(clone), "--html", str(site))
    assert code == 0, err
    assert "1 cluster, 1 instance" in out
    index = (site / "index.html").read_text()
    assert 'data-cluster="prod"' in index and 'data-instance="web"' in index
    assert (site / "prod" / "web.html").is_file()
