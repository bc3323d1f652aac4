"""Run one migration from its check to its ledger record: the step the daemon calls.

``execute_migration`` is the whole life of one migration in one pass: render and
evaluate the state check (timed), ask a Python migration's ``needed(ctx)``, run
it (Python under its deadline, a Job through a :class:`JobRunner`), and return
the ``MigrationRecord`` to append to the ledger. It never raises for anything the
migration or the catalog did wrong: every failure is a ``failed`` record whose
message goes to the status, so one broken migration fails only itself.

``undo_migration`` reverses a migration the ledger records as applied, with the
definition of the catalog version that applied it (SPEC "undo across versions").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.migrations.checks import ObjectReader, evaluate_check, render_check
from reconciler.migrations.context import MigrationContext
from reconciler.migrations.jobs import JobRunner, render_job
from reconciler.migrations.registry import MigrationLoadError, Registry
from reconciler.migrations.runner import run_step
from reconciler.model.catalog import AppVersion, Instance, Migration
from reconciler.model.migrations import FAILED, NOT_NEEDED, SUCCEEDED, MigrationRecord


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class MigrationRun:
    """A record for the ledger plus what the log should warn about (a slow check)."""

    record: MigrationRecord
    warnings: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.record.outcome == FAILED


@dataclass(frozen=True)
class Runtime:
    """What executing needs besides the migration: the cluster, the code, the clock."""

    reader: ObjectReader
    registry: Registry
    job_runner: JobRunner | None = None  # None: Job migrations fail (Python ones still run)
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], str] = utc_now


def execute_migration(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    *,
    checksum: str,
    deployed_version: str | None,
    runtime: Runtime,
) -> MigrationRun:
    """Check, then run ``migration`` of ``version`` for ``instance``; never raises for it."""
    started = runtime.now()

    def record(outcome: str, message: str, duration: float, check: float) -> MigrationRecord:
        return MigrationRecord(
            name=migration.name,
            version=version.key,
            checksum=checksum,
            phase=migration.phase,
            scope=migration.scope,
            started_at=started,
            duration=round(duration, 3),  # milliseconds: what the ledger keeps
            check_duration=round(check, 3),
            outcome=outcome,
            message=message,
        )

    check, problems = render_check(migration.check, instance, version)
    if problems:
        return MigrationRun(record(FAILED, f"check: {problems[0].message}", 0.0, 0.0))
    result = evaluate_check(
        check,
        runtime.reader,
        namespace=instance.namespace,
        deployed_version=deployed_version,
        clock=runtime.clock,
    )
    warnings = (result.warning,) if result.warning else ()
    if result.error is not None:
        return MigrationRun(record(FAILED, result.error, 0.0, result.duration), warnings)
    if not result.needed:
        return MigrationRun(record(NOT_NEEDED, result.reason, 0.0, result.duration), warnings)
    if migration.python is not None:
        outcome, message, duration, check_extra = _run_python(migration, ctx, runtime)
        return MigrationRun(
            record(outcome, message, duration, result.duration + check_extra), warnings
        )
    outcome, message, duration = _run_job(migration, version, instance, ctx, runtime)
    return MigrationRun(record(outcome, message, duration, result.duration), warnings)


def _run_python(
    migration: Migration, ctx: MigrationContext, runtime: Runtime
) -> tuple[str, str, float, float]:
    """(outcome, message, run duration, needed() duration) of a registered migration."""
    assert migration.python is not None
    try:
        code = runtime.registry.load(migration.python)
    except MigrationLoadError as e:
        return FAILED, str(e), 0.0, 0.0
    needed = run_step(
        code,
        "needed",
        ctx,
        ctx.deadline - runtime.clock(),
        name=migration.python,
        clock=runtime.clock,
    )
    if not needed.ok:
        return FAILED, needed.message, 0.0, needed.duration
    if needed.value is False:
        return NOT_NEEDED, "needed() returned False", 0.0, needed.duration
    ran = run_step(
        code,
        "run",
        ctx,
        ctx.deadline - runtime.clock(),
        name=migration.python,
        clock=runtime.clock,
    )
    if not ran.ok:
        return FAILED, ran.message, ran.duration, needed.duration
    return SUCCEEDED, "", ran.duration, needed.duration


def _run_job(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    runtime: Runtime,
) -> tuple[str, str, float]:
    template = version.migration_jobs.get(migration.name)
    if template is None:
        return FAILED, f"migration job {migration.job} is missing from {version.directory}", 0.0
    job, problems = render_job(template, instance, version, ctx, migration.timeout_seconds)
    if job is None:
        return FAILED, f"job: {problems[0].message}", 0.0
    if runtime.job_runner is None:
        return FAILED, "job migrations cannot run here: no job runner configured", 0.0
    outcome = runtime.job_runner.run_job(job, float(migration.timeout_seconds))
    return (SUCCEEDED if outcome.succeeded else FAILED), outcome.message, outcome.duration


def undo_migration(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    *,
    runtime: Runtime,
) -> tuple[bool, str, float]:
    """Reverse an applied migration with ``version``'s definition: (ok, message, duration).

    An undo Job wins; otherwise a Python migration's optional ``undo(ctx)``; a
    migration with neither has nothing to undo (ok).
    """
    template = version.undo_jobs.get(migration.name)
    if template is not None:
        job, problems = render_job(template, instance, version, ctx, migration.timeout_seconds)
        if job is None:
            return False, f"undo job: {problems[0].message}", 0.0
        if runtime.job_runner is None:
            return False, "undo jobs cannot run here: no job runner configured", 0.0
        out = runtime.job_runner.run_job(job, float(migration.timeout_seconds))
        return out.succeeded, out.message, out.duration
    if migration.python is None:
        return True, "nothing to undo", 0.0
    try:
        code = runtime.registry.load(migration.python)
    except MigrationLoadError as e:
        return False, str(e), 0.0
    if not callable(getattr(code, "undo", None)):
        return True, "nothing to undo", 0.0
    step = run_step(
        code,
        "undo",
        ctx,
        ctx.deadline - runtime.clock(),
        name=migration.python,
        clock=runtime.clock,
    )
    return step.ok, step.message, step.duration


__all__ = ["MigrationRun", "Runtime", "execute_migration", "undo_migration", "utc_now"]
