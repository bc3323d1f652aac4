"""Batch rollouts in the daemon's pass: which instances roll, one transition each, their record.

An instance rolls in batches when its version changes (upgrade, downgrade, a step
of an upgrade path) and its version or instance file plans ``rollout.batches``; a
first install and an instance without a plan are applied at once (SPEC section 4).
While a rollout is unfinished, the instance goes through ``drive_once`` instead of
the plain apply: one observation of the cluster, one transition of the state
machine, its actions, and the time of the next look. A pass never waits for a batch.

The last rollout record comes from the previous pass, or, after a restart, from
the status branch; the machine then continues from what the cluster shows.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.daemon.analysing import MeasuringDriver, placeholder_values
from reconciler.daemon.applying import creates_first_stage_kinds, instance_target
from reconciler.daemon.lanes import run_lanes
from reconciler.daemon.plan import InstancePlan, plan_fingerprint
from reconciler.kube import (
    ApplyOptions,
    InstanceResult,
    KubeClient,
    KubeRolloutDriver,
    LiveState,
    apply_instance,
    place_objects,
    workloads_of,
)
from reconciler.kube.passreads import PassReads
from reconciler.kube.rollout_analysis import RolloutAnalysis
from reconciler.model.builds import ImageBuild, pinned_images
from reconciler.model.catalog import Batch, Catalog
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.errors import KubeError
from reconciler.model.rollout import (
    RollingState,
    RolloutRecord,
    describe,
    noteworthy,
    rollout_label,
    split_release,
)
from reconciler.model.status import InstanceStatus, Phase
from reconciler.render import render_instance
from reconciler.rollout import (
    INCONCLUSIVE_REASON,
    AnalysisRun,
    PlanError,
    RolloutSettings,
    Step,
    drive_once,
    merge_plans,
    render_analysis_job,
    rollout_key,
)

INSTANCE_KIND = ("reconciler/v1", "Instance")
MAX_STEPS_PER_PASS = 8  # immediate transitions one pass may take for one instance


@dataclass(frozen=True)
class Rolled:
    """One instance's rollout step this pass: the record, what was done, when to look."""

    record: RolloutRecord | None
    result: InstanceResult
    next_look: float | None = None
    plain: bool = False  # nothing to roll and nothing to clean up: apply it as usual


def settings_of(plan: InstancePlan) -> RolloutSettings | None:
    """The instance's batch plan (instance file over version), None to change at once."""
    version = plan.version.rollout if plan.version is not None else None
    try:
        settings = merge_plans(version, plan.instance.rollout)
    except PlanError:
        return None  # validation reports it; the instance changes at once meanwhile
    return settings


def rollout_digest(plan: InstancePlan, settings: RolloutSettings) -> str:
    """What a failed ``to`` waits to change before it is tried again (SPEC section 4).

    The plan's fingerprint (version, objects, migrations) leaves out the rollout plan
    itself; without it, editing ``onFailure`` or ``analysis`` in the instance file after
    a failed analysis would not count as a change. The analysis Job's content counts
    too: it is what verifies a batch.
    """
    version = plan.version
    job = (
        version.analysis_jobs.get(settings.analysis_job)
        if version and settings.analysis_job
        else None
    )
    data = {
        "plan": plan_fingerprint(plan),
        "settings": repr(settings),
        "analysis": job.data if job is not None else None,
    }
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def rolls(
    plan: InstancePlan, deployed: str | None, record: RolloutRecord | None
) -> RolloutSettings | None:
    """The settings when this pass must drive a rollout for ``plan``, else None.

    ``deployed`` is the release the inventory records (``Inventory.release``: the
    version, plus its pinned image builds), so a rebuild of the running version rolls
    out like a version change (SPEC section 8).
    """
    if not plan.ok or plan.version is None or plan.instance.suspend or deployed is None:
        return None
    if not workloads_of(plan.objects):
        return None
    unfinished = record is not None and not record.state.terminal
    # a rollout that ended without success may have left the copy (or the partition)
    # behind when the desired version went back to ``from``: drive until it is cleaned
    # up; ``drive`` hands the instance back to the plain apply once nothing is left
    ended_badly = record is not None and record.state in _CLEANED_UP_BY_DRIVING
    settings = settings_of(plan)
    if settings is None:
        # no plan (any more): change at once, but a rollout under way still ends
        # through the machine, so its copy and partition never stay behind
        return AT_ONCE if unfinished or ended_badly else None
    if deployed != plan.release or unfinished or ended_badly:
        return settings
    return None


