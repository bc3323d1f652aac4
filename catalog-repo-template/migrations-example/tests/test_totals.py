"""The example migration against a fresh sandbox, through reconciler's pytest helper.

``migration_sandbox`` comes from ``reconciler.testing`` (a pytest plugin installed
with reconciler); the migration is loaded by its registered name, exactly as the
reconciler loads it, so these tests also prove the entry point is registered.
"""

from __future__ import annotations

from reconciler.model.changeset import ObjectRef
from reconciler.testing import MigrationHarness

NAME = "ledger-backfill-order-totals"


def _marker(harness: MigrationHarness) -> dict | None:
    return harness.client.get(ObjectRef("v1", "ConfigMap", "ledger", "ledger-order-totals"))


def test_runs_once_then_is_not_needed(migration_sandbox: MigrationHarness) -> None:
    harness = migration_sandbox.with_defaults(
        instance="ledger", namespace="ledger", app="ledger", to_version="2.1.0", phase="post"
    )
    first = harness.run_migration(NAME)
    assert (first.needed, first.ran) == (True, True)
    assert _marker(harness)["data"] == {"backfilledBy": "2.1.0", "phase": "post"}
    second = harness.run_migration(NAME)
    assert (second.needed, second.ran) == (False, False)


def test_undo_removes_the_marker(migration_sandbox: MigrationHarness) -> None:
    harness = migration_sandbox.with_defaults(instance="ledger", namespace="ledger")
    harness.run(NAME)
    assert _marker(harness) is not None
    harness.undo(NAME)
    assert harness.needed(NAME) is True
