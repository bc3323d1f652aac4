"""Migration hooks as values: the definition a version declares, and the ledger of runs.

SPEC section 5. A definition (``MigrationSpec``) is what ``version.yaml`` says; a
``MigrationRecord`` is one outcome the reconciler recorded; a ``MigrationLedger``
holds the records of one instance (app scope) or one cluster (global scope). The
ledger is persisted twice (a ConfigMap in the cluster, ``migrations`` in the
``InstanceStatus``), so every record is a frozen value with ``from_dict``/``to_dict``
and the "once only" rule is a pure function over it (:func:`to_consider`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

PHASES = ("pre", "post", "uninstall")
# The phase of a record that reversed an applied migration while its instance was
# uninstalled: never a phase a version declares, only one the ledger records.
UNDO = "undo"
SCOPES = ("app", "global")
SUCCEEDED = "succeeded"
NOT_NEEDED = "notNeeded"
FAILED = "failed"
OUTCOMES = (SUCCEEDED, NOT_NEEDED, FAILED)
# Outcomes after which a migration never runs again for its instance or cluster.
SETTLED = frozenset({SUCCEEDED, NOT_NEEDED})


class LedgerFormatError(ValueError):
    """A persisted ledger record that cannot be read (names the field at fault)."""


@dataclass(frozen=True)
class CheckRef:
    """An object a state check looks at, still holding ``${...}`` placeholders."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CheckRef:
        ns = raw.get("namespace")
        return cls(
            api_version=str(raw.get("apiVersion", "")),
            kind=str(raw.get("kind", "")),
            name=str(raw.get("name", "")),
            namespace=None if ns is None else str(ns),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind}
        out["name"] = self.name
        if self.namespace is not None:
            out["namespace"] = self.namespace
        return out


@dataclass(frozen=True)
class FieldEquals:
    """``fieldEquals``: the field at dotted ``path`` of ``ref`` equals ``value``."""

    ref: CheckRef
    path: str
    value: Any

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref.to_dict(), "path": self.path, "value": self.value}


