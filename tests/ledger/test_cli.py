"""`reconciler status`, `history` and `channel set` through the real command line entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.model.status import Phase
from reconciler.source.ledger import StatusLedger
from tests.ledger.test_ledger import NOW, status
from tests.source.fixtures import CHANNELS
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import GitDaemon, git

__all__ = ["git_trace"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def recorded(empty_remote: Path) -> Path:
    ledger = StatusLedger(empty_remote.as_uri(), "prod")
    ledger.record([status(phase=Phase.PROGRESSING, version=None)], now=NOW)
    ledger.record(
        [status(), status("api", phase=Phase.STALLED, reason="DowngradeBlocked", message="m")],
        now=NOW,
    )
    return empty_remote


def test_status_table_and_json_from_a_remote_url(
    capsys: pytest.CaptureFixture[str], recorded: Path, git_daemon: GitDaemon
) -> None:
    code, out, _ = run(
        capsys, "status", "--repo", git_daemon.url("status.git"), "--cluster", "prod"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["INSTANCE", "APP", "VERSION", "DESIRED", "PHASE", "AGE", "MESSAGE"]
    assert lines[1].split()[:5] == ["api", "podinfo", "6.5.0", "6.5.0", "Stalled"]
    assert lines[2].split()[:5] == ["web", "podinfo", "6.5.0", "6.5.0", "Ready"]
    code, out, _ = run(
        capsys, "status", "--repo", recorded.as_uri(), "--cluster", "prod", "-o", "json"
    )
    records = json.loads(out)
    assert [(r["instance"], r["app"], r["version"], r["phase"]) for r in records] == [
        ("api", "podinfo", "6.5.0", "Stalled"),
        ("web", "podinfo", "6.5.0", "Ready"),
    ]


def test_no_status_yet_is_said_plainly(
    capsys: pytest.CaptureFixture[str], empty_remote: Path
) -> None:
    code, out, _ = run(capsys, "status", "--repo", str(empty_remote), "--cluster", "prod")
    assert code == 0 and "no status recorded yet for cluster prod" in out
    code, out, _ = run(capsys, "history", "--repo", str(empty_remote), "--cluster", "prod")
    assert code == 0 and "branch status/prod does not exist" in out
    code, out, _ = run(
        capsys, "status", "--repo", str(empty_remote), "--cluster", "prod", "--output", "json"
    )
    assert json.loads(out) == []


def test_history_table_json_filter_and_limit(
    capsys: pytest.CaptureFixture[str], recorded: Path
) -> None:
    repo = recorded.as_uri()
    code, out, _ = run(capsys, "history", "--repo", repo, "--cluster", "prod")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "TIME",
        "INSTANCE",
        "VERSION",
        "PHASE",
        "SOURCE",
        "COMMIT",
        "SUMMARY",
    ]
    assert len(lines) == 4
    code, out, _ = run(capsys, "history", "--repo", repo, "--cluster", "prod", "web", "-o", "json")
    entries = json.loads(out)
    assert [(e["instance"], e["version"], e["phase"]) for e in entries] == [
        ("web", "6.5.0", "Ready"),
        ("web", "none", "Progressing"),
    ]
    assert all({"time", "commit", "sourceCommit", "summary"} <= set(e) for e in entries)
    code, out, _ = run(
        capsys, "history", "--repo", repo, "--cluster", "prod", "--limit", "1", "-o", "json"
    )
    assert len(json.loads(out)) == 1
    code, out, _ = run(capsys, "history", "--repo", repo, "--cluster", "prod", "nosuch")
    assert "no status changes recorded for instance nosuch" in out
    code, _, err = run(capsys, "history", "--repo", repo, "--cluster", "prod", "--limit", "-1")
    assert code == 2 and "--limit" in err


def test_corrupted_status_file_is_shown_and_exits_1(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path
) -> None:
    StatusLedger(str(catalog_repo), "prod").record([status(), status("api")], now=NOW)
    git(catalog_repo, "checkout", "-q", "status/prod")
    (catalog_repo / "instances/api.yaml").write_text("kind: Nonsense\n")
    git(catalog_repo, "commit", "-qam", "oops")
    git(catalog_repo, "checkout", "-q", "main")
    code, out, err = run(capsys, "status", "--repo", str(catalog_repo), "--cluster", "prod")
    assert code == 1
    assert "api" in out and "Unknown" in out
    assert "instances/api.yaml: kind must be InstanceStatus" in err
    code, out, _ = run(
        capsys, "status", "--repo", str(catalog_repo), "--cluster", "prod", "-o", "json"
    )
    broken = next(r for r in json.loads(out) if r["instance"] == "api")
    assert broken["phase"] == "Unknown" and "kind must be" in broken["error"]


def test_unreachable_repository_is_an_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(
        capsys, "status", "--repo", (tmp_path / "gone.git").as_uri(), "--cluster", "prod"
    )
    assert code == 2 and err.startswith("reconciler: ") and "gone.git" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["history"],
        ["migrations"],
        ["rollout", "status", "web"],
        ["report", "--html", "site"],
    ],
)
def test_every_reading_command_exits_2_for_an_unreadable_repository(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    """docs/CLI.md: a repository that cannot be read is an environment error (2), not a finding."""
    gone = (tmp_path / "gone.git").as_uri()
    argv = [a if a != "site" else str(tmp_path / "site") for a in argv]
    code, _, err = run(capsys, *argv, "--repo", gone, "--cluster", "prod")
    assert code == 2, err
    assert "gone.git" in err and "Traceback" not in err


def _diff_lines(repo: Path) -> list[str]:
    diff = git(repo, "diff", "-U0", "HEAD~1", "HEAD")
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_channel_set_is_a_one_line_commit(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path
) -> None:
    code, out, _ = run(
        capsys, "channel", "set", "podinfo", "stable", "6.6.0", "--repo", str(catalog_repo)
    )
    assert code == 0 and "podinfo: channel stable 6.5.0 -> 6.6.0" in out
    assert _diff_lines(catalog_repo) == [
        "-    stable: 6.5.0     # promoted after a week on fast",
        "+    stable: 6.6.0     # promoted after a week on fast",
    ]
    text = (catalog_repo / "apps/podinfo/channels.yaml").read_text()
    assert text == CHANNELS.replace("stable: 6.5.0", "stable: 6.6.0")
    assert git(catalog_repo, "log", "-1", "--format=%s") == (
        "podinfo: move channel stable 6.5.0 -> 6.6.0"
    )
    assert git(catalog_repo, "status", "--porcelain") == ""


def test_channel_set_keeps_quotes(capsys: pytest.CaptureFixture[str], catalog_repo: Path) -> None:
    code, out, _ = run(
        capsys,
        "channel",
        "set",
        "podinfo",
        "fast",
        "6.7.0-rc.1",
        "--repo",
        str(catalog_repo),
        "-o",
        "json",
    )
    assert code == 0
    move = json.loads(out)
    assert move["from"] == "6.6.0" and move["to"] == "6.7.0-rc.1" and move["commit"]
    assert _diff_lines(catalog_repo) == ['-    fast: "6.6.0"', '+    fast: "6.7.0-rc.1"']


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["podinfo", "stable", "6.4.0"], 1, "would move backwards (6.5.0 -> 6.4.0); use --force"),
        (["podinfo", "stable", "6.6.1"], 1, "6.6.1 is yanked"),
        (["podinfo", "stable", "9.9.9"], 1, "app podinfo has no version 9.9.9"),
        (["nginx", "stable", "1.0.0"], 1, "apps/nginx: no such app"),
        (
            ["podinfo", "beta", "6.6.0"],
            1,
            "no channel 'beta' (channels: experimental, fast, stable)",
        ),
        (["podinfo", "stable", "v6.6.0"], 2, 'must not start with "v"'),
        (["Podinfo", "stable", "6.6.0"], 2, "not a valid name"),
    ],
)
def test_channel_set_refusals(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path, argv: list[str], code: int, message: str
) -> None:
    head = git(catalog_repo, "rev-parse", "HEAD")
    got, _, err = run(capsys, "channel", "set", *argv, "--repo", str(catalog_repo))
    assert got == code and message in err
    assert git(catalog_repo, "rev-parse", "HEAD") == head
    assert git(catalog_repo, "status", "--porcelain") == ""


def test_channel_set_force_moves_back(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path
) -> None:
    code, _, _ = run(
        capsys,
        "channel",
        "set",
        "podinfo",
        "stable",
        "6.4.0",
        "--force",
        "--repo",
        str(catalog_repo),
    )
    assert code == 0
    assert git(catalog_repo, "log", "-1", "--format=%s") == (
        "podinfo: move channel back stable 6.5.0 -> 6.4.0"
    )


def test_channel_set_same_version_makes_no_commit(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path
) -> None:
    head = git(catalog_repo, "rev-parse", "HEAD")
    code, out, _ = run(
        capsys, "channel", "set", "podinfo", "stable", "6.5.0", "--repo", str(catalog_repo)
    )
    assert code == 0 and "already points to 6.5.0" in out
    assert git(catalog_repo, "rev-parse", "HEAD") == head


def test_channel_set_refuses_a_dirty_file_and_a_non_checkout(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path, tmp_path: Path
) -> None:
    path = catalog_repo / "apps/podinfo/channels.yaml"
    path.write_text(path.read_text() + "# local edit\n")
    code, _, err = run(
        capsys, "channel", "set", "podinfo", "stable", "6.6.0", "--repo", str(catalog_repo)
    )
    assert code == 1 and "uncommitted changes" in err
    plain = tmp_path / "plain"
    plain.mkdir()
    code, _, err = run(capsys, "channel", "set", "podinfo", "stable", "6.6.0", "--repo", str(plain))
    assert code == 2 and "not a Git checkout" in err


def test_channel_set_push(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path, bare_remote: Path
) -> None:
    code, out, _ = run(
        capsys,
        "channel",
        "set",
        "podinfo",
        "stable",
        "6.6.0",
        "--push",
        "--repo",
        str(catalog_repo),
    )
    assert code == 0 and "pushed to origin/main" in out
    assert git(bare_remote, "rev-parse", "main") == git(catalog_repo, "rev-parse", "HEAD")


def test_channel_set_push_rejected_keeps_the_local_commit(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path, bare_remote: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(bare_remote), str(other))
    (other / "x.txt").write_text("x\n")
    git(other, "add", "x.txt")
    git(other, "commit", "-qm", "someone else")
    git(other, "push", "-q", "origin", "main")
    code, _, err = run(
        capsys,
        "channel",
        "set",
        "podinfo",
        "stable",
        "6.6.0",
        "--push",
        "--repo",
        str(catalog_repo),
    )
    assert code == 1 and "was rejected" in err and "git pull --rebase" in err
    assert git(catalog_repo, "log", "-1", "--format=%s").startswith("podinfo: move channel")


def test_channel_set_push_without_upstream(
    capsys: pytest.CaptureFixture[str], catalog_repo: Path
) -> None:
    code, _, err = run(
        capsys,
        "channel",
        "set",
        "podinfo",
        "stable",
        "6.6.0",
        "--push",
        "--repo",
        str(catalog_repo),
    )
    assert code == 1 and "no upstream" in err


# what the read-only commands must not import: the catalog loader with its JSON-schema
# stack, and the migrations stack (``reconciler migrations`` needs it, they do not)
HEAVY = ("jsonschema", "fastjsonschema", "reconciler.catalog.loader", "reconciler.migrations")
IMPORTS_OF = """\
import json, sys
from reconciler.cli import main
code = main(sys.argv[1:])
heavy = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


