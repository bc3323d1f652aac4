"""The rollout state machine: (record, settings, observation) -> (record, actions, next look).

Pure: no clock, no cluster, no Git. The daemon observes the cluster (counting pods,
not reading spec), calls ``step`` once per instance per pass, hands the actions to
the kube driver and schedules the next look. One call makes at most one transition,
so the daemon never waits on health (SPEC section 4, "the daemon never waits").

Restart safety rests on two rules: every action carries an absolute target (scale
to N, never "add a batch"), so repeating one is harmless; and a target is never
below what the cluster already runs (``max(planned, observed)``), so a record that
is older than the cluster never moves a replica back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from reconciler.model.analysis import FAILED, INCONCLUSIVE, Measurement, PrometheusAnalysis
from reconciler.model.rollout import (
    BatchState,
    Replicas,
    RollingState,
    RolloutRecord,
    images_tuple,
    release_label,
    split_release,
)
from reconciler.model.words import plural
from reconciler.rollout.plan import RolloutSettings

# How soon to look again while something moves: pods become ready in seconds.
POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Workload:
    """One workload's pods as observed: ``updated`` run ``to``, ``old`` run ``from``."""

    name: str  # "Deployment/web"
    desired: int
    updated: int = 0
    ready: int = 0  # ready pods of either version
    updated_ready: int = 0
    old: int = 0
    failing: tuple[str, ...] = ()  # "web-7d9-x: CrashLoopBackOff" for moved pods


@dataclass(frozen=True)
class Observation:
    """What the daemon saw this pass; ``analysis`` is the current batch's Job state."""

    now: datetime
    desired_version: str
    workloads: tuple[Workload, ...] = ()
    analysis: str | None = None  # None (no Job) | "running" | "succeeded" | "failed"
    analysis_message: str = ""  # why a failed analysis Job failed (its pod, its log's tail)
    # Prometheus measurements taken for this look (one per query), when one was due
    # (``measurement_due``); the machine records them and decides the batch from them
    measurements: tuple[Measurement, ...] = ()
    helpers_left: bool = False  # the temporary Deployment copy or an OnDelete strategy
    prepared: bool = False  # copies ready with every ``from`` replica, partitions set
    instance_digest: str = ""

    @property
    def replicas(self) -> Replicas:
        return Replicas(
            desired=sum(w.desired for w in self.workloads),
            updated=sum(w.updated for w in self.workloads),
            ready=sum(w.ready for w in self.workloads),
        )


# ---------------------------------------------------------------- actions


@dataclass(frozen=True)
class Prepare:
    """Before batch 1: apply non-workload objects, create the Deployment copy, set
    StatefulSet partitions to ``desired``, DaemonSets to ``OnDelete``. Idempotent."""


@dataclass(frozen=True)
class ScaleBatch:
    """Make ``target`` replicas of ``workload`` run ``to`` (absolute, idempotent).

    Deployment: scale the rendered Deployment up to ``target`` (the copy is not
    touched yet, so ready replicas never drop). StatefulSet: partition =
    desired - target. DaemonSet: delete ``from`` pods until ``target`` run ``to``.
    """

    batch: int
    workload: str
    target: int


@dataclass(frozen=True)
class RetireOld:
    """Deployment copy down to ``desired - target`` once the batch is verified."""

    batch: int
    workload: str
    keep: int


@dataclass(frozen=True)
class RunAnalysis:
    """Create the batch's analysis Job if it does not exist (idempotent by name)."""

    batch: int
    manifest: str


@dataclass(frozen=True)
class Finalize:
    """Apply the plain render of ``to``, delete helpers, prune objects ``to`` drops."""


@dataclass(frozen=True)
class Rollback:
    """Return every replica to ``from`` at once: plain render of ``from``, no helpers."""

    reason: str


@dataclass(frozen=True)
class Consolidate:
    """Abandon: bring every replica to ``version`` (the one most run) at once."""

    version: str


Action = Prepare | ScaleBatch | RetireOld | RunAnalysis | Finalize | Rollback | Consolidate


@dataclass(frozen=True)
class Step:
    """A transition: the new record, what the driver must do, when to look again.

    ``next_look`` is seconds, ``0`` for "at once", ``None`` for "only on a new commit"
    (a gate or a terminal state: nothing in the cluster will change by itself).
    """

    record: RolloutRecord
    actions: tuple[Action, ...] = ()
    next_look: float | None = None


