"""``--repo``/``--cluster`` defaults: $RECONCILER_REPO, $RECONCILER_CLUSTER, ``config set-cluster``.

One meaning for ``--repo`` everywhere (a checkout path or a Git URL); the old
positional ``CATALOG`` of the catalog commands is the same as ``--repo``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.source.ledger import StatusLedger
from tests.ledger.test_ledger import NOW, status
from tests.source.servers import git

# the fixture's catalog carries deliberate validation errors: resolve says so with exit 1
RESOLVED = 1


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's errors, and a missing --cluster
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECONCILER_REPO", raising=False)
    monkeypatch.delenv("RECONCILER_CLUSTER", raising=False)


@pytest.fixture
def recorded(catalog_repo: Path, clean_env: None) -> Path:
    StatusLedger(str(catalog_repo), "prod").record([status()], now=NOW)
    return catalog_repo


def test_no_cluster_anywhere_exits_2_saying_how_to_set_one(
    capsys: pytest.CaptureFixture[str], recorded: Path
) -> None:
    code, out, err = run(capsys, "status", "--repo", str(recorded))
    assert code == 2 and out == ""
    assert "--cluster" in err and "RECONCILER_CLUSTER" in err and "config set-cluster" in err


def test_environment_gives_repo_and_cluster(
    capsys: pytest.CaptureFixture[str], recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECONCILER_REPO", str(recorded))
    monkeypatch.setenv("RECONCILER_CLUSTER", "prod")
    code, out, _ = run(capsys, "status", "-o", "name")
    assert code == 0 and out == "web\n"
    code, out, _ = run(capsys, "resolve", "-o", "name")
    assert code == RESOLVED and out == "web\n"
    # the flag wins over the environment
    code, _, err = run(capsys, "status", "--cluster", "prdo")
    assert code == 2 and "no cluster named prdo; known: prod" in err


def test_checkout_default_cluster_like_a_current_context(
    capsys: pytest.CaptureFixture[str], recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(recorded)
    code, out, _ = run(capsys, "config", "get-cluster")
    assert code == 1
    code, out, _ = run(capsys, "config", "set-cluster", "prod")
    assert code == 0 and "set to prod" in out
    assert git(recorded, "config", "--get", "reconciler.cluster") == "prod"
    code, out, _ = run(capsys, "config", "get-cluster")
    assert code == 0 and out.startswith("prod (from reconciler.cluster")
    code, out, _ = run(capsys, "status", "-o", "name")
    assert code == 0 and out == "web\n"
    code, out, _ = run(capsys, "history", "-o", "json")
    assert code == 0 and [e["instance"] for e in json.loads(out)] == ["web"]
    # the environment wins over the checkout's default
    monkeypatch.setenv("RECONCILER_CLUSTER", "nope")
    code, _, err = run(capsys, "status")
    assert code == 2 and "no cluster named nope" in err
    monkeypatch.delenv("RECONCILER_CLUSTER")
    code, _, _ = run(capsys, "config", "unset-cluster")
    assert code == 0
    code, _, err = run(capsys, "status")
    assert code == 2 and "config set-cluster" in err


def test_set_cluster_refuses_an_unknown_cluster_and_a_url(
    capsys: pytest.CaptureFixture[str], recorded: Path
) -> None:
    code, _, err = run(capsys, "config", "set-cluster", "prdo", "--repo", str(recorded))
    assert code == 2 and "no cluster named prdo; known: prod" in err
    code, _, err = run(capsys, "config", "set-cluster", "prod", "--repo", recorded.as_uri())
    assert code == 2 and "needs a checkout path" in err
    code, _, err = run(capsys, "config", "set-cluster", "prod", "--repo", str(recorded / "nope"))
    assert code == 2


def test_positional_catalog_is_the_same_as_repo(
    capsys: pytest.CaptureFixture[str], recorded: Path
) -> None:
    code, out, err = run(capsys, "resolve", str(recorded), "--cluster", "prod", "-o", "name")
    assert code == RESOLVED and out == "web\n" and "deprecated" not in err
    code, out, err = run(
        capsys, "resolve", "--repo", str(recorded), "--cluster", "prod", "-o", "name"
    )
    assert code == RESOLVED and out == "web\n" and "deprecated" not in err
    code, _, err = run(
        capsys, "resolve", str(recorded), "--repo", "/elsewhere", "--cluster", "prod"
    )
    assert code == 2 and "not both" in err


def test_catalog_commands_read_a_url_and_writing_ones_refuse_it(
    capsys: pytest.CaptureFixture[str],
    recorded: Path,
    bare_remote: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    url = bare_remote.as_uri()
    code, out, _ = run(capsys, "resolve", "--repo", url, "--cluster", "prod", "-o", "name")
    assert code == RESOLVED and out == "web\n"
    code, _, err = run(capsys, "channel", "set", "podinfo", "stable", "6.5.0", "--repo", url)
    assert code == 2 and "needs a checkout" in err
    code, _, err = run(capsys, "rollout", "promote", "web", "--cluster", "prod", "--repo", url)
    assert code == 2 and "needs a checkout" in err