# What a rollout follows when the version it goes to plans no batches: one batch.
AT_ONCE = RolloutSettings(batches=(Batch(100, percent=True),))
_CLEANED_UP_BY_DRIVING = frozenset(
    {RollingState.ROLLED_BACK, RollingState.ABANDONED, RollingState.FAILED}
)


def drive(
    client: KubeClient,
    live: LiveState,
    catalog: Catalog,
    plan: InstancePlan,
    settings: RolloutSettings,
    options: ApplyOptions,
    *,
    deployed: str,
    record: RolloutRecord | None,
    source_commit: str,
    reads: PassReads | None = None,
    prometheus_url: str = "",
) -> Rolled:
    """One transition of ``plan``'s rollout; an API error fails this instance alone.

    ``prometheus_url`` (``run --prometheus-url``) is where a Prometheus analysis that
    names no address of its own asks its queries.

    ``deployed`` and the machine's ``from``/``to`` are release keys (version and pinned
    builds, ``release_key``): ``from`` is rendered with the builds that ran, read from
    the record or the inventory, never from today's ``builds.yaml``.
    """
    assert plan.version is not None and plan.release is not None
    inst = plan.instance
    to_key = plan.release
    to_version = plan.version.key
    from_key = record.from_key if record is not None and not record.state.terminal else deployed
    from_version, _ = split_release(from_key)
    target = instance_target(live.cluster, plan, source_commit)

    def render_release(key: str) -> tuple[dict[str, Any], ...]:
        """The objects of release ``key`` other than ``to``: the catalog's version with
        exactly the builds the key names (what ran, whatever ``builds.yaml`` says now)."""
        version, images = split_release(key)
        entry = catalog.apps.get(inst.app)
        old = entry.versions.get(version) if entry is not None else None
        if old is None:
            raise KubeError(f"cannot return to {inst.app} {version}: not in the catalog")
        builds = {n: _build(b) for n, b in images.items()}
        rendered = render_instance(catalog, inst, old, builds=builds)
        if not rendered.ok:
            raise KubeError(f"cannot render {inst.app} {version} to return to it")
        return tuple(rendered.objects)

    def apply_render(key: str, *, settled: bool = False) -> None:
        """The plain render of release ``key`` through the normal apply (inventory, prune).

        ``key`` is a version with the builds it ran or runs; a side other than ``to`` is
        rendered from the catalog's version with exactly those builds, so a rollback
        returns to the image that ran even after ``builds.yaml`` moved on.

        Finalizing applies ``to`` but the inventory keeps naming ``from`` until the
        rollout is recorded as succeeded (``settled``): the inventory's version is
        what the next pass plans from, and a path's next step must not start while
        this one is still converging.
        """
        version, images = split_release(key)
        if key == to_key:
            recorded, recorded_images = split_release(to_key if settled else from_key)
            render_target = replace(target, version=recorded, images=recorded_images)
        else:
            render_target = replace(
                target, objects=render_release(key), version=version, images=images
            )
        # the driver writes workloads directly (Prepare, ScaleBatch), so the pass's view
        # of them may predate this very pass's batch: read them again, or the apply
        # would compare against a stale copy and skip a write that is needed
        for obj in workloads_of(render_target.objects):
            ref = ObjectRef.of(obj)
            fresh = client.get(ref)
            if fresh is None:
                live.forget(ref)
            else:
                live.remember(fresh)
        result = apply_instance(client, render_target, options, live)
        if reads is not None:
            # written around the pass's reads: the view now holds each workload as the
            # apply answered (or as read just above when unchanged); no GET to repeat it
            refs = [ObjectRef.of(o) for o in workloads_of(render_target.objects)]
            reads.known((ref, live.get(ref)) for ref in refs)
        if not result.ok:
            raise KubeError(result.message or f"applying {inst.app} {version} failed")

    def render_analysis(batch: int, key: str) -> Mapping[str, Any]:
        """The batch's analysis Job from the ``to`` version's file (see rollout/analysis.py)."""
        assert plan.version is not None and settings.analysis_job
        template = plan.version.analysis_jobs.get(settings.analysis_job)
        if template is None:  # plan_instance refuses such a plan; a guard, not a path
            raise KubeError(f"analysis job {settings.analysis_job} is missing from {to_version}")
        run = AnalysisRun(live.cluster, from_version, to_version, batch, len(settings.batches), key)
        pinned = pinned_images(plan.version.images, {n: _build(b) for n, b in plan.images.items()})
        job, problems = render_analysis_job(
            template,
            inst,
            plan.version,
            run,
            timeout_seconds=settings.health_timeout_seconds,
            images=pinned,
        )
        if job is None:
            raise KubeError(f"analysis job {settings.analysis_job}: {problems[0].message}")
        return job

    analysis = (
        RolloutAnalysis(client, inst.name, inst.namespace, render_analysis)
        if settings.analysis_job
        else None
    )
    ref = ObjectRef(*INSTANCE_KIND, inst.namespace, inst.name)

    def failed(e: KubeError, last: RolloutRecord | None, look: float | None = None) -> Rolled:
        entry = ChangeSetEntry.for_ref(inst.name, ref, Action.FAILED, str(e))
        return Rolled(
            last, InstanceResult(inst.name, ChangeSet.of([entry]), e.reason, str(e)), look
        )

    observed = target  # the pods of ``to`` are counted against its render
    if record is not None and _abandoning(record, to_key):
        try:
            observed = replace(target, objects=render_release(record.to_key))
        except KubeError as e:
            return failed(e, record)
    driver = KubeRolloutDriver(
        client=reads or client,
        instance=inst.name,
        namespace=inst.namespace,
        objects=place_objects(client, observed),
        from_version=from_key,
        to_version=to_key,
        label=rollout_label(from_key, to_key),
        apply_render=apply_render,
        instance_digest=rollout_digest(plan, settings),
        analysis=analysis,
    )
    measuring = (
        MeasuringDriver(
            driver,
            settings,
            settings.prometheus,
            prometheus_url,
            placeholder_values(inst, plan.version, from_version, to_version),
        )
        if settings.prometheus is not None
        else None
    )
    try:
        step = _steps(record, settings, driver, deployed, to_key, measuring)
    except KubeError as e:
        return failed(e, record)
    if step is None:
        return Rolled(record, InstanceResult(inst.name, ChangeSet.of([])), plain=True)
    if step.record.state is RollingState.SUCCEEDED and deployed != to_key:
        try:
            apply_render(to_key, settled=True)  # now the inventory says ``to``
        except KubeError as e:
            return failed(e, step.record, step.next_look)
    done = ", ".join(driver.executed) or "observed"
    # an action repeated while the record stays put (a cleanup waiting for the old pods,
    # a copy still coming up) is idempotent and says nothing new: not a change to log
    moved = record is None or replace(step.record, replicas=record.replicas) != record
    action = Action.CONFIGURED if driver.executed and moved else Action.UNCHANGED
    entry = ChangeSetEntry.for_ref(inst.name, ref, action, f"rollout: {done}")
    return Rolled(step.record, InstanceResult(inst.name, ChangeSet.of([entry])), step.next_look)


