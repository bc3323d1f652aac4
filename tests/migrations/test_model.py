"""Ledger records, the ledger value and the once-only rule (pure, SPEC section 5)."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.model.migrations import (
    UNDO,
    LedgerFormatError,
    MigrationCheck,
    MigrationLedger,
    MigrationRecord,
    to_consider,
)


def record(
    name: str, outcome: str, version: str = "2.0.0", checksum: str = "sha256:a"
) -> MigrationRecord:
    return MigrationRecord(
        name=name,
        version=version,
        checksum=checksum,
        phase="pre",
        scope="app",
        started_at="2026-01-01T00:00:00Z",
        duration=41.25,
        check_duration=0.004,
        outcome=outcome,
        message="" if outcome != "failed" else "boom",
    )


def test_record_round_trips_through_dict() -> None:
    rec = record("add-orders-index", "failed")
    data = rec.to_dict()
    assert data == {
        "name": "add-orders-index",
        "version": "2.0.0",
        "checksum": "sha256:a",
        "phase": "pre",
        "scope": "app",
        "startedAt": "2026-01-01T00:00:00Z",
        "duration": 41.25,
        "checkDuration": 0.004,
        "outcome": "failed",
        "message": "boom",
    }
    assert MigrationRecord.from_dict(data) == rec
    upgrade = dataclasses.replace(rec, from_version="1.5.0")
    assert upgrade.to_dict()["fromVersion"] == "1.5.0"
    assert MigrationRecord.from_dict(upgrade.to_dict()) == upgrade


def test_record_rejects_unknown_outcome_and_missing_fields() -> None:
    with pytest.raises(
        LedgerFormatError, match='outcome "done" is not one of succeeded, notNeeded, failed'
    ):
        record("x", "done")
    data = record("x", "succeeded").to_dict()
    del data["checksum"]
    with pytest.raises(LedgerFormatError, match='needs a string "checksum"'):
        MigrationRecord.from_dict(data)
    with pytest.raises(LedgerFormatError, match="must be a mapping"):
        MigrationRecord.from_dict(["x"])  # type: ignore[arg-type]
    bad = {**record("x", "succeeded").to_dict(), "duration": "long"}
    with pytest.raises(LedgerFormatError, match="migration record 'x'"):
        MigrationRecord.from_dict(bad)


def test_ledger_round_trips_and_keeps_order() -> None:
    ledger = MigrationLedger("app", "ledger")
    ledger = ledger.with_record(record("a", "succeeded", "1.5.0"))
    ledger = ledger.with_record(record("b", "notNeeded", "2.0.0"))
    ledger = ledger.with_record(record("c", "succeeded", "2.1.0"))
    assert MigrationLedger.from_dict(ledger.to_dict()) == ledger
    assert [r.name for r in ledger.applied()] == ["c", "a"]  # newest first, only real runs
    assert ledger.latest("b") is not None and ledger.settled("b")
    with pytest.raises(LedgerFormatError, match='"records" must be a list'):
        MigrationLedger.from_dict({"scope": "app", "owner": "x", "records": "nope"})


def test_once_only_rule() -> None:
    ledger = MigrationLedger(
        "app",
        "ledger",
        (
            record("ran", "succeeded", "1.5.0"),
            record("skipped", "notNeeded", "2.0.0"),
            record("broke", "failed", "2.0.0"),
            record("retried", "failed", "2.0.0"),
            record("retried", "succeeded", "2.0.1"),
        ),
    )
    verdicts = {
        c.name: c
        for c in to_consider(
            [
                ("ran", "sha256:a"),
                ("skipped", "sha256:a"),
                ("broke", "sha256:a"),
                ("retried", "sha256:a"),
                ("new", "sha256:n"),
                ("changed", "sha256:z"),
            ],
            ledger.with_record(record("changed", "succeeded", "2.0.0")),
        )
    }
    assert {n for n, c in verdicts.items() if c.consider} == {"broke", "new"}
    assert verdicts["ran"].reason == "already succeeded in 1.5.0"
    assert verdicts["skipped"].reason == "already notNeeded in 2.0.0"
    assert verdicts["broke"].reason == "last run failed (2.0.0)"
    assert verdicts["new"].reason == "never run"
    assert verdicts["changed"].checksum_changed and not verdicts["changed"].consider
    assert not verdicts["ran"].checksum_changed


def test_check_knows_whether_state_decides() -> None:
    version_only = MigrationCheck.from_dict({"deployedVersion": "<2.0.0"})
    assert not version_only.has_state_condition and not version_only.empty
    full = {
        "objectMissing": {"apiVersion": "v1", "kind": "ConfigMap", "name": "a"},
        "fieldEquals": {
            "ref": {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "namespace": "x"},
            "path": "data.schema",
            "value": "1",
        },
        "deployedVersion": "<2.0.0",
    }
    check = MigrationCheck.from_dict(full)
    assert check.has_state_condition
    assert check.to_dict() == full
    assert MigrationCheck.from_dict(None).empty


def test_an_undone_migration_is_no_longer_applied_nor_settled() -> None:
    """An uninstall that undid ``a`` and then failed leaves the instance: if its file
    comes back, ``a`` is considered again, and a retried uninstall does not undo it twice."""
    undo = dataclasses.replace(record("a", "succeeded", "1.5.0"), phase=UNDO)
    ledger = MigrationLedger(
        "app",
        "ledger",
        (
            record("a", "succeeded", "1.5.0"),
            record("b", "succeeded", "2.0.0"),
            dataclasses.replace(undo, name="b", version="2.0.0", outcome="failed"),
            undo,
        ),
    )
    assert [r.name for r in ledger.applied()] == ["b"]  # a failed undo leaves b applied
    assert not ledger.settled("a") and ledger.settled("b")
    verdicts = {c.name: c for c in to_consider([("a", "sha256:a"), ("b", "sha256:a")], ledger)}
    assert verdicts["a"].consider and verdicts["a"].reason == "undone since its last run"
    assert not verdicts["b"].consider
    again = ledger.with_record(record("a", "succeeded", "2.0.0"))
    assert [r.name for r in again.applied()] == ["a", "b"]


def test_a_repeated_failure_replaces_the_one_before_it() -> None:
    """A migration retried for weeks keeps one failed record: ledgers are size-bounded."""
    ledger = MigrationLedger("app", "ledger")
    for _ in range(3):
        ledger = ledger.with_record(record("a", "failed"))
    ledger = ledger.with_record(record("a", "failed", "2.0.1"))  # another version's run
    ledger = ledger.with_record(record("b", "failed"))
    assert [(r.name, r.version) for r in ledger.records] == [
        ("a", "2.0.0"),
        ("a", "2.0.1"),
        ("b", "2.0.0"),
    ]
    ledger = ledger.with_record(record("a", "succeeded", "2.0.1"))
    assert [r.outcome for r in ledger.records if r.name == "a"] == ["failed", "failed", "succeeded"]
