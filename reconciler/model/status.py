"""InstanceStatus: what one cluster's reconciler recorded about one instance (SPEC section 3).

The daemon builds these values from a pass's results; ``reconciler.status`` turns
them into YAML files and commit messages; ``reconciler.source.ledger`` stores them
as commits on the status branch; ``status``/``history`` read them back. The record
is immutable and round-trips through ``to_dict``/``from_dict`` with the exact keys
of the status file, so the file people read with ``git show`` is the contract.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from reconciler.model import API_VERSION
from reconciler.model.rollout import RolloutFormatError, RolloutRecord

STATUS_KIND = "InstanceStatus"


class Phase(StrEnum):
    """The one-word summary of an instance, as ``status`` prints it."""

    READY = "Ready"
    PROGRESSING = "Progressing"
    STALLED = "Stalled"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    REMOVED = "Removed"  # uninstalled: its file was deleted from Git and its objects pruned


class ConditionType(StrEnum):
    """kstatus condition types (the ones kstatus-aware tools understand)."""

    READY = "Ready"
    RECONCILING = "Reconciling"
    STALLED = "Stalled"
    # beside them: another reconciler applied this instance (two daemons, one cluster)
    CONFLICTING_WRITER = "ConflictingWriter"


TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"
_CONDITION_STATUSES = (TRUE, FALSE, UNKNOWN)


class StatusFormatError(ValueError):
    """A status record that does not have the shape of SPEC section 3; says which field."""


@dataclass(frozen=True, slots=True)
class Condition:
    """One kstatus condition; ``last_transition_time`` is RFC 3339 UTC (may be empty)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": str(self.type),
            "status": str(self.status),
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }

    @classmethod
    def from_dict(cls, data: object) -> Condition:
        if not isinstance(data, Mapping):
            raise StatusFormatError(f"a condition must be a mapping, got {_kind(data)}")
        kind = _text(data, "type", required=True)
        status = _text(data, "status", required=True)
        if status not in _CONDITION_STATUSES:
            raise StatusFormatError(
                f"condition {kind}: status must be one of True, False, Unknown, got {status!r}"
            )
        return cls(
            type=kind,
            status=status,
            reason=_text(data, "reason"),
            message=_text(data, "message"),
            last_transition_time=_text(data, "lastTransitionTime"),
        )


