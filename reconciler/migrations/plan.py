"""Which migrations a change considers, and what uninstalling an instance must undo (pure).

The daemon (``reconciler.daemon.migrating``) asks these questions every pass,
before touching the cluster:

- :func:`pending`: the migrations of one version, phase and scope that the
  once-only rule still lets run, with their checksums (for the ledger records).
- :func:`plan_uninstall`: on deleting an instance file, its version's
  ``uninstall`` migrations, then the undo of every migration the ledger records
  as applied, newest first, each with the definition of the catalog version that
  applied it (versions are immutable). A version the ledger needs and the
  catalog no longer has is an error naming it: the uninstall must not guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.migrations.checks import version_filter
from reconciler.migrations.checksum import migration_checksum
from reconciler.model.catalog import AppVersion, Migration
from reconciler.model.migrations import Consideration, MigrationLedger, MigrationRecord, to_consider


@dataclass(frozen=True)
class Pending:
    """A migration the once-only rule lets run, with the checksum its record will carry."""

    migration: Migration
    checksum: str


def pending(
    version: AppVersion,
    phase: str,
    scope: str,
    ledger: MigrationLedger,
    distributions: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[list[Pending], list[Consideration]]:
    """The migrations of ``version`` to run now, and the verdict on each (for the log)."""
    chosen = [m for m in version.migrations if m.phase == phase and m.scope == scope]
    sums = {m.name: migration_checksum(version, m, distributions) for m in chosen}
    verdicts = to_consider(((m.name, sums[m.name]) for m in chosen), ledger)
    runs = [Pending(m, sums[m.name]) for m, v in zip(chosen, verdicts, strict=True) if v.consider]
    return runs, verdicts


@dataclass(frozen=True)
class UndoStep:
    """Undo ``record``'s migration with the definition ``version`` shipped."""

    record: MigrationRecord
    version: AppVersion
    migration: Migration


@dataclass(frozen=True)
class UninstallPlan:
    uninstall: tuple[Migration, ...]  # the current version's uninstall migrations, in order
    undo: tuple[UndoStep, ...]  # newest applied first
    errors: tuple[str, ...] = ()  # non-empty: do not uninstall, report these

    @property
    def ok(self) -> bool:
        return not self.errors


def plan_uninstall(
    current: AppVersion | None,
    ledger: MigrationLedger,
    versions: Mapping[str, AppVersion],
) -> UninstallPlan:
    """What removing an instance runs before its objects are pruned.

    ``current`` is the version that runs now (None when the catalog lost it:
    then its uninstall migrations cannot be known, which is an error too);
    ``versions`` are the app's catalog versions by key.
    """
    errors: list[str] = []
    uninstall: tuple[Migration, ...] = ()
    if current is None:
        errors.append(
            "the deployed version is not in the catalog: its uninstall migrations are unknown"
        )
    else:
        uninstall = tuple(m for m in current.migrations if m.phase == "uninstall")
    steps: list[UndoStep] = []
    for record in ledger.applied():
        # uninstall steps are not undone; a global migration serves the whole cluster
        # (its record is copied to the instance that ran it) and outlives the instance
        if record.phase == "uninstall" or record.scope != "app":
            continue
        version = versions.get(record.version)
        if version is None:
            errors.append(
                f"version {record.version} is not in the catalog, but the undo of migration "
                f'"{record.name}" it applied needs it'
            )
            continue
        migration = next((m for m in version.migrations if m.name == record.name), None)
        if migration is None:
            errors.append(
                f'{version.directory} no longer ships migration "{record.name}" that it applied'
            )
            continue
        steps.append(UndoStep(record, version, migration))
    return UninstallPlan(uninstall, tuple(steps), tuple(errors))


@dataclass(frozen=True)
class Considered:
    """A migration an upgrade step would consider, for ``resolve --explain`` (offline)."""

    version: str  # the step that ships it
    migration: Migration
    deployed: str | None  # what runs before that step
    filter_note: str = ""  # the deployedVersion filter's verdict, when it has one
    filtered_out: bool = False

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "version": self.version,
            "name": self.migration.name,
            "phase": self.migration.phase,
            "scope": self.migration.scope,
            "check": self.migration.check.to_dict(),
        }
        if self.filter_note:
            out["filter"] = self.filter_note
            out["filteredOut"] = self.filtered_out
        return out

    def describe(self) -> str:
        m = self.migration
        parts = []
        for key, ref in (
            ("objectMissing", m.check.object_missing),
            ("objectExists", m.check.object_exists),
        ):
            if ref is not None:
                parts.append(f"{key} {ref.kind}/{ref.name}")
        if m.check.field_equals is not None:
            fe = m.check.field_equals
            parts.append(f"fieldEquals {fe.ref.kind}/{fe.ref.name} {fe.path}={fe.value!r}")
        if self.filter_note:
            parts.append(self.filter_note + (" (skipped)" if self.filtered_out else ""))
        check = "; ".join(parts) or "no check: runs once"
        return f"{self.version:<10} {m.phase:<5} {m.scope:<6} {m.name}  {check}"


def upgrade_migrations(steps: list[AppVersion], deployed: str | None) -> list[Considered]:
    """The pre/post migrations each step of an upgrade ships, in the order they would run.

    Offline: object checks need the cluster and the ledger decides once-only, so
    this lists what a change *considers*; only a ``deployedVersion`` filter can be
    judged here.
    """
    out: list[Considered] = []
    before = deployed
    for version in steps:
        for m in version.migrations:
            if m.phase == "uninstall":
                continue
            note, filtered_out = "", False
            if m.check.deployed_version is not None:
                try:
                    ok, note = version_filter(m.check.deployed_version, before)
                    filtered_out = not ok
                except ValueError as e:
                    note = str(e)
            out.append(Considered(version.key, m, before, note, filtered_out))
        before = version.key
    return out


__all__ = [
    "Considered",
    "Pending",
    "UndoStep",
    "UninstallPlan",
    "pending",
    "plan_uninstall",
    "upgrade_migrations",
]
