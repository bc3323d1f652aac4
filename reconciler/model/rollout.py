"""The rollout record: where a batch rollout stands (SPEC section 4).

It lives in ``model/`` because ``InstanceStatus`` carries it on the status branch and
``reconciler.status`` formats commit subjects from it; ``reconciler.rollout`` holds
the state machine that produces new records. The record is immutable and
round-trips through ``to_dict``/``from_dict`` with the exact keys SPEC names
(``from``, ``to``, ``state``, ``batch``, ``batches``, ``batchState``, ``replicas``,
``partition``, ``paused``, ``startedAt``, ``updatedAt``, ``message``) plus three the
machine needs to survive a restart without guessing: ``batchStartedAt`` (the health
timeout counts from it), ``instanceDigest`` (a failed ``to`` is not retried until
the instance file changes), ``reason``, and ``targets`` (replicas on ``to`` after
each batch, for the progress view of ``reconciler rollout status``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

E = TypeVar("E", bound=StrEnum)


class RolloutFormatError(ValueError):
    """A rollout record that does not have the shape of SPEC section 4; says which field."""


class RollingState(StrEnum):
    """The rollout as a whole (KubeVela's names, as SPEC section 4 requires)."""

    INITIALIZING = "initializing"
    ROLLING = "rollingInBatches"
    WAITING = "waitingForPromotion"
    FINALISING = "finalising"
    SUCCEEDED = "rolloutSucceed"
    FAILED = "rolloutFailed"
    ROLLED_BACK = "rolledBack"
    ABANDONED = "rolloutAbandoned"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {RollingState.SUCCEEDED, RollingState.FAILED, RollingState.ROLLED_BACK, RollingState.ABANDONED}
)


class BatchState(StrEnum):
    """One batch: scaled, then verified (ready, baked, analysed), then the old side retired."""

    INITIALIZING = "batchInitializing"
    ROLLING = "batchInRolling"
    VERIFYING = "batchVerifying"
    FINALIZING = "batchFinalizing"
    READY = "batchReady"


@dataclass(frozen=True)
class Replicas:
    """Replica counts summed over the instance's workloads, counted from pods."""

    desired: int = 0
    updated: int = 0
    ready: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"desired": self.desired, "updated": self.updated, "ready": self.ready}

    @classmethod
    def from_dict(cls, data: object) -> Replicas:
        if not isinstance(data, Mapping):
            raise RolloutFormatError("rollout.replicas must be a mapping")
        return cls(
            desired=_int(data, "replicas.desired"),
            updated=_int(data, "replicas.updated"),
            ready=_int(data, "replicas.ready"),
        )


@dataclass(frozen=True)
class RolloutRecord:
    """One instance's rollout from ``from_version`` to ``to_version``.

    ``batch`` counts from 1 (0 while initializing); ``batch_state`` is the state of
    that batch. ``paused`` is the gate as last seen; ``partition`` likewise.
    ``updated_at`` changes only when state, batch, batch state or a gate changes,
    so it is also "since when" for the bake time of ``batchVerifying``.
    """

    from_version: str
    to_version: str
    state: RollingState
    batches: int
    batch: int = 0
    batch_state: BatchState = BatchState.INITIALIZING
    replicas: Replicas = field(default_factory=Replicas)
    partition: int | None = None
    paused: bool = False
    started_at: str = ""
    updated_at: str = ""
    batch_started_at: str = ""
    message: str = ""
    reason: str = ""
    instance_digest: str = ""
    targets: tuple[int, ...] = ()  # replicas running ``to`` after each batch, all workloads

    def commit_key(self) -> tuple[object, ...]:
        """What a status commit is about: equal keys mean no step a person cares about.

        Versions and start time (a new rollout), the state with the moving states
        folded together, the gate ``paused``, and the number of batches ready.
        """
        return _commit_key(self)

    @property
    def batches_done(self) -> int:
        """How many batches are ready: the current one once ``batchReady``, else the ones before."""
        if self.state is RollingState.INITIALIZING:
            return 0
        return self.batch if self.batch_state is BatchState.READY else self.batch - 1

    @property
    def label(self) -> str:
        """``6.5.0 -> 6.6.0``, the value of the ``Reconciler-Rollout`` trailer."""
        return f"{self.from_version} -> {self.to_version}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "from": self.from_version,
            "to": self.to_version,
            "state": str(self.state),
            "batch": self.batch,
            "batches": self.batches,
            "batchState": str(self.batch_state),
            "replicas": self.replicas.to_dict(),
            "partition": self.partition,
            "paused": self.paused,
            "startedAt": self.started_at,
            "updatedAt": self.updated_at,
            "message": self.message,
        }
        if self.batch_started_at:
            data["batchStartedAt"] = self.batch_started_at
        if self.reason:
            data["reason"] = self.reason
        if self.instance_digest:
            data["instanceDigest"] = self.instance_digest
        if self.targets:
            data["targets"] = list(self.targets)
        return data

    @classmethod
    def from_dict(cls, data: object) -> RolloutRecord:
        """Parse a record; raises ``RolloutFormatError`` naming the bad field."""
        if not isinstance(data, Mapping):
            raise RolloutFormatError("rollout must be a mapping")
        state = _enum(RollingState, data, "state")
        batch_state = _enum(BatchState, data, "batchState")
        partition = data.get("partition")
        if partition is not None and (
            not isinstance(partition, int) or isinstance(partition, bool) or partition < 0
        ):
            raise RolloutFormatError(f"rollout.partition must be a count >= 0, got {partition!r}")
        paused = data.get("paused", False)
        if not isinstance(paused, bool):
            raise RolloutFormatError(f"rollout.paused must be true or false, got {paused!r}")
        batches = _int(data, "batches")
        targets = data.get("targets", [])
        if not isinstance(targets, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in targets
        ):
            raise RolloutFormatError(f"rollout.targets must be a list of counts, got {targets!r}")
        batch = _int(data, "batch")
        if batch > batches:
            raise RolloutFormatError(f"rollout.batch {batch} is beyond batches {batches}")
        return cls(
            from_version=_str(data, "from", required=True),
            to_version=_str(data, "to", required=True),
            state=state,
            batches=batches,
            batch=batch,
            batch_state=batch_state,
            replicas=Replicas.from_dict(data.get("replicas", {})),
            partition=partition,
            paused=paused,
            started_at=_str(data, "startedAt"),
            updated_at=_str(data, "updatedAt"),
            batch_started_at=_str(data, "batchStartedAt"),
            message=_str(data, "message"),
            reason=_str(data, "reason"),
            instance_digest=_str(data, "instanceDigest"),
            targets=tuple(targets),
        )


