"""The wave step of a pass (SPEC section 4b): hold version changes the fleet has not proven.

``reconcile_checkout`` calls ``hold_for_waves`` right after planning. An instance whose
plan moves it to a higher version because the catalog moved (``waves.change_waits``)
asks the gate (``waves.gate``) with what ``WaveView`` read from Git this pass; Waiting
and Halted replace its plan by one that keeps what runs (``WaitingForWave``:
Progressing; ``WaveHalted``: Stalled) so nothing of the new version, not even a
migration, starts. A wave with ``analysis`` also measures the earlier waves' clusters
once they proved the version by status (``daemon.waveanalysing``); its measurements
so far ride in the waiting instance's record (``WaveStep.stamped``). A broken
``waves.yaml`` holds every such change (``CatalogInvalid`` naming the line): dropping
the file's guard would release to the whole fleet at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from reconciler.daemon.plan import CATALOG_INVALID, InstancePlan
from reconciler.daemon.waveanalysing import WaveAnalyst
from reconciler.model.analysis import Measurement
from reconciler.model.catalog import Catalog
from reconciler.model.rollout import split_release
from reconciler.model.status import InstanceStatus
from reconciler.model.waveanalysis import WAVE_KEY, WaveAnalysisRecord
from reconciler.model.waves import SeenRecord
from reconciler.waves import (
    WAITING_FOR_WAVE,
    WAVE_HALTED,
    Decision,
    Halted,
    Open,
    gate,
)
from reconciler.waves import change_waits as waits
from reconciler.waves.analysis import analysis_halt

RELEASE_KEY = "releaseCommit"  # in the record: the catalog commit where its release began
# (app, version, channel or None, catalog commit) -> does the commit contain the catalog
# commit where that version became desired? (``source.ReleaseHistory.contains``)
Contains = Callable[[str, str, "str | None", str], bool]


@dataclass(frozen=True)
class WaveView:
    """What the gate needs this pass, read once: the other clusters' records and the time."""

    records: Mapping[tuple[str, str], SeenRecord]
    contains: Contains
    now: datetime
    # (app, version, channel or None) -> the catalog commit where it became desired
    start: Callable[[str, str, str | None], str | None] = lambda app, version, channel: None
    prometheus_url: str = ""  # run --prometheus-url: where a wave's analysis asks


@dataclass(frozen=True)
class WaveHold:
    """One instance's gate answer this pass (the metrics and the log say them)."""

    instance: str
    app: str
    version: str
    decision: Decision
    measured: tuple[Measurement, ...] = ()  # a wave's analysis, taken this pass


@dataclass
class WaveStep:
    """The plans after the gate, and each gated instance's answer."""

    plans: list[InstancePlan]
    holds: list[WaveHold] = field(default_factory=list)
    # instance -> (the version it runs, the catalog commit where that release began)
    releases: dict[str, tuple[str, str]] = field(default_factory=dict)
    # instance -> the measurements its wave's analysis took so far (kept in its record)
    analyses: dict[str, WaveAnalysisRecord] = field(default_factory=dict)
    next_look: float | None = None  # seconds until a wave's next measurement is due

    def stamped(self, statuses: Sequence[InstanceStatus]) -> tuple[InstanceStatus, ...]:
        """Each record that runs its release, naming where that release began.

        A record's ``sourceCommit`` only moves when its state changes; an instance
        that kept V through a channel move back and forth (its daemon was away) would
        otherwise keep a ``sourceCommit`` from the older release forever, and later
        waves would rightly never trust it. A new ``releaseCommit`` is a change: one
        commit re-states the record at the catalog commit of the current release.
        """
        out = []
        for status in statuses:
            release = self.releases.get(status.instance)
            if release is not None and status.version == release[0]:
                status = replace(status, extra={**status.extra, RELEASE_KEY: release[1]})
            analysis = self.analyses.get(status.instance)
            if analysis is not None and status.reason in (WAITING_FOR_WAVE, WAVE_HALTED):
                status = replace(status, extra={**status.extra, WAVE_KEY: analysis.to_dict()})
            out.append(status)
        return tuple(out)

    @property
    def held(self) -> set[str]:
        return {h.instance for h in self.holds if not isinstance(h.decision, Open)}


