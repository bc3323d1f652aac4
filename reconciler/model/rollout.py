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
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from reconciler.model.analysis import (
    MAX_RECORDED,
    PASSED,
    AnalysisFormatError,
    Measurement,
)
from reconciler.model.images import parse_build_tag

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
    # the pinned image builds of each side, ``(image, "tag@digest")`` sorted (SPEC
    # section 8): a rebuild keeps the version, so a side is its version *and* these
    from_images: tuple[tuple[str, str], ...] = ()
    to_images: tuple[tuple[str, str], ...] = ()
    # Prometheus measurements of this rollout's batches (SPEC section 4c), oldest first
    analysis: tuple[Measurement, ...] = ()

    @property
    def from_key(self) -> str:
        """The release ``from`` names: its version and builds (``release_key``)."""
        return release_key(self.from_version, dict(self.from_images))

    @property
    def to_key(self) -> str:
        return release_key(self.to_version, dict(self.to_images))

    @property
    def is_build_change(self) -> bool:
        """Same version, other builds: a rebuild rolling out (SPEC section 8)."""
        return self.from_version == self.to_version and self.from_images != self.to_images

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
        """``6.5.0 -> 6.6.0``, the value of the ``Reconciler-Rollout`` trailer.

        A rebuild of the same version is named by its builds instead
        (``2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1``, see ``builds_label``).
        """
        return rollout_label(self.from_key, self.to_key)

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
        if self.from_images:
            data["fromImages"] = dict(self.from_images)
        if self.to_images:
            data["toImages"] = dict(self.to_images)
        if self.analysis:
            data["analysis"] = [m.to_dict() for m in self.analysis]
        return data

    def measured(self, batch: int) -> tuple[Measurement, ...]:
        """The measurements of ``batch``, oldest first."""
        return tuple(m for m in self.analysis if m.batch == batch)

    def with_measurements(self, new: tuple[Measurement, ...]) -> RolloutRecord:
        """This record with ``new`` measurements appended (the newest ``MAX_RECORDED`` kept)."""
        return replace(self, analysis=(*self.analysis, *new)[-MAX_RECORDED:])

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
            from_images=_images(data, "fromImages"),
            to_images=_images(data, "toImages"),
            analysis=_measurements(data.get("analysis", [])),
        )


def _measurements(raw: object) -> tuple[Measurement, ...]:
    if not isinstance(raw, list):
        raise RolloutFormatError(f"rollout.analysis must be a list, got {type(raw).__name__}")
    try:
        return tuple(Measurement.from_dict(item) for item in raw[-MAX_RECORDED:])
    except AnalysisFormatError as e:
        raise RolloutFormatError(str(e)) from e


def analysis_summary(record: RolloutRecord, batch: int) -> str:
    """``error-rate 0.002 < 0.01 (4/4)``: each query's last value and how many passed.

    Empty when the batch was not measured (no Prometheus analysis).
    """
    parts = []
    names = dict.fromkeys(m.name for m in record.measured(batch))
    for name in names:
        mine = [m for m in record.measured(batch) if m.name == name]
        passed = sum(1 for m in mine if m.result == PASSED)
        parts.append(f"{mine[-1].describe()} ({passed}/{len(mine)})")
    return ", ".join(parts)


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
        record.from_key,
        record.to_key,
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
    elif state is RollingState.WAITING and analysis_summary(record, record.batch):
        summary = analysis_summary(record, record.batch)
        what = (
            f"batch {record.batch}/{record.batches} verified: {summary}, "
            f"waiting for promotion {counts}"
        )
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
    elif record.batch_state is BatchState.READY and analysis_summary(record, record.batch):
        summary = analysis_summary(record, record.batch)
        what = f"batch {record.batch}/{record.batches} verified: {summary} {counts}"
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


# --- releases: a version and the image builds pinned for it (SPEC section 8) ----------

_KEY_SEP = "|"  # in neither a version nor an image name or tag


def release_key(version: str, images: Mapping[str, str]) -> str:
    """One string for "version ``version`` with these builds", for the rollout machine.

    The machine compares what runs with what is desired by string; a rebuild keeps
    the version, so the string carries the builds (``image=tag@digest``, sorted).
    Without builds it is the version itself, so everything before builds.yaml
    (records, inventories, tests) reads exactly as before.
    """
    if not images:
        return version
    return _KEY_SEP.join([version, *(f"{n}={b}" for n, b in sorted(images.items()))])


def split_release(key: str) -> tuple[str, dict[str, str]]:
    """The version and builds of a ``release_key``."""
    version, *rest = key.split(_KEY_SEP)
    return version, dict(part.split("=", 1) for part in rest if "=" in part)


def rollout_label(from_key: str, to_key: str) -> str:
    """``6.5.0 -> 6.6.0`` between versions; between builds of one version their long
    tags, ``2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1`` (``builds_label``)."""
    from_version, from_images = split_release(from_key)
    to_version, to_images = split_release(to_key)
    if from_version == to_version and from_images != to_images:
        return builds_label(from_images, to_images)
    return f"{from_version} -> {to_version}"


def release_label(key: str) -> str:
    """A release key for people: the version, and its builds' long tags if any."""
    version, images = split_release(key)
    if not images:
        return version
    pinned = ", ".join(f"{n} {build_tag(b)}" for n, b in sorted(images.items()))
    return f"{version} ({pinned})"


def images_tuple(images: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(images.items()))


def build_tag(build: str) -> str:
    """``2.6.2-rev1-b5.1`` of ``2.6.2-rev1-b5.1@sha256:...``."""
    return build.split("@", 1)[0]


def builds_label(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """A rebuild named by its long tags: ``2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1``.

    Only the images whose build changed are named. With one, its two tags; with
    several, ``image=tag`` for each, comma-separated on both sides
    (``web=2.6.2-rev1-b5.1,worker=1.4-rev2-b3 -> web=2.6.2-rev1-b6.1,worker=1.4-rev2-b4``),
    so the value keeps the ``<from> -> <to>`` form. A side that was not pinned is
    named by the intermediate tag the other side's build extends (what the version
    names), or ``unpinned`` when that cannot be told; a digest-only change (the
    same long tag pushed again) by ``tag@sha256:<first 12>``.
    """
    names = sorted(n for n in {*before, *after} if before.get(n) != after.get(n))

    def side(build: str | None, other: str | None) -> str:
        if build is None:
            return _intermediate(other) if other is not None else "unpinned"
        if other is not None and build_tag(build) == build_tag(other):
            return build_tag(build) + "@" + build.split("@", 1)[-1][:19]
        return build_tag(build)

    if len(names) == 1:
        n = names[0]
        return f"{side(before.get(n), after.get(n))} -> {side(after.get(n), before.get(n))}"
    left = ",".join(f"{n}={side(before.get(n), after.get(n))}" for n in names)
    right = ",".join(f"{n}={side(after.get(n), before.get(n))}" for n in names)
    return f"{left} -> {right}"


def _intermediate(build: str) -> str:
    parsed = parse_build_tag(build_tag(build))
    return parsed.intermediate if parsed is not None else "unpinned"


def _images(data: Mapping[str, Any], key: str) -> tuple[tuple[str, str], ...]:
    value = data.get(key, {})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise RolloutFormatError(f"rollout.{key} must map image names to builds, got {value!r}")
    return images_tuple(value)
