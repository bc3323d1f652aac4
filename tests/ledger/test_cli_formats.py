"""``status``, ``history`` and ``migrations``: -o yaml|wide|name, --no-headers, status --watch."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml

from reconciler.cli import main
from reconciler.commands import watching
from reconciler.model.status import Phase
from reconciler.source.ledger import StatusLedger
from tests.ledger.test_ledger import NOW, status
from tests.source.fixtures import commit_file
from tests.source.servers import git

RAN = {
    "name": "add-orders-index",
    "version": "2.0.0",
    "checksum": "sha256:0123456789abcdef0123",
    "phase": "pre",
    "scope": "app",
    "startedAt": "2026-01-01T00:00:00Z",
    "duration": 41.2,
    "checkDuration": 0.004,
    "outcome": "succeeded",
    "message": "created index\nin 41s",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def repo(empty_remote: Path) -> list[str]:
    ledger = StatusLedger(empty_remote.as_uri(), "prod")
    ledger.record(
        [status(migrations=(RAN,)), status("api", phase=Phase.STALLED, reason="DowngradeBlocked")],
        now=NOW,
    )
    return ["--repo", empty_remote.as_uri(), "--cluster", "prod"]


@pytest.mark.parametrize("command", ["status", "history", "migrations"])
def test_yaml_equals_json(
    capsys: pytest.CaptureFixture[str], repo: list[str], command: str
) -> None:
    _, as_json, _ = run(capsys, command, *repo, "-o", "json")
    code, as_yaml, _ = run(capsys, command, *repo, "-o", "yaml")
    assert code == 0 and yaml.safe_load(as_yaml) == json.loads(as_json) != []


def test_name_output_pipes_names(capsys: pytest.CaptureFixture[str], repo: list[str]) -> None:
    assert run(capsys, "status", *repo, "-o", "name")[1] == "api\nweb\n"
    assert run(capsys, "migrations", *repo, "-o", "name")[1] == "web/add-orders-index\n"
    commits = run(capsys, "history", *repo, "-o", "name")[1].split()
    assert len(commits) == 2 and all(len(c) == 40 for c in commits)


def test_wide_and_no_headers(capsys: pytest.CaptureFixture[str], repo: list[str]) -> None:
    _, plain, _ = run(capsys, "status", *repo)
    _, bare, _ = run(capsys, "status", *repo, "--no-headers")
    assert bare.splitlines() == plain.splitlines()[1:]
    _, wide, _ = run(capsys, "status", *repo, "-o", "wide")
    assert wide.splitlines()[0].split() == [
        "INSTANCE", "APP", "VERSION", "DESIRED", "PHASE", "AGE", "SOURCE", "COMMIT", "OBJECTS", "BUILDS", "MESSAGE",
    ]  # fmt: skip
    assert "channel:stable   aaaaaaaaaaaa   7         -" in wide
    _, wide, _ = run(capsys, "history", *repo, "-o", "wide", "--no-headers")
    assert not wide.startswith("TIME") and " prod " in wide
    assert len(max(wide.split(), key=len)) >= 40  # whole commit ids
    _, wide, _ = run(capsys, "migrations", *repo, "-o", "wide")
    assert "FROM" in wide and "sha256:0123456789ab" in wide and "created index in 41s" in wide
    _, narrow, _ = run(capsys, "migrations", *repo)
    assert "created index" in narrow and "in 41s" not in narrow


def test_status_watch_redraws_when_the_branch_moves(
    capsys: pytest.CaptureFixture[str],
    repo: list[str],
    empty_remote: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Two quiet intervals print nothing; a new status commit is fetched and shown (the
    writer is elsewhere: its push does not move the command's mirror)."""
    ledger = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=tmp_path / "elsewhere")
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:  # a daemon elsewhere records an upgrade
            ledger.record([status(version="6.6.0", desired_version="6.6.0")], now=NOW)
        elif len(naps) == 4:
            raise KeyboardInterrupt  # Ctrl-C

    monkeypatch.setattr(watching, "_sleep", nap)
    code, out, _ = run(capsys, "status", *repo, "--watch", "--interval", "3s")
    assert code == 130 and naps == [3.0] * 4
    views = out.split("\n\n")
    assert len(views) == 2  # drawn at start and once after the commit, not per interval
    rows = [{line.split()[0]: line.split()[2] for line in view.splitlines()} for view in views]
    assert rows[0]["web"] == "6.5.0" and rows[1]["web"] == "6.6.0"


def test_namespace_filter_reads_each_instance_file_at_its_recorded_commit(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path, bare_remote: Path
) -> None:
    """The record has no namespace; its ``sourceCommit``'s instance file has, in a path or URL."""
    first = git(catalog_repo, "rev-parse", "HEAD")  # web in namespace web
    api = "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: podinfo\nchannel: stable\nnamespace: team-api\n"
    second = commit_file(catalog_repo, "clusters/prod/instances/api.yaml", api, "add api")
    git(catalog_repo, "push", "-q", "origin", "main")
    for repo in (str(catalog_repo), bare_remote.as_uri()):
        StatusLedger(repo, "prod").record(
            [
                status("web", source_commit=first, migrations=(RAN,)),
                status("api", source_commit=second),
                status("ghost", source_commit="f" * 40),  # a commit nobody has
            ],
            now=NOW,
        )
        where = ["--repo", repo, "--cluster", "prod"]
        assert run(capsys, "status", *where, "-o", "name")[1] == "api\nghost\nweb\n"
        assert run(capsys, "status", *where, "-n", "web", "-o", "name")[1] == "web\n"
        assert run(capsys, "status", *where, "--namespace", "team-api", "-o", "name")[1] == "api\n"
        assert run(capsys, "migrations", *where, "-n", "web", "-o", "name")[1] == (
            "web/add-orders-index\n"
        )
        assert run(capsys, "migrations", *where, "-n", "team-api", "-o", "name")[1] == ""


def test_phase_colours_keep_the_table_aligned_on_a_terminal(
    repo: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, plain, _ = run(capsys, "status", *repo)
    screen = Terminal()
    with monkeypatch.context() as patch:
        patch.setattr("sys.stdout", screen)
        assert main(["status", *repo]) == 0
    shown = screen.getvalue()
    assert "\x1b[31mStalled\x1b[0m" in shown and "\x1b[32mReady\x1b[0m" in shown
    assert re.sub(r"\x1b\[[0-9;]*m", "", shown) == plain


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True
