"""What a change considers, and what an uninstall undoes from which version (pure)."""

from __future__ import annotations

import dataclasses

from reconciler.migrations import migration_checksum, pending, plan_uninstall
from reconciler.model.catalog import AppVersion, Migration
from reconciler.model.migrations import UNDO, MigrationLedger, MigrationRecord
from reconciler.model.version import parse_version


def mig(name: str, phase: str = "pre", scope: str = "app") -> Migration:
    return Migration(name, phase, scope=scope, python=f"code-{name}", undo=None)


def version(key: str, *migrations: Migration) -> AppVersion:
    return AppVersion(
        app="ledger",
        version=parse_version(key),
        directory=f"apps/ledger/versions/{key}",
        migrations=migrations,
    )


# Installed at 1.30.0, upgraded through 1.31.0, 1.40.0 and 1.41.0, then removed.
V = {
    "1.30.0": version("1.30.0", mig("release", "uninstall")),
    "1.31.0": version("1.31.0", mig("a"), mig("release", "uninstall")),
    "1.40.0": version("1.40.0", mig("a"), mig("b", "post"), mig("release", "uninstall")),
    "1.41.0": version(
        "1.41.0",
        mig("a"),
        mig("b", "post"),
        mig("c"),
        mig("g", scope="global"),
        mig("release", "uninstall"),
    ),
}


def rec(name: str, key: str, outcome: str = "succeeded", phase: str = "pre") -> MigrationRecord:
    m = next(m for m in V[key].migrations if m.name == name)
    return MigrationRecord(
        name=name,
        version=key,
        checksum=migration_checksum(V[key], m),
        phase=phase,
        scope="app",
        started_at="2026-01-01T00:00:00Z",
        duration=1.0,
        check_duration=0.0,
        outcome=outcome,
    )


LEDGER = MigrationLedger(
    "app",
    "books",
    (rec("a", "1.31.0"), rec("b", "1.40.0", phase="post"), rec("c", "1.41.0", "notNeeded")),
)


def test_pending_applies_phase_scope_and_the_once_only_rule() -> None:
    runs, verdicts = pending(V["1.41.0"], "pre", "app", LEDGER)
    assert [p.migration.name for p in runs] == []  # a succeeded, c was not needed
    assert [(v.name, v.reason) for v in verdicts] == [
        ("a", "already succeeded in 1.31.0"),
        ("c", "already notNeeded in 1.41.0"),
    ]
    runs, _ = pending(V["1.41.0"], "pre", "global", MigrationLedger("global", "prod"))
    assert [(p.migration.name, p.checksum) for p in runs] == [
        ("g", migration_checksum(V["1.41.0"], V["1.41.0"].migrations[3]))
    ]
    runs, _ = pending(V["1.40.0"], "post", "app", MigrationLedger("app", "books"))
    assert [p.migration.name for p in runs] == ["b"]


def test_uninstall_runs_uninstall_migrations_then_undoes_newest_first_from_own_versions() -> None:
    plan = plan_uninstall(V["1.41.0"], LEDGER, V)
    assert plan.ok
    assert [m.name for m in plan.uninstall] == ["release"]
    assert [(s.record.name, s.version.key) for s in plan.undo] == [("b", "1.40.0"), ("a", "1.31.0")]
    assert plan.undo[1].version is V["1.31.0"]  # 1.31's own definition, not 1.41's


def test_a_version_the_ledger_needs_and_the_catalog_lost_is_an_error() -> None:
    lost = {k: v for k, v in V.items() if k != "1.31.0"}
    plan = plan_uninstall(V["1.41.0"], LEDGER, lost)
    assert not plan.ok
    assert plan.errors == (
        'version 1.31.0 is not in the catalog, but the undo of migration "a" it applied needs it',
    )
    dropped = {**V, "1.40.0": version("1.40.0")}
    assert plan_uninstall(V["1.41.0"], LEDGER, dropped).errors == (
        'apps/ledger/versions/1.40.0 no longer ships migration "b" that it applied',
    )
    assert (
        plan_uninstall(None, LEDGER, V)
        .errors[0]
        .startswith("the deployed version is not in the catalog")
    )


def test_a_retried_uninstall_skips_what_was_undone_and_never_undoes_global_runs() -> None:
    """The first attempt undid ``b`` and failed on ``a``; global ``g`` serves the cluster."""
    undone_b = dataclasses.replace(rec("b", "1.40.0", phase="post"), phase=UNDO)
    failed_a = dataclasses.replace(rec("a", "1.31.0", "failed"), phase=UNDO)
    global_g = dataclasses.replace(rec("g", "1.41.0"), scope="global")
    ledger = MigrationLedger("app", "books", (*LEDGER.records, global_g, undone_b, failed_a))
    plan = plan_uninstall(V["1.41.0"], ledger, V)
    assert [(s.record.name, s.version.key) for s in plan.undo] == [("a", "1.31.0")]