@dataclass(frozen=True)
class MigrationCheck:
    """When a migration is still needed: every listed condition must hold.

    The object conditions ask the cluster; ``deployed_version`` (a range) is
    only an extra filter, never the only condition (validation says so).
    """

    object_missing: CheckRef | None = None
    object_exists: CheckRef | None = None
    field_equals: FieldEquals | None = None
    deployed_version: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> MigrationCheck:
        raw = raw or {}
        missing, exists, equals = (
            raw.get("objectMissing"),
            raw.get("objectExists"),
            raw.get("fieldEquals"),
        )
        deployed = raw.get("deployedVersion")
        return cls(
            object_missing=CheckRef.from_dict(missing) if isinstance(missing, Mapping) else None,
            object_exists=CheckRef.from_dict(exists) if isinstance(exists, Mapping) else None,
            field_equals=(
                FieldEquals(
                    ref=CheckRef.from_dict(equals.get("ref") or {}),
                    path=str(equals.get("path", "")),
                    value=equals.get("value"),
                )
                if isinstance(equals, Mapping)
                else None
            ),
            deployed_version=None if deployed is None else str(deployed),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.object_missing is not None:
            out["objectMissing"] = self.object_missing.to_dict()
        if self.object_exists is not None:
            out["objectExists"] = self.object_exists.to_dict()
        if self.field_equals is not None:
            out["fieldEquals"] = self.field_equals.to_dict()
        if self.deployed_version is not None:
            out["deployedVersion"] = self.deployed_version
        return out

    @property
    def has_state_condition(self) -> bool:
        """True when the cluster's state (not only a version number) decides."""
        return any(
            c is not None for c in (self.object_missing, self.object_exists, self.field_equals)
        )

    @property
    def empty(self) -> bool:
        return not self.has_state_condition and self.deployed_version is None


@dataclass(frozen=True)
class Deprecation:
    """``deprecated: {since, removeIn, note}``: versions that should stop shipping it."""

    since: str
    remove_in: str | None = None
    note: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Deprecation:
        remove_in = raw.get("removeIn")
        return cls(
            since=str(raw.get("since", "")),
            remove_in=None if remove_in is None else str(remove_in),
            note=str(raw.get("note", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"since": self.since}
        if self.remove_in is not None:
            out["removeIn"] = self.remove_in
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class MigrationRecord:
    """One recorded outcome of a migration for an instance (app) or a cluster (global)."""

    name: str
    version: str  # the catalog version that shipped (and, for undo, will reverse) it
    checksum: str
    phase: str
    scope: str
    started_at: str  # RFC 3339, UTC
    duration: float  # seconds the run took (0 when the check said not needed)
    check_duration: float  # seconds the state check took
    outcome: str  # succeeded | notNeeded | failed
    message: str = ""
    from_version: str | None = None  # what ran before the change it served (None: an install)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise LedgerFormatError(
                f'migration {self.name}: outcome "{self.outcome}" is not one of '
                + ", ".join(OUTCOMES)
            )

    @property
    def settled(self) -> bool:
        """Succeeded or not needed: never run again for its instance or cluster."""
        return self.outcome in SETTLED

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> MigrationRecord:
        if not isinstance(raw, Mapping):
            raise LedgerFormatError(f"a migration record must be a mapping, got {raw!r}")
        try:
            return cls(
                name=_text(raw, "name"),
                version=_text(raw, "version"),
                checksum=_text(raw, "checksum"),
                phase=_text(raw, "phase"),
                scope=str(raw.get("scope", "app")),
                started_at=_text(raw, "startedAt"),
                duration=float(raw.get("duration", 0.0)),
                check_duration=float(raw.get("checkDuration", 0.0)),
                outcome=_text(raw, "outcome"),
                message=str(raw.get("message", "")),
                from_version=None if raw.get("fromVersion") is None else str(raw["fromVersion"]),
            )
        except (TypeError, ValueError) as e:
            if isinstance(e, LedgerFormatError):
                raise
            raise LedgerFormatError(f"migration record {raw.get('name')!r}: {e}") from e

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "checksum": self.checksum,
            "phase": self.phase,
            "scope": self.scope,
            "startedAt": self.started_at,
            "duration": round(self.duration, 3),
            "checkDuration": round(self.check_duration, 3),
            "outcome": self.outcome,
        }
        if self.message:
            out["message"] = self.message
        if self.from_version is not None:
            out["fromVersion"] = self.from_version
        return out


def _text(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise LedgerFormatError(f'migration record needs a string "{key}", got {value!r}')
    return value


@dataclass(frozen=True)
class MigrationLedger:
    """Every recorded run of one instance (``owner`` = instance) or cluster (global).

    Records are kept in the order they happened: the undo on uninstall walks
    them newest first, and the latest record of a name is its current state.
    """

    scope: str  # "app" or "global"
    owner: str  # instance name for app scope, cluster name for global scope
    records: tuple[MigrationRecord, ...] = field(default_factory=tuple)

    def with_record(self, record: MigrationRecord) -> MigrationLedger:
        """A new ledger with ``record`` appended (transitions return new values).

        A failure replaces the earlier failures of the same run (name, phase, scope
        and version): a migration retried for weeks keeps one record, since the
        ledger lives in a ConfigMap and a status file, both of bounded size.
        """
        kept = self.records
        if record.outcome == FAILED:
            key = (record.name, record.phase, record.scope, record.version)
            kept = tuple(
                r
                for r in kept
                if r.outcome != FAILED or (r.name, r.phase, r.scope, r.version) != key
            )
        return replace(self, records=(*kept, record))

    def latest(self, name: str) -> MigrationRecord | None:
        for record in reversed(self.records):
            if record.name == name:
                return record
        return None

    def current(self, name: str) -> tuple[MigrationRecord, ...]:
        """The runs of ``name`` since it was last undone (all of them if it never was).

        An uninstall that undid a migration and then failed leaves the instance in
        the cluster; if its file comes back, the migration must be considered again.
        """
        runs: list[MigrationRecord] = []
        for record in self.records:
            if record.name != name:
                continue
            if record.phase == UNDO:
                if record.outcome == SUCCEEDED:
                    runs.clear()
                continue
            runs.append(record)
        return tuple(runs)

    def settled(self, name: str) -> bool:
        """True once ``name`` succeeded or was found not needed (and was not undone since)."""
        return any(r.settled for r in self.current(name))

    def applied(self) -> tuple[MigrationRecord, ...]:
        """Runs that really changed the cluster and are not undone, newest first (undo order)."""
        live = {id(r) for name in {r.name for r in self.records} for r in self.current(name)}
        return tuple(r for r in reversed(self.records) if r.outcome == SUCCEEDED and id(r) in live)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> MigrationLedger:
        if not isinstance(raw, Mapping):
            raise LedgerFormatError(f"a migration ledger must be a mapping, got {raw!r}")
        records = raw.get("records") or []
        if not isinstance(records, list):
            raise LedgerFormatError('a migration ledger\'s "records" must be a list')
        return cls(
            scope=str(raw.get("scope", "app")),
            owner=str(raw.get("owner", "")),
            records=tuple(MigrationRecord.from_dict(r) for r in records),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "owner": self.owner,
            "records": [r.to_dict() for r in self.records],
        }


@dataclass(frozen=True)
class Consideration:
    """What the once-only rule says about one migration of a version."""

    name: str
    consider: bool
    reason: str  # why it is (or is not) considered, for logs and ``resolve --explain``
    checksum_changed: bool = False


def to_consider(
    migrations: Iterable[tuple[str, str]],
    ledger: MigrationLedger,
) -> list[Consideration]:
    """Apply the "once only" rule to ``(name, checksum)`` pairs of a version's migrations.

    A name that succeeded or was not needed is skipped for good, even when a later
    version ships it with another checksum (that is a validation warning: changed
    logic needs a new name). A failed or never-seen name is considered again, and
    so is one undone since (its instance's uninstall reversed it).
    """
    out = []
    for name, checksum in migrations:
        runs = ledger.current(name)
        settled = next((r for r in reversed(runs) if r.settled), None)
        if settled is None:
            last = runs[-1] if runs else None
            if last is not None:
                reason = f"last run failed ({last.version})"
            else:
                reason = "undone since its last run" if ledger.latest(name) else "never run"
            out.append(Consideration(name, True, reason))
            continue
        changed = settled.checksum != checksum
        reason = f"already {settled.outcome} in {settled.version}"
        if changed:
            reason += " (its definition changed since; it will not run again)"
        out.append(Consideration(name, False, reason, checksum_changed=changed))
    return out


__all__ = [
    "FAILED",
    "NOT_NEEDED",
    "OUTCOMES",
    "PHASES",
    "SCOPES",
    "SUCCEEDED",
    "UNDO",
    "CheckRef",
    "Consideration",
    "Deprecation",
    "FieldEquals",
    "LedgerFormatError",
    "MigrationCheck",
    "MigrationLedger",
    "MigrationRecord",
    "to_consider",
]