def _abandoning(record: RolloutRecord, desired: str) -> bool:
    """Whether the unfinished rollout of ``record`` is being abandoned for ``desired``.

    Its pods are then counted against its own ``to``, not the new desired version:
    the new rollout starts from the version most replicas run, and the record says
    how many ran ``to`` when it was abandoned (SPEC section 4). Counted against the
    new version, 3 of 5 replicas on ``to`` read as 0 and every replica went back to
    ``from``.
    """
    return record.to_key != desired and not record.state.terminal


@dataclass(frozen=True)
class RolloutJob:
    """One instance's rollout to drive this pass (the arguments of ``drive``)."""

    plan: InstancePlan
    settings: RolloutSettings
    deployed: str
    record: RolloutRecord | None


def drive_concurrently(
    client: KubeClient,
    live: LiveState,
    catalog: Catalog,
    jobs: Sequence[RolloutJob],
    options: ApplyOptions,
    *,
    source_commit: str,
    reads: PassReads | None = None,
    clock: Callable[[], float] = time.monotonic,
    prometheus_url: str = "",
) -> list[tuple[Rolled, float]]:
    """``drive`` for every job, instances in different namespaces at once; in job order,
    each with the ``clock`` of its observation (what its next look counts from).

    Driven one after another, 200 rolling instances made a pass of some 340 requests
    each waiting for the last, longer than a rollout's look interval
    (``bench/rollout.py``). Instances are independent, as for plain applies
    (``apply_concurrently``): each writes only its own objects and inventory. Those of
    one namespace take turns (they share the pass's list of that namespace, which each
    one's writes update), and an instance whose render carries CRDs or Namespaces is
    driven first, alone, as the plain apply does, so what it creates exists for the rest.
    """

    def one(job: RolloutJob) -> tuple[Rolled, float]:
        rolled = drive(
            client,
            live,
            catalog,
            job.plan,
            job.settings,
            options,
            deployed=job.deployed,
            record=job.record,
            source_commit=source_commit,
            reads=reads,
            prometheus_url=prometheus_url,
        )
        return rolled, clock()

    first = [i for i, job in enumerate(jobs) if creates_first_stage_kinds(job.plan)]
    done = {i: one(jobs[i]) for i in first}
    rest = [i for i in range(len(jobs)) if i not in done]
    driven = run_lanes(
        [jobs[i] for i in rest],
        lambda job: job.plan.instance.namespace,
        one,
        client.max_requests_in_flight,
    )
    done.update(zip(rest, driven, strict=True))
    return [done[i] for i in range(len(jobs))]


