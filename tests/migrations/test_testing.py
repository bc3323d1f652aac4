"""reconciler.testing: the pytest helper migration authors use (loaded as a pytest11 plugin)."""

from __future__ import annotations

import pytest

from reconciler.model.changeset import ObjectRef
from reconciler.testing import MigrationHarness, MigrationStepFailed
from tests.migrations import samples


def test_run_migration_runs_when_needed_then_skips(migration_sandbox: MigrationHarness) -> None:
    harness = migration_sandbox.with_defaults(instance="books", namespace="fin", to_version="3.0.0")
    first = harness.run_migration(samples.CreatesMarker())
    assert (first.needed, first.ran, [s.step for s in first.steps]) == (
        True,
        True,
        ["needed", "run"],
    )
    live = harness.client.get(ObjectRef("v1", "ConfigMap", "fin", "books-migrated"))
    assert live is not None and live["data"] == {"to": "3.0.0", "components": "1"}
    again = harness.run_migration(samples.CreatesMarker())
    assert (again.needed, again.ran) == (False, False)
    harness.undo(samples.CreatesMarker())
    assert harness.needed(samples.CreatesMarker()) is True


def test_failures_raise_with_the_reconcilers_message(migration_sandbox: MigrationHarness) -> None:
    with pytest.raises(
        MigrationStepFailed, match=r"run\(\) raised RuntimeError: orders table is locked"
    ):
        migration_sandbox.run_migration(samples.Raises())
    with pytest.raises(MigrationStepFailed, match=r"needed\(\) must return True or False"):
        migration_sandbox.needed(samples.NotBool())
    samples.RELEASE.clear()
    try:
        with pytest.raises(MigrationStepFailed, match=r"did not finish within 0.05s"):
            migration_sandbox.run(samples.Hangs(), timeout=0.05)
    finally:
        samples.RELEASE.set()


def test_run_migration_fixture_and_ctx_overrides(run_migration: object) -> None:
    result = run_migration(samples.CreatesMarker(), instance="other", namespace="ns2")  # type: ignore[operator]
    assert result.ran


def test_a_registered_name_is_loaded_through_its_entry_point(
    migration_sandbox: MigrationHarness,
) -> None:
    assert migration_sandbox.run_migration("ledger-backfill-order-totals").ran
    with pytest.raises(Exception, match='python migration "nope" is not registered'):
        migration_sandbox.run_migration("nope")


def test_loading_the_plugin_imports_neither_the_kubernetes_client_nor_the_sandbox() -> None:
    """pytest loads the plugin in every run wherever reconciler is installed: the client
    and the sandbox server (most of a second) are imported when a harness starts."""
    import subprocess
    import sys

    probe = (
        "import sys, reconciler.testing; "
        "print(sorted(m for m in ('kubernetes', 'reconciler.kube', 'reconciler.sandbox.server') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
