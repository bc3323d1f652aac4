"""``reconciler migrations``: the ledger read from the status branch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.source.ledger import StatusLedger
from tests.ledger.test_ledger import NOW, status

RAN = {
    "name": "add-orders-index",
    "version": "2.0.0",
    "checksum": "sha256:a",
    "phase": "pre",
    "scope": "app",
    "startedAt": "2026-01-01T00:00:00Z",
    "duration": 41.2,
    "checkDuration": 0.004,
    "outcome": "succeeded",
}
SKIPPED = {
    **RAN,
    "name": "backfill",
    "version": "2.1.0",
    "phase": "post",
    "outcome": "notNeeded",
    "duration": 0.0,
    "message": "ConfigMap/fin/books-order-totals exists",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def recorded(empty_remote: Path) -> Path:
    ledger = StatusLedger(empty_remote.as_uri(), "prod")
    ledger.record(
        [
            status("books", migrations=(RAN, SKIPPED)),
            status("web"),
            status("broken", migrations=({"name": "x"},)),
        ],
        now=NOW,
    )
    return empty_remote


def test_ledger_table_json_and_instance_filter(
    capsys: pytest.CaptureFixture[str], recorded: Path
) -> None:
    repo = recorded.as_uri()
    code, out, _ = run(capsys, "migrations", "--repo", repo, "--cluster", "prod", "books")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "INSTANCE",
        "MIGRATION",
        "VERSION",
        "PHASE",
        "SCOPE",
        "OUTCOME",
        "STARTED",
        "DURATION",
        "CHECK",
        "MESSAGE",
    ]
    assert lines[1].split() == [
        "books",
        "add-orders-index",
        "2.0.0",
        "pre",
        "app",
        "succeeded",
        "2026-01-01T00:00:00Z",
        "41.2s",
        "4ms",
    ]
    assert lines[2].split()[5:9] == ["notNeeded", "2026-01-01T00:00:00Z", "0ms", "4ms"]
    assert lines[2].endswith("  ConfigMap/fin/books-order-totals exists")
    code, out, _ = run(
        capsys, "migrations", "--repo", repo, "--cluster", "prod", "books", "-o", "json"
    )
    assert json.loads(out) == [{"instance": "books", **RAN}, {"instance": "books", **SKIPPED}]


def test_unreadable_records_are_reported_and_exit_1(
    capsys: pytest.CaptureFixture[str], recorded: Path
) -> None:
    code, out, err = run(capsys, "migrations", "--repo", recorded.as_uri(), "--cluster", "prod")
    assert code == 1
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["books", "books"]
    assert (
        'reconciler: unreadable migration record broken: migrations[0]: migration record needs a string "version"'
        in err
    )


def test_nothing_recorded_is_said_plainly(
    capsys: pytest.CaptureFixture[str], empty_remote: Path
) -> None:
    code, out, _ = run(capsys, "migrations", "--repo", str(empty_remote), "--cluster", "prod")
    assert code == 0 and "no status recorded yet for cluster prod" in out
    StatusLedger(empty_remote.as_uri(), "prod").record([status("web")], now=NOW)
    _, out, _ = run(capsys, "migrations", "--repo", str(empty_remote), "--cluster", "prod")
    assert out.startswith("no migration recorded yet on status/prod")
    _, out, _ = run(capsys, "migrations", "--repo", str(empty_remote), "--cluster", "prod", "nope")
    assert out.strip() == "no status recorded for instance nope on status/prod"
