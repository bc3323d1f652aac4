"""Migration hooks (SPEC section 5): registry, state checks, runners, checksums, validation.

The daemon (and ``apply``) will drive a pass's hooks through this API:

- ``Registry.installed()``: Python migrations registered under ``reconciler.migrations``.
- ``migration_checksum(version, migration, registry.distributions())``: the ledger's checksum.
- ``to_consider(pairs, ledger)`` (``reconciler.model.migrations``): the once-only rule.
- ``pending(version, phase, scope, ledger, dists)``: what a change runs now, with checksums;
  ``plan_uninstall(current, ledger, versions)``: uninstall migrations, then undo steps.
- ``execute_migration(migration, version, instance, ctx, checksum=..., deployed_version=...,
  runtime=Runtime(reader, registry, job_runner))`` -> ``MigrationRun`` (a ``MigrationRecord``
  and warnings); never raises for the migration's own failures.
- ``advance_migration(..., wait=seconds)`` / ``advance_undo``: the same without waiting
  for a Job past ``wait`` (the daemon): ``StillRunning`` until a later call sees it end.
- ``undo_migration(...)`` reverses an applied one with its own version's definition.
- ``render_job(...)`` / ``JobRunner``: the Job and the interface that runs it
  (``render_job_with``: the same rendering for other Jobs, e.g. rollout analysis).
- ``check_migrations(catalog, registry, declared)``: validation problems across versions;
  ``declared_migrations(root)``: names the checkout's own package registers.
- ``ledger_configmap(ledger, cluster, namespace)`` / ``ledger_from_configmap(obj)``: the
  cluster's copy of the ledger.
"""

from reconciler.migrations.checks import (
    SLOW_CHECK_SECONDS,
    CheckResult,
    ObjectReader,
    evaluate_check,
    field_at,
    render_check,
)
from reconciler.migrations.checksum import job_checksum, migration_checksum, python_checksum
from reconciler.migrations.context import (
    Component,
    MigrationContext,
    components_json,
    job_environment,
)
from reconciler.migrations.declared import declared_migrations
from reconciler.migrations.execute import (
    MigrationRun,
    Runtime,
    StillRunning,
    advance_migration,
    advance_undo,
    execute_migration,
    undo_migration,
    utc_now,
)
from reconciler.migrations.jobs import (
    MIGRATION_LABEL,
    PHASE_LABEL,
    REPORTED_ANNOTATION,
    JobOutcome,
    JobRunner,
    in_flight,
    job_span,
    job_verdict,
    render_job,
    render_job_with,
    same_run,
)
from reconciler.migrations.ledger import (
    GLOBAL_NAME,
    ledger_configmap,
    ledger_from_configmap,
    ledger_name,
)
from reconciler.migrations.plan import (
    Considered,
    Pending,
    UndoStep,
    UninstallPlan,
    pending,
    plan_uninstall,
    upgrade_migrations,
)
from reconciler.migrations.registry import (
    GROUP,
    MigrationLoadError,
    PythonMigration,
    RegisteredMigration,
    Registry,
)
from reconciler.migrations.runner import StepOutcome, run_step
from reconciler.migrations.validate import check_migrations
from reconciler.migrations.views import LedgerRow, ledger_rows, ledger_table

__all__ = [
    "GLOBAL_NAME",
    "GROUP",
    "MIGRATION_LABEL",
    "PHASE_LABEL",
    "REPORTED_ANNOTATION",
    "SLOW_CHECK_SECONDS",
    "CheckResult",
    "Component",
    "Considered",
    "JobOutcome",
    "JobRunner",
    "LedgerRow",
    "MigrationContext",
    "MigrationLoadError",
    "MigrationRun",
    "ObjectReader",
    "Pending",
    "PythonMigration",
    "RegisteredMigration",
    "Registry",
    "Runtime",
    "StepOutcome",
    "StillRunning",
    "UndoStep",
    "UninstallPlan",
    "advance_migration",
    "advance_undo",
    "check_migrations",
    "components_json",
    "declared_migrations",
    "evaluate_check",
    "execute_migration",
    "field_at",
    "in_flight",
    "job_checksum",
    "job_environment",
    "job_span",
    "job_verdict",
    "ledger_configmap",
    "ledger_from_configmap",
    "ledger_name",
    "ledger_rows",
    "ledger_table",
    "migration_checksum",
    "pending",
    "plan_uninstall",
    "python_checksum",
    "render_check",
    "render_job",
    "render_job_with",
    "run_step",
    "same_run",
    "undo_migration",
    "upgrade_migrations",
    "utc_now",
]
