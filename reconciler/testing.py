"""pytest helpers for authors of Python migrations: run one against a fresh sandbox.

A Python migration (SPEC section 5) is code that changes a live cluster; its
author should see it work before a catalog names it. This module starts the
project's own Kubernetes API server (``reconciler sandbox``) for one test, builds
the ``ctx`` the reconciler would pass, and runs ``needed``/``run``/``undo`` with
the same deadline handling as the daemon::

    def test_backfill(migration_sandbox):
        result = migration_sandbox.run_migration("ledger-backfill-order-totals")
        assert result.ran
        assert not migration_sandbox.run_migration("ledger-backfill-order-totals").ran

Installed as a pytest plugin (entry point ``pytest11``), so the fixtures
``migration_sandbox`` and ``run_migration`` are there wherever ``reconciler`` is
installed; without the entry point add ``pytest_plugins = ["reconciler.testing"]``
to a ``conftest.py``. ``migration`` is a registered name (loaded through the
entry-point group, exactly as the reconciler does) or a migration object.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.migrations import (
    Component,
    MigrationContext,
    PythonMigration,
    Registry,
    StepOutcome,
    run_step,
)

if TYPE_CHECKING:
    # imported when a harness starts: pytest loads this plugin (entry point pytest11) in
    # every run wherever reconciler is installed, and the Kubernetes client and the
    # sandbox server are most of a second to import, for runs that use neither
    from reconciler.kube import KubeClient

DEFAULT_TIMEOUT = 30.0


class MigrationStepFailed(AssertionError):
    """A step raised, timed out or (``needed``) returned a non-bool; the message says which."""

    def __init__(self, outcome: StepOutcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


@dataclass(frozen=True)
class MigrationResult:
    """What ``run_migration`` did: whether it was needed and whether ``run`` ran."""

    needed: bool
    ran: bool
    steps: tuple[StepOutcome, ...]


class MigrationHarness:
    """A sandbox cluster, a connected client and a default ``ctx`` for one test."""

    def __init__(self, client: KubeClient, kubeconfig: str, **defaults: Any) -> None:
        self.client = client
        self.kubeconfig = kubeconfig
        self.defaults: dict[str, Any] = {
            "cluster": "test",
            "instance": "example",
            "namespace": "default",
            "app": "example",
            "from_version": "1.0.0",
            "to_version": "1.1.0",
            "phase": "pre",
            "migration": "example",
            "components": (),
            **defaults,
        }

    def context(self, timeout: float = DEFAULT_TIMEOUT, **overrides: Any) -> MigrationContext:
        """The ``ctx`` a migration gets; any field of ``MigrationContext`` can be overridden."""
        fields = {**self.defaults, **overrides}
        if not fields["components"] and fields["instance"]:
            fields["components"] = (
                Component(
                    fields["instance"], fields["app"], fields["from_version"], fields["to_version"]
                ),
            )
        ctx = MigrationContext(
            client=self.client,
            deadline=time.monotonic() + timeout,
            logger=logging.getLogger(f"reconciler.migrations.{fields['migration']}"),
            **fields,
        )
        self.ensure_namespace(ctx.namespace)
        return ctx

    def ensure_namespace(self, name: str) -> None:
        self.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def load(self, migration: str | PythonMigration) -> PythonMigration:
        """A registered name is loaded through the entry-point group, like the reconciler does."""
        if isinstance(migration, str):
            return Registry.installed().load(migration)
        return migration

    def step(self, migration: str | PythonMigration, step: str, **overrides: Any) -> Any:
        """Run one step; raise :class:`MigrationStepFailed` when the reconciler would fail it."""
        outcome = self._step(migration, step, **overrides)
        if not outcome.ok:
            raise MigrationStepFailed(outcome)
        return outcome.value

    def _step(self, migration: str | PythonMigration, step: str, **overrides: Any) -> StepOutcome:
        code = self.load(migration)
        name = migration if isinstance(migration, str) else type(code).__name__
        timeout = float(overrides.pop("timeout", DEFAULT_TIMEOUT))
        ctx = self.context(timeout, **{"migration": name, **overrides})
        return run_step(code, step, ctx, timeout, name=name)

    def needed(self, migration: str | PythonMigration, **overrides: Any) -> bool:
        return bool(self.step(migration, "needed", **overrides))

    def run(self, migration: str | PythonMigration, **overrides: Any) -> None:
        self.step(migration, "run", **overrides)

    def undo(self, migration: str | PythonMigration, **overrides: Any) -> None:
        self.step(migration, "undo", **overrides)

    def run_migration(self, migration: str | PythonMigration, **overrides: Any) -> MigrationResult:
        """``needed``, then ``run`` when needed; failures raise :class:`MigrationStepFailed`."""
        needed = self._step(migration, "needed", **dict(overrides))
        if not needed.ok:
            raise MigrationStepFailed(needed)
        if not needed.value:
            return MigrationResult(False, False, (needed,))
        ran = self._step(migration, "run", **dict(overrides))
        if not ran.ok:
            raise MigrationStepFailed(ran)
        return MigrationResult(True, True, (needed, ran))

    def with_defaults(self, **defaults: Any) -> MigrationHarness:
        """The same cluster with other default ``ctx`` fields."""
        harness = MigrationHarness(self.client, self.kubeconfig)
        harness.defaults = {**self.defaults, **defaults}
        return harness


@contextmanager
def migration_harness(**defaults: Any) -> Iterator[MigrationHarness]:
    """A fresh sandbox and a harness for the length of the ``with`` block."""
    from reconciler.kube import KubeClient
    from reconciler.sandbox.testing import running_sandbox

    with running_sandbox() as handle, KubeClient.connect(handle.kubeconfig) as client:
        yield MigrationHarness(client, str(handle.kubeconfig), **defaults)


@pytest.fixture
def migration_sandbox() -> Iterator[MigrationHarness]:
    """A :class:`MigrationHarness` on a fresh, empty sandbox (one per test)."""
    with migration_harness() as harness:
        yield harness


@pytest.fixture
def run_migration(
    migration_sandbox: MigrationHarness,
) -> Callable[..., MigrationResult]:
    """``run_migration(migration, **ctx_overrides)``: ``needed`` then ``run`` on the sandbox."""
    return migration_sandbox.run_migration


__all__ = [
    "MigrationHarness",
    "MigrationResult",
    "MigrationStepFailed",
    "migration_harness",
    "migration_sandbox",
    "run_migration",
]
