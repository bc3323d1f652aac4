"""One reconcile pass over one cluster: the daemon's unit of work, as a readable sequence.

``reconcile_checkout`` takes a catalog loaded from a known commit and:
plan (with the versions the cluster's inventories say are deployed) ->
apply every instance (one failure never stops the others; migration hooks one
after another, then rollouts (``rolling.drive_concurrently``), then plain applies,
each concurrently within the client's request budget,
``applying.apply_concurrently``) -> prune instances
deleted from Git -> look at health (a short grace shared by the pass; an instance
not healthy yet is Progressing and looked at again, ``daemon.healthwatch``) ->
build one status record per instance -> commit the records that changed to the
status branch. Migration
hooks (``reconciler.daemon.migrating``) run around those steps. Every step's
result is a value; logs, metrics, the status files and the CLI output are
rendered from the returned ``PassReport``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

from reconciler.daemon.applying import apply_concurrently, kept_as_is, remove_deleted
from reconciler.daemon.healthwatch import DEFAULT_HEALTH_GRACE, HEALTH_LOOK, HealthWatch
from reconciler.daemon.keeplimits import keep_limits
from reconciler.daemon.memo import PassMemo, Reused, reused_status
from reconciler.daemon.migrating import DEFAULT_LEDGER_NAMESPACE, MigrationEvent, MigrationHooks
from reconciler.daemon.plan import InstancePlan, plan_cluster, require_cluster
from reconciler.daemon.rendered import refs_of
from reconciler.daemon.rolling import (
    Rolled,
    RolloutJob,
    after_rollout,
    drive_concurrently,
    rollout_status,
    rolls,
)
from reconciler.daemon.statuses import InstanceOutcome, build_removed_status, build_status
from reconciler.daemon.waving import WaveHold, WaveView, hold_for_waves
from reconciler.kube import (
    ApplyOptions,
    Health,
    HealthReport,
    InstanceResult,
    KubeClient,
    Limits,
    LiveState,
    ObjectHealth,
    evaluate,
    inventory_written,
    wait_healthy,
)
from reconciler.kube.kstatus import AGES
from reconciler.kube.passreads import PassReads
from reconciler.kube.watchcache import Wakeup, WatchCache
from reconciler.migrations import Registry
from reconciler.model.catalog import Catalog
from reconciler.model.changeset import CHANGING, Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.rollout import split_release
from reconciler.model.shards import ShardScope
from reconciler.model.status import InstanceStatus, Phase

log = logging.getLogger("reconciler.daemon")


@dataclass(frozen=True)
class PassSettings:
    cluster: str
    health_timeout: float = 120.0  # unhealthy this long after a change: HealthCheckFailed
    health_grace: float = DEFAULT_HEALTH_GRACE  # the pass polls health this long, in total
    force_conflicts: bool = False
    allow_empty_prune: bool = False
    allow_mass_prune: bool = False
    writer: str = ""  # recorded in every inventory; see ``ApplyOptions.writer``
    ledger_namespace: str = DEFAULT_LEDGER_NAMESPACE  # the cluster's global migration ledger
    prometheus_url: str = ""  # where analyses without an address of their own ask (4c)


@dataclass(frozen=True)
class PassReport:
    """What a pass did: the records it produced and the objects it changed."""

    cluster: str
    commit: str
    statuses: tuple[InstanceStatus, ...] = ()
    changes: ChangeSet = field(default_factory=ChangeSet)
    removed: tuple[InstanceResult, ...] = ()
    plans: tuple[InstancePlan, ...] = ()
    namespaces: Mapping[str, str] = field(default_factory=dict)  # instance -> its namespace
    migrations: tuple[MigrationEvent, ...] = ()  # each run, with its status commit(s)
    started: float = 0.0
    duration: float = 0.0
    next_look: float | None = None  # seconds until a rollout or a health wait wants a pass
    reused: frozenset[str] = frozenset()  # instances whose last verdict stood (``PassMemo``)
    waves: tuple[WaveHold, ...] = ()  # the wave gate's answer for each change it looked at
    # every instance the catalog or the cluster (an inventory) has, all shards: a
    # status record of any other is stale or forged (``StatusLedger.record`` drops it)
    known: frozenset[str] | None = None

    @property
    def all_ready(self) -> bool:
        return all(s.phase in (Phase.READY, Phase.REMOVED) for s in self.statuses) and all(
            r.ok for r in self.removed
        )

    @cached_property
    def action_counts(self) -> Mapping[Action, int]:
        """How many entries of ``changes`` took each action (every action, 0 or more).

        One scan of the change set (every object of every instance), made once: the
        metrics, the summary line and the log lines each scanned it, the metrics once
        per action.
        """
        counts = Counter(map(attrgetter("action"), self.changes.entries))
        return {action: counts[action] for action in Action}

    @cached_property
    def changed_entries(self) -> tuple[ChangeSetEntry, ...]:
        """The entries of objects the pass wrote (``ChangeSetEntry.changed``), in order;
        none, without a scan, when the counts say so (the no-op pass)."""
        if not any(self.action_counts[action] for action in CHANGING):
            return ()
        return tuple(e for e in self.changes.entries if e.changed)

    def phase_counts(self) -> dict[str, int]:
        counts = {str(p): 0 for p in Phase}
        for status in self.statuses:
            counts[str(status.phase)] += 1
        return counts


def never_hold(plan: InstancePlan) -> bool:
    return False


def reconcile_checkout(
    catalog: Catalog,
    commit: str,
    client: KubeClient,
    settings: PassSettings,
    *,
    hold: Callable[[InstancePlan], bool] = never_hold,
    hold_removal: Callable[[str], bool] | None = None,
    previous: Mapping[str, InstanceStatus] | None = None,
    registry: Registry | None = None,
    watch: HealthWatch | None = None,
    scope: ShardScope | None = None,
    memo: PassMemo | None = None,
    cache: WatchCache | None = None,
    waves: WaveView | None = None,
) -> PassReport:
    """One pass over ``catalog`` (loaded from ``commit``).

    ``hold(plan)`` True leaves an instance alone this pass (it is backing off
    after failures and its inputs did not change); it keeps its ``previous``
    record, so holding writes nothing to the cluster or to Git. ``hold_removal(name)``
    does the same for an instance deleted from Git whose uninstall failed before. ``watch`` is the
    daemon's memory of health waits across passes (a fresh one when omitted).
    ``scope`` (``--shards``): only the instances of the shards this replica holds
    are applied, pruned and recorded. Every instance is still planned, since one
    object rendered by two instances is refused whichever shards they are in, and
    the replica holding shard 0 runs the cluster's global migrations for all of
    them (``reconciler.model.shards`` says why each owner is what it is).
    ``memo`` (the daemon's): an instance that nothing touched since its last pass
    ended settled keeps that pass's verdict without being rendered or compared
    again (``reconciler.daemon.memo``); anything else takes the full path.
    ``cache`` (the long-running daemon's): live objects kept current by watches,
    read instead of listed (``kube.watchcache``). ``waves``: the other clusters'
    records this pass read, for the wave gate (``daemon.waving``) when the catalog
    has a ``waves.yaml``.
    """
    watch = watch if watch is not None else HealthWatch()
    started = time.time()
    require_cluster(catalog, settings.cluster)
    entry = catalog.clusters[settings.cluster]
    live = LiveState(
        client,
        settings.cluster,
        entry.namespaces,
        inventory_cache=memo.inventories if memo is not None else None,
        cache=cache,
        # plain allowedNamespaces: list and watch only there (a tenant's RBAC suffices)
        scope=Limits.of(entry.cluster).listed_namespaces(),
        layout=entry.cluster.inventory,
    )
    catalog = keep_limits(
        catalog, settings.cluster, client, live, None if scope is None else scope.owns
    )
    entry = catalog.clusters[settings.cluster]
    deployed = live.deployed_versions(entry.instances)
    releases = live.deployed_releases(entry.instances)  # with the builds that run
    previous = previous or {}
    reused: dict[str, Reused] = {}
    if memo is not None:
        memo.begin(entry.cluster, settings)
        for name, instance in entry.instances.items():
            hit = memo.lookup(catalog, instance, deployed.get(name), previous.get(name), live)
            if hit is not None:
                reused[name] = hit
    every_plan = plan_cluster(
        catalog,
        settings.cluster,
        deployed,
        reuse=reused,
    )
    # a reused plan that the one-owner check refused is no longer the reused one
    reused = {
        p.name: reused[p.name]
        for p in every_plan
        if p.name in reused and p is reused[p.name].plan and (scope is None or scope.owns(p.name))
    }
    gated_by_waves = hold_for_waves(
        catalog,
        settings.cluster,
        every_plan,
        deployed,
        previous,
        waves,
        None if scope is None else scope.owns,
    )
    every_plan = gated_by_waves.plans
    plans = every_plan if scope is None else [p for p in every_plan if scope.owns(p.name)]
    options = ApplyOptions(
        limits=Limits.of(entry.cluster),
        force_conflicts=settings.force_conflicts,
        allow_empty_prune=settings.allow_empty_prune,
        allow_mass_prune=settings.allow_mass_prune,
        writer=settings.writer,
    )
    held = {plan.name for plan in plans if hold(plan)}
    hooks = MigrationHooks.begin(
        client,
        live,
        catalog,
        _global_plans(plans, every_plan, scope),
        deployed,
        cluster=settings.cluster,
        held=held,
        registry=registry,
        limits=options.limits,
        ledger_namespace=settings.ledger_namespace,
        job_grace=settings.health_grace,  # a migration Job never holds the pass longer
        runs_global=scope is None or scope.owns_global,
    )
    rolled: dict[str, Rolled] = {}
    # when each rollout asked to be looked at again, on the clock of its observation: a
    # long pass (hundreds of rollouts) must not add its own length to every wait
    look_at: dict[str, float] = {}
    gated: set[str] = set()  # the next step of a path, waiting for the last one's health
    handed_back: set[str] = set()  # a rollout over and cleaned up: applied plainly again
    reads = PassReads(client)  # rollouts observe through one list per kind and namespace
    decided: list[InstanceResult | None] = []  # None: a plain apply, done concurrently below
    driving: dict[int, RolloutJob] = {}  # rollouts, by their place in ``decided``
    for plan in plans:
        if plan.name in reused:  # settled, and nothing changed: last pass's result stands
            decided.append(reused[plan.name].result)
            continue
        record = previous[plan.name].rollout if plan.name in previous else None
        batches = rolls(plan, releases.get(plan.name), record)
        if plan.name in held:
            decided.append(kept_as_is(live, plan, Action.SKIPPED, "backing off after failures"))
            continue
        if batches is None and watch.holds_next_step(plan, deployed.get(plan.name)):
            gated.add(plan.name)
            why = f"{deployed.get(plan.name)} is not healthy yet: the next step waits"
            decided.append(kept_as_is(live, plan, Action.SKIPPED, why))
            continue
        blocked = hooks.before_apply(plan)  # pre migrations; a failure applies nothing
        if blocked is not None:
            decided.append(blocked)
        elif batches is not None:
            driving[len(decided)] = RolloutJob(plan, batches, releases[plan.name], record)
            decided.append(None)
        else:
            decided.append(None)
    try:
        driven = drive_concurrently(
            client,
            live,
            catalog,
            list(driving.values()),
            options,
            source_commit=commit,
            reads=reads,
            clock=time.monotonic,
            prometheus_url=settings.prometheus_url,
        )
        for slot, (step, looked) in zip(driving, driven, strict=True):
            name = plans[slot].name
            if step.plain:
                handed_back.add(name)
            else:
                rolled[name] = step
                if step.next_look is not None:
                    look_at[name] = looked + step.next_look
                decided[slot] = step.result
        plain = [plan for plan, result in zip(plans, decided, strict=True) if result is None]
        applied = iter(apply_concurrently(client, live, plain, options, source_commit=commit))
        results = [result if result is not None else next(applied) for result in decided]
        removed = remove_deleted(
            client,
            live,
            entry,
            options,
            hooks,
            held=hold_removal,
            owns=None if scope is None else scope.owns,
            blocked=catalog.cluster_errors(settings.cluster),
        )
    except BaseException:
        # what was applied keeps its inventory (the perNamespace layout's), whatever
        # stopped the pass; the pass's own error is the one that goes on
        live.flush_inventories()
        raise
    failed = live.flush_inventories()  # the perNamespace layout's, one per namespace
    if failed:
        results = [inventory_written(r, failed) for r in results]
        removed = [inventory_written(r, failed) for r in removed]
    for plan, result in zip(plans, results, strict=True):
        if plan.name in reused:
            continue
        if plan.name not in rolled and any(e.changed for e in result.changes.entries):
            watch.changed(plan, plan.version.key if plan.version is not None else None)
    healths = check_health(
        client,
        live,
        plans,
        results,
        settings.health_grace,
        skip=set(rolled) | set(reused),
        gated=gated,
    )
    # before the reused instances' health is put in: each was healthy when it was kept,
    # which ended its wait then, and no wait has begun since (nothing was applied)
    waiting = watch_health(watch, plans, healths, deployed, gated, settings)
    healths = [
        reused[plan.name].health if plan.name in reused else health
        for plan, health in zip(plans, healths, strict=True)
    ]
    hooks.after_health(plans, results, healths)
    # what each instance owns now: names the app and namespace of an unreadable file
    recorded = live.inventories()
    outcomes = [
        None  # reused: its last record stands (``reused_status``), no outcome to build on
        if plan.name in reused
        else InstanceOutcome(
            plan,
            deployed.get(plan.name),
            recorded[plan.name].app if plan.name in recorded else "",
            result,
            health,
            settings.health_timeout,
            waiting=plan.name in waiting,
            gated=plan.name in gated,
            deployed_images=split_release(releases.get(plan.name, ""))[1],
            deployed_objects=len(recorded[plan.name].objects) if plan.name in recorded else 0,
        )
        for plan, result, health in zip(plans, results, healths, strict=True)
    ]
    built = tuple(
        reused_status(reused[plan.name])
        if o is None
        else previous[plan.name]
        if plan.name in held and plan.name in previous
        else rollout_status(settings.cluster, plan, rolled[plan.name], commit, plan.instance.app)
        if plan.name in rolled
        else after_rollout(
            build_status(settings.cluster, o, commit),
            previous.get(plan.name),
            quiet=o.result is None or not any(e.changed for e in o.result.changes.entries),
            over=plan.name in handed_back,
        )
        for plan, o in zip(plans, outcomes, strict=True)
    )
    statuses = built + tuple(build_removed_status(settings.cluster, r, commit) for r in removed)
    now = time.monotonic()
    looks = [max(0.0, at - now) for at in look_at.values()]
    looks += [HEALTH_LOOK] if waiting else []
    looks += [hooks.next_look] if hooks.next_look is not None else []
    looks += [gated_by_waves.next_look] if gated_by_waves.next_look is not None else []
    watch.forget_except(p.name for p in plans)
    statuses = gated_by_waves.stamped(hooks.recorded(statuses, held))
    if memo is not None:
        busy = {*rolled, *held, *gated, *handed_back, *gated_by_waves.held}
        _remember(memo, catalog, plans, outcomes, built, statuses, live, busy)
        memo.forget_except(p.name for p in plans)
        memo.mark_reused(reused, live)
    changes = ChangeSet.of(e for r in (*results, *removed) for e in r.changes.entries)
    for result in removed:
        if result.ok and not any(e.changed for e in result.changes.entries):
            continue  # an uninstall Job still runs: said once the removal ends
        log.info(
            "instance %s was removed from Git: %s",
            result.instance,
            result.message or result.changes.summary(),
            extra={"cluster": settings.cluster},
        )
    return PassReport(
        cluster=settings.cluster,
        commit=commit,
        statuses=statuses,
        changes=changes,
        removed=tuple(removed),
        plans=tuple(plans),
        namespaces={
            p.name: p.instance.namespace
            or (recorded[p.name].namespace if p.name in recorded else "")
            for p in plans
        },
        started=started,
        duration=time.time() - started,
        next_look=min(looks) if looks else None,
        migrations=tuple(hooks.events),
        reused=frozenset(reused),
        waves=tuple(h for h in gated_by_waves.holds if scope is None or scope.owns(h.instance)),
        known=frozenset(entry.instances) | frozenset(recorded),
    )


def _remember(
    memo: PassMemo,
    catalog: Catalog,
    plans: Sequence[InstancePlan],
    outcomes: Sequence[InstanceOutcome | None],
    built: Sequence[InstanceStatus],
    finals: Sequence[InstanceStatus],
    live: LiveState,
    busy: set[str],
) -> None:
    """Keep each plainly applied instance's verdict for the next pass (``PassMemo``).

    A reused instance (no outcome) keeps its verdict. Rolled, held, gated and
    handed-back instances are in the middle of something: they are forgotten
    (``PassMemo.remember`` also refuses anything not settled).
    """
    for plan, outcome, status, final in zip(plans, outcomes, built, finals, strict=False):
        if outcome is None:
            memo.still(plan.name, final)
        elif plan.name in busy or outcome.result is None:
            memo.forget(plan.name)
        else:
            memo.remember(
                catalog,
                plan,
                outcome.deployed,
                outcome.result,
                outcome.health,
                status,
                final,
                live,
            )


def _global_plans(
    plans: list[InstancePlan], every_plan: list[InstancePlan], scope: ShardScope | None
) -> list[InstancePlan]:
    """The plans whose changes global ``pre`` migrations serve in this replica.

    The owner of shard 0 runs them for every instance of the cluster that the commit
    moves (its own first: a run is recorded with the first instance it serves), so
    they run once and before any shard upgrades; other shards wait for them.
    """
    if scope is None or not scope.owns_global:
        return plans
    mine = {p.name for p in plans}
    return plans + [p for p in every_plan if p.name not in mine]


def _app(outcome: InstanceOutcome) -> str:
    return outcome.plan.instance.app or outcome.deployed_app


def check_health(
    client: KubeClient,
    live: LiveState,
    plans: Sequence[InstancePlan],
    results: Sequence[InstanceResult],
    grace: float,
    *,
    skip: set[str] | None = None,
    gated: set[str] | None = None,
) -> list[HealthReport | None]:
    """Health of every applied instance, polling (one shared deadline) at most ``grace``.

    An instance whose objects the pass's lists already show as current costs no
    request; the others are read until current, failed, or the grace is over, so a
    pass is delayed by ``grace`` at most however many instances are slow (a pending
    report is not a verdict: ``watch_health`` decides what it means). A ``gated``
    instance is looked at through the objects its inventory holds: the version
    that runs, whose health the next step of its upgrade path waits for.

    With the daemon's watch cache, an object of a kind it watches is read from the
    cache's store (what its watch saw last), not with a GET: a fresh install's health
    costs no request (``_read_health``). And when every object still pending is read
    from there, the wait between rounds lasts until the cache applies a change to one
    of them (``Wakeup``): a Deployment that becomes available is judged as its watch
    event arrives, not at the next tick of a timer, so commit-to-verdict latency is the
    controller's and the watch's, and an object that does not change costs no round.
    Any other object (a kind not watched or not synced, one the store lacks, no cache
    as in ``run --once``, a Pod: kstatus judges it by its age too) is polled at the
    backoff, as it always was; a watch that loses its place wakes the wait, and its
    objects are polled until it is back (``_poll_health``).
    """
    deadline = time.monotonic() + grace
    reports: list[HealthReport | None] = []
    polled: dict[int, list[ObjectRef]] = {}  # index in ``reports`` -> objects to read
    skip, gated = skip or set(), gated or set()
    for plan, result in zip(plans, results, strict=True):
        if plan.name in skip:  # a rollout verifies its own batches; a reused one was seen
            reports.append(None)
            continue
        waits = plan.name in gated
        skipped = not waits and all(e.action is Action.SKIPPED for e in result.changes.entries)
        if plan.instance.suspend or not plan.ok or not result.ok or skipped:
            reports.append(None)
            continue
        inventory = live.inventory(plan.name) if waits else None
        refs = sorted(inventory.objects) if inventory is not None else refs_of(plan.objects)
        seen = _from_live(live, refs)
        reports.append(seen)
        if not seen.healthy:
            # only what is not Current yet is read again: a ConfigMap the apply answer
            # showed Current stays so, and reading it would be a request per object
            polled[len(reports) - 1] = [o.ref for o in seen.pending]
    if not polled:
        return reports
    wakeup = live.wakeup()
    try:
        _poll_health(client, live, reports, polled, deadline, wakeup)
    finally:
        if wakeup is not None:
            wakeup.close()
    return reports


def _poll_health(
    client: KubeClient,
    live: LiveState,
    reports: list[HealthReport | None],
    polled: dict[int, list[ObjectRef]],
    deadline: float,
    wakeup: Wakeup | None,
) -> None:
    """Read what ``polled`` names until it is healthy or failed or ``deadline`` passes,
    updating ``reports``; between rounds, wait for ``wakeup`` or the backoff.

    Every instance still pending is read once per round, so a slow one never uses up
    the grace of those behind it. The objects are followed before they are read:
    a change after the read sets ``wakeup``, one before it is in what was read.
    """
    delay = 0.05
    while True:
        if wakeup is not None:
            wakeup.follow(ref for refs in polled.values() for ref in refs)
        announced: set[ObjectRef] = set()  # what a change of the cache's store announces
        for index, refs in list(polled.items()):
            read, cached = _read_health(client, live, refs)
            announced |= cached
            report = _merged(reports[index], read)
            reports[index] = report
            polled[index] = [o.ref for o in report.pending]
            if report.healthy or report.failed:
                del polled[index]
        left = deadline - time.monotonic()
        if not polled or left <= 0:
            return
        if wakeup is None:
            time.sleep(min(delay, left))
        elif all(ref in announced for refs in polled.values() for ref in refs):
            wakeup.wait(left)  # only a change (or a watch losing its place) is news
            continue
        else:  # some object is seen only by reading it: a change of the others wakes early
            wakeup.wait(min(delay, left))
        delay = min(delay * 2, 0.5)


def watch_health(
    watch: HealthWatch,
    plans: Sequence[InstancePlan],
    healths: Sequence[HealthReport | None],
    deployed: Mapping[str, str],
    gated: set[str],
    settings: PassSettings,
) -> set[str]:
    """The instances that are not healthy yet but still within their health timeout.

    A healthy instance ends its wait (a pass that changed its objects began one);
    one that stays pending past ``health_timeout`` (counted from the change, across
    passes) is left out, so its record says HealthCheckFailed.
    """
    waiting: set[str] = set()
    for plan, health in zip(plans, healths, strict=True):
        if health is None:
            continue
        version = (
            deployed.get(plan.name)
            if plan.name in gated or plan.version is None
            else plan.version.key
        )
        if health.healthy:
            watch.healthy(plan.name)
        elif health.failed:
            watch.gave_up(plan.name, "failed")
        elif watch.unhealthy(plan, version) < settings.health_timeout:
            waiting.add(plan.name)
        else:
            watch.gave_up(plan.name, "timeout")
    return waiting


def _merged(before: HealthReport | None, read: HealthReport) -> HealthReport:
    """``before`` with the objects ``read`` again replaced, in ``before``'s order."""
    if before is None:
        return read
    fresh = {o.ref: o for o in read.objects}
    return HealthReport(tuple(fresh.get(o.ref, o) for o in before.objects), read.timed_out)


def _read_health(
    client: KubeClient, live: LiveState, refs: Sequence[ObjectRef]
) -> tuple[HealthReport, set[ObjectRef]]:
    """Each object's health as it is now, and which of them a change of the watch
    cache's store will announce: those read from it (their kind is kept current
    there) and judged by their content alone (not by the clock, ``kstatus.AGES``).
    The others (and an object the cache lacks) are read with one GET each."""
    found: dict[ObjectRef, ObjectHealth] = {}
    asked: list[ObjectRef] = []
    for ref in refs:
        synced, obj = live.current(ref)
        if not synced or obj is None:
            asked.append(ref)
            continue
        health, message = evaluate(obj)
        found[ref] = ObjectHealth(ref, health, message)
    announced = {r for r in found if (r.api_version, r.kind) not in AGES}
    if asked:
        found.update((o.ref, o) for o in wait_healthy(client, asked, 0.0).objects)
    seen = tuple(found[r] for r in refs if r in found)
    failed = any(o.health is Health.FAILED for o in seen)
    # as ``wait_healthy`` with no time left: anything not Current yet timed out
    waiting = any(o.health is not Health.CURRENT for o in seen)
    return HealthReport(seen, timed_out=waiting and not failed), announced


def _from_live(live: LiveState, refs: Sequence[ObjectRef]) -> HealthReport:
    found = []
    for ref in refs:
        obj = live.get(ref)
        if obj is None:
            found.append(ObjectHealth(ref, Health.NOT_FOUND, "not in the pass's view"))
            continue
        health, message = evaluate(obj)
        # interned: healthy objects of one kind say the same, and a settled instance's
        # health is kept across passes (``daemon.memo``)
        found.append(ObjectHealth(ref, health, sys.intern(message)))
    return HealthReport(tuple(found))