@pytest.mark.parametrize("command", ["status", "history"])
def test_a_read_only_command_starts_without_the_catalog_and_migrations_stacks(
    recorded: Path, command: str, tmp_path: Path
) -> None:
    """``status`` and ``history`` read records from the status branch; importing the
    catalog loader, jsonschema and the migrations package cost them about 0.2 s of
    every start (issue 33). Run in a fresh interpreter, as a user runs them."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            IMPORTS_OF.format(heavy=HEAVY),
            command,
            "--repo",
            str(recorded),
            "--cluster",
            "prod",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RECONCILER_CACHE_DIR": str(tmp_path / "cache")},
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert "web" in done.stdout and "api" in done.stdout  # it read the records
    assert report["heavy"] == [], f"reconciler {command} imported {report['heavy']}"


@pytest.mark.parametrize(
    "command", [["status"], ["history"], ["migrations"], ["rollout", "status", "web"]]
)
def test_a_read_command_fetches_the_status_branch_once_and_reads_what_it_fetched(
    capsys: pytest.CaptureFixture[str],
    recorded: Path,
    tmp_path: Path,
    git_trace: GitTrace,
    command: list[str],
) -> None:
    """The check for a known cluster fetches the branch; the read after it uses that fetch
    (a second fetch a moment later was a second connection to the remote). What it reads
    is the remote's newest: another writer's record made since the last command shows."""
    repo = recorded.as_uri()
    assert run(capsys, *command, "--repo", repo, "--cluster", "prod", "-o", "json")[0] == 0
    other = StatusLedger(repo, "prod", cache_dir=tmp_path / "another-writer")
    (moved,) = other.record([status(version="6.6.0", desired_version="6.6.0")], now=NOW)
    git_trace.clear()
    code, out, _ = run(capsys, *command, "--repo", repo, "--cluster", "prod", "-o", "json")
    assert code == 0
    assert git_trace.count("fetch") == 1
    assert StatusLedger(repo, "prod").head() == moved.commit  # the command's mirror
    if command != ["migrations"]:  # which lists only migration records
        assert '"6.6.0"' in out