def noteworthy(previous: RolloutRecord | None, current: RolloutRecord | None) -> bool:
    """Whether going from ``previous`` to ``current`` is a step a person cares about.

    SPEC section 4: started, each batch ready, waiting for promotion, paused,
    resumed, failed, rolled back, succeeded, abandoned. The intermediate batch
    states (rolling, verifying, finalizing) and replica counts are not: they would
    make a commit per pod.
    """
    if current is None:
        return False
    return previous is None or previous.commit_key() != current.commit_key()


_ACTIVE = frozenset({RollingState.INITIALIZING, RollingState.ROLLING, RollingState.FINALISING})


def _commit_key(record: RolloutRecord) -> tuple[object, ...]:
    state = "active" if record.state in _ACTIVE else str(record.state)
    return (
        record.from_version,
        record.to_version,
        record.started_at,
        state,
        record.paused,
        record.batches_done,
    )


def describe(record: RolloutRecord, app: str = "") -> str:
    """``rollout podinfo 6.5.0 -> 6.6.0: batch 2/3 ready (3/5 replicas)``."""
    head = f"rollout {app + ' ' if app else ''}{record.label}"
    counts = f"({record.replicas.updated}/{record.replicas.desired} replicas)"
    state = record.state
    if state is RollingState.INITIALIZING:
        what = f"started, {record.batches} batches"
    elif state is RollingState.WAITING:
        what = f"batch {record.batch}/{record.batches} ready, waiting for promotion {counts}"
    elif state is RollingState.SUCCEEDED:
        what = f"succeeded {counts}"
    elif state is RollingState.FAILED:
        what = f"failed at batch {record.batch}/{record.batches} {counts}"
    elif state is RollingState.ROLLED_BACK:
        what = f"rolled back at batch {record.batch}/{record.batches}"
    elif state is RollingState.ABANDONED:
        what = f"abandoned at batch {record.batch}/{record.batches} {counts}"
    elif record.paused:
        what = f"paused at batch {record.batch}/{record.batches} {counts}"
    elif record.batch_state is BatchState.READY:
        what = f"batch {record.batch}/{record.batches} ready {counts}"
    elif record.batch_state is BatchState.INITIALIZING:
        what = f"batch {record.batch}/{record.batches} started {counts}"
    else:
        what = f"batch {record.batch}/{record.batches} {record.batch_state} {counts}"
    if state in (RollingState.FAILED, RollingState.ROLLED_BACK) and record.message:
        what += f": {record.message}"
    return f"{head}: {what}"


def _enum(kind: type[E], data: Mapping[str, Any], key: str) -> E:
    text = _str(data, key, required=True)
    try:
        return kind(text)
    except ValueError as e:
        allowed = ", ".join(m.value for m in kind)
        raise RolloutFormatError(f"rollout.{key} must be one of {allowed}, got {text!r}") from e


def _str(data: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None or value == "":
        if required:
            raise RolloutFormatError(f"rollout.{key} is required")
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RolloutFormatError(f"rollout.{key} must be a string, got {type(value).__name__}")
    return str(value)


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key.rsplit(".", 1)[-1], 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RolloutFormatError(f"rollout.{key} must be a count >= 0, got {value!r}")
    return value
