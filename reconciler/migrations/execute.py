"""Run one migration from its check to its ledger record: the step the daemon calls.

``execute_migration`` is the whole life of one migration in one pass: render and
evaluate the state check (timed), ask a Python migration's ``needed(ctx)``, run
it (Python under its deadline, a Job through a :class:`JobRunner`), and return
the ``MigrationRecord`` to append to the ledger. It never raises for anything the
migration or the catalog did wrong: every failure is a ``failed`` record whose
message goes to the status, so one broken migration fails only itself.

``undo_migration`` reverses a migration the ledger records as applied, with the
definition of the catalog version that applied it (SPEC "undo across versions").

Both wait for a Job to its end, which is what ``reconciler apply`` (a command a
person runs and waits for) wants. The daemon must not: one slow Job would hold
every other instance of its pass. It calls ``advance_migration`` and
``advance_undo`` with ``wait``, the seconds its pass still gives Jobs: a Job that
has not ended by then is :class:`StillRunning` (nothing is recorded for a run that
has not ended) and a later pass calls again. That call finds the Job of this run
(``in_flight``) before anything else and does *not* evaluate the state check
again: the Job may have half-changed the very state the check reads. It only
takes the Job's verdict, with the Job's own duration. The migration's
``timeoutSeconds`` is still enforced, by Kubernetes: ``render_job`` sets it as the
Job's ``activeDeadlineSeconds``, and a Job past it fails (``DeadlineExceeded``).

Python migrations run in the reconciler's process, under their deadline, and are
never left running across passes: they must be short (a check, a patch, a small
copy). A long data move belongs in a Job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.migrations.checks import ObjectReader, evaluate_check, render_check
from reconciler.migrations.context import MigrationContext
from reconciler.migrations.jobs import JobOutcome, JobRunner, in_flight, render_job
from reconciler.migrations.registry import MigrationLoadError, Registry
from reconciler.migrations.runner import run_step
from reconciler.model.catalog import AppVersion, Instance, Migration
from reconciler.model.changeset import ObjectRef
from reconciler.model.migrations import FAILED, NOT_NEEDED, SUCCEEDED, MigrationRecord


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class MigrationRun:
    """A record for the ledger plus what the log should warn about (a slow check).

    ``resumed``: the run's Job was started by an earlier pass (its check was not
    evaluated again; its duration is the Job's own).
    """

    record: MigrationRecord
    warnings: tuple[str, ...] = ()
    resumed: bool = False

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
    # ``${images.NAME}`` of a version's Jobs: its images with the builds builds.yaml
    # pins (SPEC section 8), so a migration runs the very build the version runs;
    # None renders the references the version names
    images: Callable[[AppVersion], Mapping[str, str] | None] = lambda version: None


@dataclass(frozen=True)
class StillRunning:
    """A Job that had not ended when its pass's grace was over: nothing to record yet."""

    job: str  # ``Job/<namespace>/<name>``
    migration: str
    phase: str
    version: str

    @property
    def message(self) -> str:
        """The status message while it runs (stable from pass to pass: no new commit)."""
        return f"migration {self.migration} ({self.phase}, {self.version}) is running: {self.job}"


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
    """Check, then run ``migration`` of ``version`` for ``instance``; never raises for it.

    A Job is waited for to its end (up to ``timeoutSeconds``).
    """
    run = advance_migration(
        migration,
        version,
        instance,
        ctx,
        checksum=checksum,
        deployed_version=deployed_version,
        runtime=runtime,
        wait=None,
    )
    assert isinstance(run, MigrationRun)  # without ``wait`` nothing is left running
    return run