def begin(from_version: str, to_version: str, settings: RolloutSettings, obs: Observation) -> Step:
    """A new rollout in ``initializing``; the next ``step`` prepares the workloads.

    ``from_version`` and ``to_version`` are release keys (``release_key``): a version,
    plus the pinned image builds when there are any, so a rebuild of the same version
    is a rollout too (SPEC section 8).
    """
    stamp = _stamp(obs.now)
    from_plain, from_images = split_release(from_version)
    to_plain, to_images = split_release(to_version)
    record = RolloutRecord(
        from_version=from_plain,
        to_version=to_plain,
        from_images=images_tuple(from_images),
        to_images=images_tuple(to_images),
        state=RollingState.INITIALIZING,
        batches=len(settings.batches),
        replicas=obs.replicas,
        partition=settings.gate(to_plain),
        paused=settings.paused,
        started_at=stamp,
        updated_at=stamp,
        message=(
            f"{plural(len(settings.batches), 'batch', 'batches')} over "
            f"{plural(obs.replicas.desired, 'replica')}"
        ),
        instance_digest=obs.instance_digest,
        targets=_summed_targets(settings, obs),
    )
    return Step(record, (), 0)


def _summed_targets(settings: RolloutSettings, obs: Observation) -> tuple[int, ...]:
    per_workload = [settings.targets(w.desired) for w in obs.workloads]
    return tuple(
        sum(t[k] if k < len(t) else 0 for t in per_workload) for k in range(len(settings.batches))
    )