def _build(pinned: str) -> ImageBuild:
    """The ``ImageBuild`` of a recorded ``tag@digest``."""
    tag, _, digest = pinned.partition("@")
    return ImageBuild(tag, digest)


# The reason of the Kubernetes Event each noteworthy rollout step sends.
EVENT_REASONS: Mapping[RollingState, str] = {
    RollingState.INITIALIZING: "RolloutStarted",
    RollingState.ROLLING: "RolloutBatch",
    RollingState.WAITING: "RolloutWaitingForPromotion",
    RollingState.FINALISING: "RolloutFinalising",
    RollingState.SUCCEEDED: "RolloutSucceeded",
    RollingState.FAILED: "RolloutFailed",
    RollingState.ROLLED_BACK: "RolledBack",
    RollingState.ABANDONED: "RolloutAbandoned",
}


def _steps(
    record: RolloutRecord | None,
    settings: RolloutSettings,
    driver: KubeRolloutDriver,
    running: str,
    desired: str,
    measuring: MeasuringDriver | None = None,
) -> Step | None:
    """Every transition the cluster already allows, in one pass, up to the next commit.

    The machine makes one transition per call and most of them need nothing new from
    the cluster (a batch chosen, pods that are already ready, a copy already retired).
    Taking them in the same pass keeps a rollout moving even when the daemon restarts
    often, since a restart resumes from the last *committed* record; the loop stops
    when a step waits (the record did not change), ends, or is worth a status commit,
    so each step a person cares about still gets its own commit. Actions are absolute
    and idempotent, so repeating one in the same pass changes nothing.
    """
    last: Step | None = None
    current = record
    for _ in range(MAX_STEPS_PER_PASS):
        if driver.analysis is not None:
            driver.analysis.follow(*_analysis_point(current))
        if measuring is not None:
            measuring.record = current  # measures when this record's batch is due
        step = drive_once(
            current,
            settings,
            measuring or driver,
            running=running,
            desired=desired,
            now=datetime.now(UTC),
        )
        if step is None:
            return last
        last = step
        moved = step.record != current
        if not moved or step.record.state.terminal or noteworthy(record, step.record):
            return step
        current = step.record
    return last


def _analysis_point(record: RolloutRecord | None) -> tuple[str, int]:
    """Which rollout's Jobs, and which batch's verdict, the next observation reports.

    The driver lives for one pass and the machine's observation carries no batch, so
    the record being stepped says it; a finished rollout has no current batch.
    """
    if record is None or record.state.terminal:
        return "", 0
    return rollout_key(record.from_key, record.to_key, record.started_at), record.batch