def advance_migration(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    *,
    checksum: str,
    deployed_version: str | None,
    runtime: Runtime,
    wait: float | None,
) -> MigrationRun | StillRunning:
    """``execute_migration`` that waits at most ``wait`` seconds for a Job (None: to its end).

    A Job of this run already in the cluster (an earlier pass started it) is
    observed, not checked again; one still running after ``wait`` is
    :class:`StillRunning`.
    """
    started = runtime.now()

    def record(
        outcome: str, message: str, duration: float, check: float, began: str = ""
    ) -> MigrationRecord:
        return MigrationRecord(
            name=migration.name,
            version=version.key,
            checksum=checksum,
            phase=migration.phase,
            scope=migration.scope,
            started_at=began or started,
            duration=round(duration, 3),  # milliseconds: what the ledger keeps
            check_duration=round(check, 3),
            outcome=outcome,
            message=message,
        )

    job, job_problem = _render(migration, version, instance, ctx, runtime.images(version))
    if job is not None and runtime.job_runner is not None and _in_flight(runtime, job):
        out = _wait_job(runtime.job_runner, job, migration, wait)
        if out is None:
            return StillRunning(
                str(ObjectRef.of(job)), migration.name, migration.phase, version.key
            )
        outcome = SUCCEEDED if out.succeeded else FAILED
        return MigrationRun(
            record(outcome, out.message, out.duration, 0.0, out.started_at), resumed=True
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
    if job is None:
        return MigrationRun(record(FAILED, job_problem, 0.0, result.duration), warnings)
    if runtime.job_runner is None:
        text = "job migrations cannot run here: no job runner configured"
        return MigrationRun(record(FAILED, text, 0.0, result.duration), warnings)
    out = _wait_job(runtime.job_runner, job, migration, wait)
    if out is None:
        return _still(job, migration, version)
    outcome = SUCCEEDED if out.succeeded else FAILED
    return MigrationRun(record(outcome, out.message, out.duration, result.duration), warnings)


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


def _render(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    images: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """The Job of a Job migration, or why there is none ("" for a Python migration)."""
    if migration.python is not None:
        return None, ""
    template = version.migration_jobs.get(migration.name)
    if template is None:
        return None, f"migration job {migration.job} is missing from {version.directory}"
    job, problems = render_job(
        template, instance, version, ctx, migration.timeout_seconds, images=images
    )
    if job is None:
        return None, f"job: {problems[0].message}"
    return job, ""


def _still(job: Mapping[str, Any], migration: Migration, version: AppVersion) -> StillRunning:
    return StillRunning(str(ObjectRef.of(job)), migration.name, migration.phase, version.key)


def _in_flight(runtime: Runtime, job: Mapping[str, Any]) -> bool:
    """Whether an earlier pass left this run's Job in the cluster, its end unreported.

    A read that fails says no: the check then runs and reports the cluster's error.
    """
    try:
        existing = runtime.reader.get(ObjectRef.of(job))
    except Exception:  # the check's own read reports it
        return False
    return in_flight(existing, job)


def _wait_job(
    runner: JobRunner, job: Mapping[str, Any], migration: Migration, wait: float | None
) -> JobOutcome | None:
    """Run (or take over) ``job``; None while it runs on past ``wait``.

    Without ``wait`` it gets the whole ``timeoutSeconds``, and not ending by then is
    a failure; with it, Kubernetes enforces the deadline (``activeDeadlineSeconds``).
    """
    limit = float(migration.timeout_seconds)
    out = runner.run_job(job, limit if wait is None else max(0.0, min(wait, limit)))
    if out.timed_out and wait is not None and wait < limit:
        return None
    return out


def undo_migration(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    *,
    runtime: Runtime,
) -> tuple[bool, str, float]:
    """Reverse an applied migration with ``version``'s definition: (ok, message, duration).

    An undo Job wins (waited for to its end); otherwise a Python migration's
    optional ``undo(ctx)``; a migration with neither has nothing to undo (ok).
    """
    done = advance_undo(migration, version, instance, ctx, runtime=runtime, wait=None)
    assert not isinstance(done, StillRunning)  # without ``wait`` nothing is left running
    return done[:3]


def advance_undo(
    migration: Migration,
    version: AppVersion,
    instance: Instance,
    ctx: MigrationContext,
    *,
    runtime: Runtime,
    wait: float | None,
) -> tuple[bool, str, float, str] | StillRunning:
    """``undo_migration`` waiting at most ``wait`` for an undo Job (None: to its end).

    Also returns the Job's start time when it was taken over from an earlier pass
    (else ""); an undo has no check, so taking over is all there is to it.
    """
    template = version.undo_jobs.get(migration.name)
    if template is not None:
        job, problems = render_job(
            template,
            instance,
            version,
            ctx,
            migration.timeout_seconds,
            images=runtime.images(version),
        )
        if job is None:
            return False, f"undo job: {problems[0].message}", 0.0, ""
        if runtime.job_runner is None:
            return False, "undo jobs cannot run here: no job runner configured", 0.0, ""
        out = _wait_job(runtime.job_runner, job, migration, wait)
        if out is None:
            return StillRunning(str(ObjectRef.of(job)), migration.name, ctx.phase, version.key)
        return out.succeeded, out.message, out.duration, out.started_at
    if migration.python is None:
        return True, "nothing to undo", 0.0, ""
    try:
        code = runtime.registry.load(migration.python)
    except MigrationLoadError as e:
        return False, str(e), 0.0, ""
    if not callable(getattr(code, "undo", None)):
        return True, "nothing to undo", 0.0, ""
    step = run_step(
        code,
        "undo",
        ctx,
        ctx.deadline - runtime.clock(),
        name=migration.python,
        clock=runtime.clock,
    )
    return step.ok, step.message, step.duration, ""


__all__ = [
    "MigrationRun",
    "Runtime",
    "StillRunning",
    "advance_migration",
    "advance_undo",
    "execute_migration",
    "undo_migration",
    "utc_now",
]