def step(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> Step:
    """One transition of ``record`` given what the cluster shows now."""
    recorded = record
    record = replace(record, replicas=obs.replicas)
    if record.state.terminal:
        return _after_end(record, settings, obs, recorded)
    if obs.desired_version == record.from_key:
        why = "desired version reverted"
        return _end(record, obs, RollingState.ROLLED_BACK, why, rollback=True)
    if obs.desired_version != record.to_key:
        return _abandon(record, obs)
    gates = _gates(record, settings, obs)
    if gates is not None:
        return gates
    if record.state is RollingState.INITIALIZING:
        return _initializing(record, settings, obs)
    if record.state is RollingState.FINALISING:
        return _finalising(record, settings, obs)
    if record.state is RollingState.WAITING:
        return Step(record, (), None)
    failed = _failure(record, settings, obs)
    if failed is not None:
        return failed
    return _batch(record, settings, obs)


def _initializing(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> Step:
    """Prepare until the cluster shows it prepared (the copy ready), then batch 1.

    The copy serves every replica of ``from`` before the rendered Deployment
    changes, so no batch ever lowers the ready count.
    """
    if obs.prepared:
        return _moved(record, obs, state=RollingState.ROLLING, batch=1)
    if _elapsed(record.started_at, obs.now) > settings.health_timeout_seconds:
        why = f"preparing did not become ready within {settings.health_timeout_seconds}s"
        return _fail(record, settings, obs, why)
    return Step(record, (Prepare(),), POLL_SECONDS)


def _gates(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> Step | None:
    """Pause, resume and promotion: read from the instance file on every call.

    The record's ``partition`` is the gate of *this* rollout: the policy partition,
    or further where an approval for ``to`` opens more batches (``settings.gate``).
    """
    gate = settings.gate(record.to_version)
    if settings.paused != record.paused:
        return _moved(record, obs, paused=settings.paused, partition=gate)
    if record.state is RollingState.WAITING:
        if record.paused:
            if gate != record.partition:
                return _moved(record, obs, partition=gate)
            return Step(record, (), None)
        if gate is None or gate > record.batch:
            if record.batch >= record.batches:
                return _moved(record, obs, state=RollingState.FINALISING, partition=gate)
            nxt = record.batch + 1
            return _moved(record, obs, state=RollingState.ROLLING, batch=nxt, partition=gate)
        if gate != record.partition:
            return _moved(record, obs, partition=gate)
        return Step(record, (), None)
    if gate != record.partition:
        return _moved(record, obs, partition=gate)
    if record.paused and record.batch_state in (BatchState.INITIALIZING, BatchState.READY):
        return Step(record, (), None)  # paused: start no further batch
    return None


def _batch(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> Step:
    k = record.batch
    bs = record.batch_state
    if bs is BatchState.INITIALIZING:
        actions = tuple(
            ScaleBatch(k, w.name, max(_target(settings, w, k), w.updated)) for w in obs.workloads
        )
        return _moved(record, obs, batch_state=BatchState.ROLLING, actions=actions, new_batch=True)
    if bs is BatchState.ROLLING:
        if all(w.updated_ready >= _target(settings, w, k) for w in obs.workloads):
            return _moved(record, obs, batch_state=BatchState.VERIFYING)
        return Step(record, (), _until_timeout(record, settings, obs))
    if bs is BatchState.VERIFYING:
        if not all(w.updated_ready >= _target(settings, w, k) for w in obs.workloads):
            return _moved(record, obs, batch_state=BatchState.ROLLING)  # bake restarts
        baked = _elapsed(record.updated_at, obs.now)
        if baked < settings.pause_seconds:
            return Step(record, (), min(settings.pause_seconds - baked, POLL_SECONDS * 5))
        if settings.prometheus is not None:
            record, verdict = _analyse(record, settings, settings.prometheus, obs)
            if verdict is not None:
                return verdict
        elif settings.analysis_job:
            if obs.analysis is None:
                return Step(record, (RunAnalysis(k, settings.analysis_job),), POLL_SECONDS)
            if obs.analysis != "succeeded":
                return Step(record, (), POLL_SECONDS)
        retire = tuple(
            RetireOld(k, w.name, w.desired - _target(settings, w, k))
            for w in obs.workloads
            if w.old > w.desired - _target(settings, w, k)
        )
        return _moved(record, obs, batch_state=BatchState.FINALIZING, actions=retire)
    if bs is BatchState.FINALIZING:
        if all(w.old <= w.desired - _target(settings, w, k) for w in obs.workloads):
            return _moved(record, obs, batch_state=BatchState.READY)
        return Step(record, (), _until_timeout(record, settings, obs))
    # batchReady: the next batch, a promotion gate, or the end
    if k >= record.batches:
        return _moved(record, obs, state=RollingState.FINALISING)
    gate = settings.gate(record.to_version)
    if gate is not None and k >= gate:
        return _moved(record, obs, state=RollingState.WAITING)
    return _moved(record, obs, batch=k + 1)


INCONCLUSIVE_REASON = "AnalysisInconclusive"


def _analyse(
    record: RolloutRecord, settings: RolloutSettings, analysis: PrometheusAnalysis, obs: Observation
) -> tuple[RolloutRecord, Step | None]:
    """The batch's Prometheus analysis (SPEC section 4c): the record with this look's
    measurements, and the step to take, None once the batch is verified.

    ``obs.measurements`` (taken because ``measurement_due`` said so) are recorded
    first. A query failed more often than ``failureLimit`` fails the batch at once
    (``onFailure`` applies); inconclusive more often than ``inconclusiveLimit`` holds
    the rollout (``Stalled``, ``AnalysisInconclusive``): missing data or an
    unreachable Prometheus never rolls forward, and never rolls back either. Verified
    when every query has ``count`` measurements within both limits.
    """
    k = record.batch
    if obs.measurements:
        record = record.with_measurements(tuple(m for m in obs.measurements if m.batch == k))
    mine = record.measured(k)
    for query in analysis.queries:
        of_query = [m for m in mine if m.name == query.name]
        failed = [m for m in of_query if m.result == FAILED]
        if len(failed) > analysis.failure_limit:
            # short: it ends the commit subject ("rolled back at batch 2/3: ...")
            why = f"analysis: {failed[-1].describe()}, {len(failed)}/{len(of_query)} failed"
            return record, _fail(record, settings, obs, why)
        vague = [m for m in of_query if m.result == INCONCLUSIVE]
        if len(vague) > analysis.inconclusive_limit:
            last = vague[-1]
            why = (
                f"analysis inconclusive: {last.name} {last.reason or 'no data'}, "
                f"{len(vague)}/{len(of_query)}; holding"
            )
            held = _end(record, obs, RollingState.FAILED, why, rollback=False)
            return record, replace(held, record=replace(held.record, reason=INCONCLUSIVE_REASON))
    if _looks(record, analysis, k) >= analysis.count:
        return record, None
    # never 0: a look that was due measures, so the next one is ``interval`` away
    return record, Step(record, (), max(_until_due(record, analysis, obs.now), 0.1))


def _looks(record: RolloutRecord, analysis: PrometheusAnalysis, batch: int) -> int:
    """How many measurements every query of ``batch`` has (a look measures each once)."""
    mine = record.measured(batch)
    return min(sum(1 for m in mine if m.name == q.name) for q in analysis.queries)


def _until_due(record: RolloutRecord, analysis: PrometheusAnalysis, now: datetime) -> float:
    """Seconds until the batch's next measurement (0: due now)."""
    mine = record.measured(record.batch)
    if not mine:
        return 0.0
    return analysis.interval_seconds - _elapsed(mine[-1].at, now)


def measurement_due(record: RolloutRecord | None, settings: RolloutSettings, now: datetime) -> bool:
    """Whether the next look at ``record`` should measure: the daemon asks Prometheus then.

    A batch in ``batchVerifying`` that has baked for ``pauseSeconds``, with fewer than
    ``count`` looks, whose last look is ``interval`` ago (or that has none). The
    machine does the same arithmetic when it records what was measured.
    """
    analysis = settings.prometheus
    if (
        analysis is None
        or record is None
        or record.state is not RollingState.ROLLING
        or record.batch_state is not BatchState.VERIFYING
        or record.paused
    ):
        return False
    if _elapsed(record.updated_at, now) < settings.pause_seconds:
        return False
    if _looks(record, analysis, record.batch) >= analysis.count:
        return False
    return _until_due(record, analysis, now) <= 0


def _failure(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> Step | None:
    """Failing moved pods fail at once; otherwise the batch's health timeout."""
    if record.state is not RollingState.ROLLING or record.batch_state is BatchState.READY:
        return None
    if record.batch_state is BatchState.INITIALIZING:
        return None
    failing = [f for w in obs.workloads for f in w.failing]
    if failing:
        why = f"batch {record.batch} pods failing: " + ", ".join(failing[:3])
        return _fail(record, settings, obs, why)
    if settings.analysis_job and obs.analysis == "failed":
        why = f"batch {record.batch} analysis Job failed"
        if obs.analysis_message:
            why += f": {obs.analysis_message}"
        return _fail(record, settings, obs, why)
    if record.batch_state is BatchState.VERIFYING and settings.prometheus is not None:
        return None  # ready; its analysis is bounded by count and interval, not the timeout
    if _elapsed(record.batch_started_at, obs.now) > settings.health_timeout_seconds:
        why = (
            f"batch {record.batch} not verified within {settings.health_timeout_seconds}s "
            f"({record.replicas.ready}/{record.replicas.desired} ready)"
        )
        return _fail(record, settings, obs, why)
    return None


def _fail(record: RolloutRecord, settings: RolloutSettings, obs: Observation, why: str) -> Step:
    if settings.on_failure == "rollback":
        return _end(record, obs, RollingState.ROLLED_BACK, why, rollback=True)
    return _end(record, obs, RollingState.FAILED, why, rollback=False)


def _finalising(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> Step:
    r = obs.replicas
    if not obs.helpers_left and r.updated == r.desired and r.ready >= r.desired:
        runs = f"every replica runs {release_label(record.to_key)}"
        return _moved(record, obs, state=RollingState.SUCCEEDED, message=runs)
    if _elapsed(record.updated_at, obs.now) > settings.health_timeout_seconds:
        return _fail(record, settings, obs, "finalising did not converge")
    return Step(record, (Finalize(),), POLL_SECONDS)


def _abandon(record: RolloutRecord, obs: Observation) -> Step:
    keep = _majority(record)
    why = (
        f"new desired version {release_label(obs.desired_version)}; "
        f"every replica returns to {release_label(keep)}"
    )
    step_ = _moved(record, obs, state=RollingState.ABANDONED, message=why)
    return replace(step_, actions=(Consolidate(keep),), next_look=0)


def _majority(record: RolloutRecord) -> str:
    """The version most of the record's replicas run (``from`` on a tie: it is the one
    known to work). The daemon counts them against the rollout's own ``to`` while it
    abandons it, not against the new desired version (``daemon.rolling``)."""
    r = record.replicas
    return record.to_key if r.updated * 2 > r.desired else record.from_key


def _end(
    record: RolloutRecord, obs: Observation, state: RollingState, why: str, *, rollback: bool
) -> Step:
    step_ = _moved(record, obs, state=state, message=why, reason=_REASONS[state])
    if not rollback:
        return replace(step_, actions=(), next_look=None)
    return replace(step_, actions=(Rollback(why),), next_look=POLL_SECONDS)  # to clean up


_REASONS = {
    RollingState.ROLLED_BACK: "RolledBack",
    RollingState.FAILED: "RolloutFailed",
}


def _after_end(
    record: RolloutRecord, settings: RolloutSettings, obs: Observation, recorded: RolloutRecord
) -> Step:
    """A finished rollout stays finished; a failed ``to`` waits for a change of the file.

    ``rolloutFailed``/``rolledBack`` with the same desired version and instance file
    stay put (SPEC: not retried until either changes); the daemon starts a new
    rollout (``begin``) when ``retry_allowed`` says so.
    A succeeded or rolled back rollout whose helpers are still there (a restart
    between the action and its cleanup, or a revert of the desired version before the
    cleanup finished) repeats its idempotent final action; a held failure whose
    desired version goes back to ``from`` is rolled back (SPEC: reverting rolls back).
    ``recorded`` is the record as it was stored (its replica counts from the last
    transition, not from this observation).
    """
    if obs.helpers_left and record.state is RollingState.SUCCEEDED:
        # converge on the version that succeeded, named: the driver's ``to`` is the
        # desired version now, which may already be the next one
        return Step(record, (Consolidate(record.to_key),), POLL_SECONDS)
    if obs.helpers_left and record.state is RollingState.ROLLED_BACK:
        return Step(record, (Rollback(record.message),), POLL_SECONDS)
    if (
        obs.helpers_left
        and record.state is RollingState.FAILED
        and obs.desired_version == record.from_key
    ):
        # a held failure keeps both versions; reverting the desired version rolls it back
        return _end(
            record, obs, RollingState.ROLLED_BACK, "desired version reverted", rollback=True
        )
    if obs.helpers_left and record.state is RollingState.ABANDONED:
        # the version chosen when it was abandoned, from the counts recorded then: the
        # observation now counts pods of the new desired version, which none run yet
        return Step(recorded, (Consolidate(_majority(recorded)),), POLL_SECONDS)
    return Step(record, (), None)


def retry_allowed(record: RolloutRecord, obs: Observation) -> bool:
    """Whether a new rollout may start over a finished ``record``."""
    if record.state in (RollingState.FAILED, RollingState.ROLLED_BACK):
        return obs.desired_version != record.to_key or obs.instance_digest != record.instance_digest
    return True


def _target(settings: RolloutSettings, workload: Workload, batch: int) -> int:
    targets = settings.targets(workload.desired)
    if not targets:
        return 0
    return targets[min(batch, len(targets)) - 1] if batch > 0 else 0


def _moved(
    record: RolloutRecord,
    obs: Observation,
    *,
    actions: tuple[Action, ...] = (),
    new_batch: bool = False,
    **changes: object,
) -> Step:
    """A transition: stamp ``updatedAt`` (and ``batchStartedAt`` when a batch scales)."""
    stamp = _stamp(obs.now)
    if "batch" in changes:
        changes.setdefault("batch_state", BatchState.INITIALIZING)
    if new_batch:
        changes["batch_started_at"] = stamp
    if "state" in changes and "message" not in changes:
        changes["message"] = ""
    new = replace(record, updated_at=stamp, **changes)  # type: ignore[arg-type]
    return Step(new, actions, POLL_SECONDS if actions else 0)


def _until_timeout(record: RolloutRecord, settings: RolloutSettings, obs: Observation) -> float:
    left = settings.health_timeout_seconds - _elapsed(record.batch_started_at, obs.now)
    return max(0.0, min(POLL_SECONDS, left + 0.001))


def _elapsed(stamp: str, now: datetime) -> float:
    if not stamp:
        return 0.0
    return (now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()


def _stamp(now: datetime) -> str:
    return now.isoformat().replace("+00:00", "Z")
