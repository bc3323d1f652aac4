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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property

from reconciler.daemon.plan import CATALOG_INVALID, InstancePlan
from reconciler.daemon.waveanalysing import WaveAnalyst
from reconciler.model.analysis import Measurement
from reconciler.model.catalog import Catalog
from reconciler.model.rollout import split_release
from reconciler.model.status import InstanceStatus
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.model.waveanalysis import WAVE_KEY, WaveAnalysisRecord
from reconciler.model.waves import SeenRecord
from reconciler.waves import (
    WAITING_FOR_WAVE,
    WAVE_HALTED,
    BoardWave,
    Decision,
    Halted,
    Open,
    Waiting,
    gate,
    wave_board,
)
from reconciler.waves import change_waits as waits
from reconciler.waves.analysis import analysis_halt

RELEASE_KEY = "releaseCommit"  # in the record: the catalog commit where its release began
# (app, version, channel or None, catalog commit) -> does the commit contain the catalog
# commit where that version became desired? (``source.ReleaseHistory.contains``)
Contains = Callable[[str, str, "str | None", str], bool]


@dataclass(frozen=True)
class WaveView:
    """What the gate needs this pass: the other clusters' records and the time.

    The records are read on the gate's first question (``read``, at most once a pass):
    a pass that starts no version the waves hold (every settled pass) reads no other
    cluster's branch, so a daemon in a wave-ordered fleet costs a settled pass no more
    than one without waves. ``read`` gives None when they cannot be read: the gate then
    holds every change it would judge, since deciding without them could release to
    the fleet.
    """

    read: Callable[[], Mapping[tuple[str, str], SeenRecord] | None]
    contains: Contains
    now: datetime
    # (app, version, channel or None) -> the catalog commit where it became desired
    start: Callable[[str, str, str | None], str | None] = lambda app, version, channel: None
    prometheus_url: str = ""  # run --prometheus-url: where a wave's analysis asks

    @cached_property
    def records(self) -> Mapping[tuple[str, str], SeenRecord] | None:
        return self.read()


@dataclass(frozen=True)
class WaveHold:
    """One instance's gate answer this pass (the metrics and the log say them)."""

    instance: str
    app: str
    version: str
    decision: Decision
    # this pass starts the wait or the halt (the record before said otherwise): the
    # halts counter and the Events say it once, not at every later commit while it lasts
    started: bool = False
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
    decided: dict[tuple[str, str], Decision] = {}  # (app, version) -> the gate's answer
    for plan in plans:
        target = plan.resolution.version
        if view is not None and plan.ok and target is not None:
            # stamped only on a record that runs ``target``: the commit that records
            # the upgrade names its release too (not one more commit the pass after)
            start = view.start(plan.instance.app, target, plan.instance.channel)
            if start is not None:
                step.releases[plan.name] = (target, start)
        if not _held_kind(plan, deployed.get(plan.name), previous.get(plan.name)):
            step.plans.append(plan)
            continue
        assert target is not None
        app = plan.instance.app
        records = view.records if view is not None and waves.valid else None
        if view is None or records is None:
            step.plans.append(_unjudged(plan, None if waves.valid else waves.error))
            continue
        if app not in apps:
            apps[app] = _instances_of(catalog, app)
        # the gate's answer depends on the app and version only, not the instance: one
        # look at the earlier waves' records (and their analyses) per release
        index = waves.wave_of(cluster)
        decision = decided.get((app, target))
        if decision is None:
            fresh = _freshness(catalog, app, target, view.contains)
            decision = gate(waves, index, app, target, apps[app], records, fresh, view.now)
            if not isinstance(decision, Halted):  # an earlier wave's analysis may have halted
                halt = analysis_halt(waves, index, app, target, apps[app], records, fresh)
                decision = halt if halt is not None else decision
            decided[(app, target)] = decision
        assert analyst is not None
        record = previous.get(plan.name)
        release = view.start(app, target, plan.instance.channel) or ""
        analysed = analyst.analyse(
            waves,
            index,
            plan.instance,
            target,
            release,
            decision,
            record,
            measures=owns is None or owns(plan.name),
        )
        if analysed.record is not None:
            step.analyses[plan.name] = analysed.record
        if analysed.next_look is not None:
            step.next_look = min(analysed.next_look, step.next_look or analysed.next_look)
        started = _starts(analysed.decision, target, record)
        step.holds.append(
            WaveHold(plan.name, app, target, analysed.decision, started, analysed.measured)
        )
        step.plans.append(_gated(plan, analysed.decision, record))
    return step


def _starts(decision: Decision, target: str, record: InstanceStatus | None) -> bool:
    """Is this the pass where the instance begins to wait (or halt) for ``target``?"""
    if isinstance(decision, Open):
        return False
    reason = WAVE_HALTED if isinstance(decision, Halted) else WAITING_FOR_WAVE
    return record is None or (record.reason, record.desired_version) != (reason, target)


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


def _gated(plan: InstancePlan, decision: Decision, record: InstanceStatus | None) -> InstancePlan:
    """The plan that keeps what runs; a soak still under way keeps its recorded message
    (its elapsed time grows every pass: a commit per pass would bury the history)."""
    if isinstance(decision, Open):
        return plan
    reason = WAVE_HALTED if isinstance(decision, Halted) else WAITING_FOR_WAVE
    message = decision.message
    if (
        isinstance(decision, Waiting)
        and record is not None
        and record.reason == WAITING_FOR_WAVE
        and record.desired_version == plan.resolution.version
        and decision.same_wait(record.message)
    ):
        message = record.message
    return replace(plan, version=None, objects=(), reason=reason, message=message)


def app_board(
    catalog: Catalog,
    app: str,
    version: str,
    records: Mapping[tuple[str, str], SeenRecord],
    contains: Contains,
    now: datetime,
) -> list[BoardWave]:
    """Every wave's gate and clusters for ``app`` ``version``: the same gate the pass asks,
    for ``wave status``, the status page and the bench (``catalog.waves`` must be valid)."""
    assert catalog.waves is not None and catalog.waves.valid
    return wave_board(
        catalog.waves,
        app,
        version,
        _instances_of(catalog, app),
        records,
        _freshness(catalog, app, version, contains),
        now,
    )


def release_versions(
    catalog: Catalog, records: Mapping[tuple[str, str], SeenRecord]
) -> dict[str, str]:
    """Each app's release in flight, as the fleet's records say: the version most of its
    instances want (``desiredVersion``), the higher one on a tie. An app no record
    names yet has none."""
    wanted: dict[str, Counter[str]] = {}
    apps = {i.app for entry in catalog.clusters.values() for i in entry.instances.values()}
    for seen in records.values():
        status = seen.status
        version = status.desired_version or status.version
        if status.app in apps and version:
            wanted.setdefault(status.app, Counter())[version] += 1
    return {app: max(c, key=lambda v: (c[v], _order(v))) for app, c in wanted.items()}


def _order(version: str) -> tuple[int, object]:
    try:
        return (1, parse_version(version))
    except VersionSyntaxError:
        return (0, version)


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