@functools.lru_cache(maxsize=1024)
def conditions_for(phase: Phase, reason: str = "", message: str = "") -> tuple[Condition, ...]:
    """The kstatus conditions that say ``phase``: Ready always, plus Reconciling or Stalled.

    ``reason`` defaults to the phase name (``Progressing``, ``Succeeded``...), as
    kustomize-controller does, so every condition carries a machine-readable reason.
    Cached: conditions are immutable, and the thousands of instances at rest share a
    phase, reason and message, so their records share one tuple of conditions.
    """
    if phase is Phase.READY:
        return (Condition(ConditionType.READY, TRUE, reason or "Succeeded", message),)
    if phase is Phase.PROGRESSING:
        why = reason or "Progressing"
        return (
            Condition(ConditionType.READY, FALSE, why, message),
            Condition(ConditionType.RECONCILING, TRUE, why, message),
        )
    if phase is Phase.SUSPENDED:
        return (Condition(ConditionType.READY, UNKNOWN, reason or "Suspended", message),)
    if phase is Phase.REMOVED:
        return (Condition(ConditionType.READY, FALSE, reason or "Removed", message),)
    why = reason or str(phase)
    return (
        Condition(ConditionType.READY, FALSE, why, message),
        Condition(ConditionType.STALLED, TRUE, why, message),
    )


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    """The recorded state of one instance on one cluster.

    ``updated_at`` (RFC 3339 UTC) is when the record last changed; like each
    condition's ``last_transition_time`` it is volatile and ignored by
    ``state_key``, which decides whether a pass changed anything worth a commit.
    ``reason`` is the kstatus reason behind a non-Ready phase (``DowngradeBlocked``).
    """

    cluster: str
    instance: str
    app: str
    phase: Phase
    version: str | None = None
    desired_version: str | None = None
    source: str = ""
    source_commit: str = ""
    conditions: tuple[Condition, ...] = ()
    objects: int = 0
    reason: str = ""
    message: str = ""
    rollout: RolloutRecord | None = None
    migrations: tuple[Mapping[str, Any], ...] | None = None
    updated_at: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    # the pinned image builds that run with ``version`` (image -> "tag@digest", SPEC
    # section 8); absent from records written before builds.yaml, and when none is pinned
    images: Mapping[str, str] = field(default_factory=dict)
    # not recorded: this pass changed the instance's objects, at ``source_commit``. Then
    # ``sourceCommit`` alone is a change worth a commit (a parameter edit that stays
    # Ready still moved what runs); otherwise it is not (``status.records``)
    applied: bool = field(default=False, compare=False)

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def with_default_conditions(self) -> InstanceStatus:
        """This record with the conditions ``conditions_for`` derives, when it has none."""
        if self.conditions:
            return self
        return replace(self, conditions=conditions_for(self.phase, self.reason, self.message))

    def state_key(self) -> dict[str, Any]:
        """``to_dict`` without the volatile timestamps: equal keys mean nothing changed."""
        data = self.to_dict()
        data.pop("updatedAt", None)
        if self.rollout is not None:
            data["rollout"] = list(self.rollout.commit_key())  # not every pod moving
        for cond in data.get("conditions", []):
            cond.pop("lastTransitionTime", None)
        return data

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": STATUS_KIND,
            "cluster": self.cluster,
            "instance": self.instance,
            "app": self.app,
            "version": self.version,
            "desiredVersion": self.desired_version,
            "source": self.source,
            "sourceCommit": self.source_commit,
            "phase": str(self.phase),
        }
        if self.reason:
            data["reason"] = self.reason
        if self.message:
            data["message"] = self.message
        data["conditions"] = [c.to_dict() for c in self.conditions]
        data["objects"] = self.objects
        if self.images:
            data["images"] = dict(sorted(self.images.items()))
        if self.rollout is not None:
            data["rollout"] = self.rollout.to_dict()
        if self.migrations is not None:
            data["migrations"] = [dict(m) for m in self.migrations]
        if self.updated_at:
            data["updatedAt"] = self.updated_at
        for key, value in self.extra.items():
            data.setdefault(key, value)
        return data

    @classmethod
    def from_dict(cls, data: object) -> InstanceStatus:
        """Parse a status record; raises ``StatusFormatError`` naming the bad field."""
        if not isinstance(data, Mapping):
            raise StatusFormatError(f"expected a mapping, got {_kind(data)}")
        if data.get("kind") != STATUS_KIND:
            raise StatusFormatError(f"kind must be {STATUS_KIND}, got {data.get('kind')!r}")
        if data.get("apiVersion") != API_VERSION:
            raise StatusFormatError(
                f"apiVersion must be {API_VERSION}, got {data.get('apiVersion')!r}"
            )
        phase_text = _text(data, "phase", required=True)
        try:
            phase = Phase(phase_text)
        except ValueError as e:
            allowed = ", ".join(p.value for p in Phase)
            raise StatusFormatError(f"phase must be one of {allowed}, got {phase_text!r}") from e
        conditions = data.get("conditions") or []
        if not isinstance(conditions, list):
            raise StatusFormatError(f"conditions must be a list, got {_kind(conditions)}")
        objects = data.get("objects", 0)
        if not isinstance(objects, int) or isinstance(objects, bool):
            raise StatusFormatError(f"objects must be an integer, got {objects!r}")
        return cls(
            cluster=_text(data, "cluster", required=True),
            instance=_text(data, "instance", required=True),
            app=_text(data, "app"),
            phase=phase,
            version=_optional_text(data, "version"),
            desired_version=_optional_text(data, "desiredVersion"),
            source=_text(data, "source"),
            source_commit=_text(data, "sourceCommit"),
            conditions=tuple(Condition.from_dict(c) for c in conditions),
            objects=objects,
            reason=_text(data, "reason"),
            message=_text(data, "message"),
            rollout=_rollout(data),
            migrations=_optional_list(data, "migrations"),
            updated_at=_text(data, "updatedAt"),
            images=_images(data),
            extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS},
        )


_KNOWN_KEYS = frozenset(
    {
        "apiVersion",
        "kind",
        "cluster",
        "instance",
        "app",
        "version",
        "desiredVersion",
        "source",
        "sourceCommit",
        "phase",
        "images",
        "reason",
        "message",
        "conditions",
        "objects",
        "rollout",
        "migrations",
        "updatedAt",
    }
)


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def _text(data: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise StatusFormatError(f"{key} is required")
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise StatusFormatError(f"{key} must be a string, got {_kind(value)}")
    return str(value)


def _optional_text(data: Mapping[str, Any], key: str) -> str | None:
    return _text(data, key) if data.get(key) is not None else None


def _optional_mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise StatusFormatError(f"{key} must be a mapping, got {_kind(value)}")
    return dict(value)


def _rollout(data: Mapping[str, Any]) -> RolloutRecord | None:
    value = data.get("rollout")
    if value is None:
        return None
    try:
        return RolloutRecord.from_dict(value)
    except RolloutFormatError as e:
        raise StatusFormatError(str(e)) from e


def _optional_list(data: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise StatusFormatError(f"{key} must be a list of mappings")
    return tuple(dict(v) for v in value)


def _images(data: Mapping[str, Any]) -> dict[str, str]:
    value = data.get("images", {})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise StatusFormatError(f"images must map image names to builds, got {value!r}")
    return dict(value)