_PHASES: Mapping[RollingState, tuple[Phase, str]] = {
    RollingState.INITIALIZING: (Phase.PROGRESSING, "RolloutInProgress"),
    RollingState.ROLLING: (Phase.PROGRESSING, "RolloutInProgress"),
    RollingState.FINALISING: (Phase.PROGRESSING, "RolloutInProgress"),
    RollingState.WAITING: (Phase.PROGRESSING, "WaitingForPromotion"),
    RollingState.ABANDONED: (Phase.PROGRESSING, "RolloutAbandoned"),
    RollingState.SUCCEEDED: (Phase.READY, "Succeeded"),
    RollingState.FAILED: (Phase.STALLED, "RolloutFailed"),
    RollingState.ROLLED_BACK: (Phase.STALLED, "RolledBack"),
}


def rollout_status(
    cluster: str, plan: InstancePlan, rolled: Rolled, source_commit: str, app: str
) -> InstanceStatus:
    """The record of an instance whose version moves in batches (SPEC sections 3 and 4)."""
    res = plan.resolution
    record = rolled.record
    result = rolled.result
    if record is None or not result.ok:
        message = result.message or "the rollout could not take its next step"
        status = InstanceStatus(
            cluster=cluster,
            instance=plan.name,
            app=app,
            phase=Phase.FAILED,
            version=record.from_version if record is not None else None,
            desired_version=res.version,
            source=res.source,
            source_commit=source_commit,
            objects=len(plan.objects),
            reason="ApplyFailed",
            message=message,
            rollout=record,
            images=dict(record.from_images) if record is not None else {},
        )
        return status.with_default_conditions()
    phase, reason = _PHASES[record.state]
    if record.state is RollingState.FAILED and record.reason == INCONCLUSIVE_REASON:
        reason = INCONCLUSIVE_REASON  # held: the metrics could not tell (SPEC section 4c)
    if record.paused and phase is Phase.PROGRESSING:
        reason = "RolloutPaused"
    done = record.state is RollingState.SUCCEEDED
    status = InstanceStatus(
        cluster=cluster,
        instance=plan.name,
        app=app,
        phase=phase,
        version=record.to_version if done else record.from_version,
        desired_version=res.version,
        source=res.source,
        source_commit=source_commit,
        objects=len(plan.objects),
        reason=reason,
        message=_message(record, app),
        rollout=record,
        images=dict(record.to_images if done else record.from_images),
    )
    return status.with_default_conditions()


def _message(record: RolloutRecord, app: str) -> str:
    """What the record says, in words that change only when a status commit is due.

    The status message is part of what decides a commit, so while batches move it
    names the last ready batch, never the batch state or replica counts of the
    moment (those are in ``rollout``, and in the commit subjects of the steps).
    """
    if record.state.terminal or record.state is RollingState.WAITING:
        return describe(record, app)
    done = record.batches_done
    head = f"rollout {app + ' ' if app else ''}{record.label}"
    if done <= 0:
        what = f"started, {record.batches} batches"
    else:
        what = f"batch {done}/{record.batches} ready"
    return f"{head}: {what}" + (", paused" if record.paused else "")


def after_rollout(
    status: InstanceStatus, previous: InstanceStatus | None, quiet: bool, *, over: bool = False
) -> InstanceStatus:
    """A record that was not rolled this pass keeps the rollout it last recorded.

    A succeeded rollout stays on a Ready record until something else happens: the
    pass after ``rolloutSucceed`` applies the plain render as usual, and without it
    the record would differ from the last one (no ``rollout``, another message) and
    make a commit that says nothing new. ``quiet``: the pass changed no object.

    A rollout that is unfinished or ended without success stays on the record while
    the instance cannot be driven (a broken instance file, ``suspend``, a failed pre
    migration): it is what tells the next pass that a copy or a partition may still
    need cleaning up, also after a restart. ``over``: the rollout was driven to its
    end and nothing is left, so the record lets it go.
    """
    last = previous.rollout if previous is not None else None
    if last is not None and last.state is not RollingState.SUCCEEDED:
        if over or status.rollout is not None:
            return status
        return replace(status, rollout=last)
    if (
        previous is None
        or last is None
        or status.phase is not Phase.READY
        or status.version != last.to_version
        or dict(status.images) != dict(last.to_images)
    ):
        return status
    if not quiet:
        return replace(status, rollout=last)
    kept = replace(status, rollout=last, message=previous.message, conditions=())
    return kept.with_default_conditions()