def hold_for_waves(
    catalog: Catalog,
    cluster: str,
    plans: Sequence[InstancePlan],
    deployed: Mapping[str, str],
    previous: Mapping[str, InstanceStatus],
    view: WaveView | None,
    owns: Callable[[str], bool] | None = None,
) -> WaveStep:
    """``plans`` with every change the waves hold replaced by one that keeps what runs.

    ``owns`` (``--shards``): a wave's analysis measures only this replica's instances.
    """
    waves = catalog.waves
    if waves is None:
        return WaveStep(list(plans))
    step = WaveStep([])
    analyst = WaveAnalyst(view.prometheus_url, view.now) if view is not None else None
    apps: dict[str, dict[str, list[str]]] = {}  # app -> cluster -> its instances of the app
    for plan in plans:
        target = plan.resolution.version
        if (
            view is not None
            and plan.ok
            and target is not None
            and target == deployed.get(plan.name)
        ):
            start = view.start(plan.instance.app, target, plan.instance.channel)
            if start is not None:
                step.releases[plan.name] = (target, start)
        if not _held_kind(plan, deployed.get(plan.name), previous.get(plan.name)):
            step.plans.append(plan)
            continue
        assert target is not None
        app = plan.instance.app
        if not waves.valid or view is None:
            why = waves.error if not waves.valid else "the status branches could not be read"
            message = f"{app} {target} waits: {why}"
            step.plans.append(
                replace(plan, version=None, objects=(), reason=CATALOG_INVALID, message=message)
            )
            continue
        if app not in apps:
            apps[app] = _instances_of(catalog, app)
        index = waves.wave_of(cluster)
        fresh = _freshness(catalog, app, target, view.contains)
        decision = gate(waves, index, app, target, apps[app], view.records, fresh, view.now)
        if not isinstance(decision, Halted):  # an earlier wave's analysis may have halted
            halt = analysis_halt(waves, index, app, target, apps[app], view.records, fresh)
            decision = halt if halt is not None else decision
        assert analyst is not None
        release = view.start(app, target, plan.instance.channel) or ""
        analysed = analyst.analyse(
            waves,
            index,
            plan.instance,
            target,
            release,
            decision,
            previous.get(plan.name),
            measures=owns is None or owns(plan.name),
        )
        if analysed.record is not None:
            step.analyses[plan.name] = analysed.record
        if analysed.next_look is not None:
            step.next_look = min(analysed.next_look, step.next_look or analysed.next_look)
        step.holds.append(WaveHold(plan.name, app, target, analysed.decision, analysed.measured))
        step.plans.append(_gated(plan, analysed.decision))
    return step


def _held_kind(plan: InstancePlan, deployed: str | None, record: InstanceStatus | None) -> bool:
    """Is this plan a change the waves may hold (and not one already started here)?"""
    if not plan.ok or plan.version is None or plan.instance.suspend:
        return False
    target = plan.resolution.version
    rollout = record.rollout if record is not None else None
    if rollout is not None and split_release(rollout.to_version)[0] == target:
        return False  # V started here already: its rollout ends as section 4 says
    rollback_to = rollout.from_version if rollout is not None else None
    return waits(plan.resolution.source, deployed, target, rollback_to)


def _unjudged(plan: InstancePlan, invalid: str | None) -> InstancePlan:
    """A change held because the gate cannot judge it: ``waves.yaml`` is broken (the
    commit must fix it) or the status branches could not be read (the next pass may)."""
    target = f"{plan.instance.app} {plan.resolution.version}"
    if invalid is not None:
        reason, message = CATALOG_INVALID, f"{target} waits: {invalid}"
    else:
        reason = WAITING_FOR_WAVE
        message = f"{target} waits: the status branches of the fleet could not be read"
    return replace(plan, version=None, objects=(), reason=reason, message=message)


def _gated(plan: InstancePlan, decision: Decision) -> InstancePlan:
    if isinstance(decision, Open):
        return plan
    reason = WAVE_HALTED if isinstance(decision, Halted) else WAITING_FOR_WAVE
    return replace(plan, version=None, objects=(), reason=reason, message=decision.message)


def _instances_of(catalog: Catalog, app: str) -> dict[str, list[str]]:
    return {
        name: sorted(i.name for i in entry.instances.values() if i.app == app)
        for name, entry in catalog.clusters.items()
    }


def _freshness(
    catalog: Catalog, app: str, version: str, contains: Contains
) -> Callable[[str, str, InstanceStatus], bool]:
    """Each record judged against where ``version`` began for *that* instance's selector."""

    def fresh(cluster: str, instance: str, status: InstanceStatus) -> bool:
        entry = catalog.clusters.get(cluster)
        inst = entry.instances.get(instance) if entry is not None else None
        channel = inst.channel if inst is not None else None
        return contains(app, version, channel, status.source_commit)

    return fresh
