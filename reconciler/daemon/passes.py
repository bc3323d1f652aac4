"""One reconcile pass over one cluster: the daemon's unit of work, as a readable sequence.

``reconcile_checkout`` takes a catalog loaded from a known commit and:
plan (with the versions the cluster's inventories say are deployed) ->
apply every instance (one failure never stops the others) -> prune instances
deleted from Git -> check health within a timeout -> build one status record per
instance -> commit the records that changed to the status branch. Migration
hooks (``reconciler.daemon.migrating``) run around those steps. Every step's
result is a value; logs, metrics, the status files and the CLI output are
rendered from the returned ``PassReport``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.daemon.applying import apply_plan, kept_as_is, remove_deleted
from reconciler.daemon.migrating import DEFAULT_LEDGER_NAMESPACE, MigrationEvent, MigrationHooks
from reconciler.daemon.plan import InstancePlan, plan_cluster, require_cluster
from reconciler.daemon.rolling import Rolled, after_rollout, drive, rollout_status, rolls
from reconciler.daemon.statuses import InstanceOutcome, build_removed_status, build_status
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
    wait_healthy,
)
from reconciler.migrations import Registry
from reconciler.model.catalog import Catalog
from reconciler.model.changeset import Action, ChangeSet, ObjectRef
from reconciler.model.status import InstanceStatus, Phase

log = logging.getLogger("reconciler.daemon")


@dataclass(frozen=True)
class PassSettings:
    cluster: str
    health_timeout: float = 120.0
    force_conflicts: bool = False
    allow_empty_prune: bool = False
    allow_mass_prune: bool = False
    writer: str = ""  # recorded in every inventory; see ``ApplyOptions.writer``
    ledger_namespace: str = DEFAULT_LEDGER_NAMESPACE  # the cluster's global migration ledger


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
    next_look: float | None = None  # seconds until a rollout wants another pass

    @property
    def all_ready(self) -> bool:
        return all(s.phase in (Phase.READY, Phase.REMOVED) for s in self.statuses) and all(
            r.ok for r in self.removed
        )

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
    previous: Mapping[str, InstanceStatus] | None = None,
    registry: Registry | None = None,
) -> PassReport:
    """One pass over ``catalog`` (loaded from ``commit``).

    ``hold(plan)`` True leaves an instance alone this pass (it is backing off
    after failures and its inputs did not change); it keeps its ``previous``
    record, so holding writes nothing to the cluster or to Git.
    """
    started = time.time()
    require_cluster(catalog, settings.cluster)
    entry = catalog.clusters[settings.cluster]
    live = LiveState(client, settings.cluster, entry.namespaces)
    deployed = live.deployed_versions(entry.instances)
    plans = plan_cluster(catalog, settings.cluster, deployed)
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
        plans,
        deployed,
        cluster=settings.cluster,
        held=held,
        registry=registry,
        limits=options.limits,
        ledger_namespace=settings.ledger_namespace,
    )
    previous = previous or {}
    rolled: dict[str, Rolled] = {}
    results = []
    for plan in plans:
        record = previous[plan.name].rollout if plan.name in previous else None
        batches = rolls(plan, deployed.get(plan.name), record)
        if plan.name in held:
            results.append(kept_as_is(live, plan, Action.SKIPPED, "backing off after failures"))
            continue
        blocked = hooks.before_apply(plan)  # pre migrations; a failure applies nothing
        if blocked is not None:
            results.append(blocked)
        elif batches is not None:
            step = drive(
                client,
                live,
                catalog,
                plan,
                batches,
                options,
                deployed=deployed[plan.name],
                record=record,
                source_commit=commit,
            )
            rolled[plan.name] = step
            results.append(step.result)
        else:
            results.append(apply_plan(client, live, plan, options, source_commit=commit))
    removed = remove_deleted(client, live, entry, options, hooks)
    healths = check_health(client, live, plans, results, settings.health_timeout, skip=set(rolled))
    hooks.after_health(plans, results, healths)
    # what each instance owns now: names the app and namespace of an unreadable file
    recorded = live.inventories()
    outcomes = [
        InstanceOutcome(
            plan,
            deployed.get(plan.name),
            recorded[plan.name].app if plan.name in recorded else "",
            result,
            health,
            settings.health_timeout,
        )
        for plan, result, health in zip(plans, results, healths, strict=True)
    ]
    statuses = tuple(
        previous[o.plan.name]
        if o.plan.name in held and o.plan.name in previous
        else rollout_status(
            settings.cluster, o.plan, rolled[o.plan.name], commit, o.plan.instance.app
        )
        if o.plan.name in rolled
        else after_rollout(
            build_status(settings.cluster, o, commit),
            previous.get(o.plan.name),
            quiet=o.result is None or not any(e.changed for e in o.result.changes.entries),
        )
        for o in outcomes
    ) + tuple(build_removed_status(settings.cluster, r, commit) for r in removed)
    looks = [r.next_look for r in rolled.values() if r.next_look is not None]
    statuses = hooks.recorded(statuses, held)
    changes = ChangeSet.of(e for r in (*results, *removed) for e in r.changes.entries)
    for result in removed:
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
    )


def _app(outcome: InstanceOutcome) -> str:
    return outcome.plan.instance.app or outcome.deployed_app


def check_health(
    client: KubeClient,
    live: LiveState,
    plans: Sequence[InstancePlan],
    results: Sequence[InstanceResult],
    timeout: float,
    *,
    skip: set[str] | None = None,
) -> list[HealthReport | None]:
    """Health of every applied instance, waiting (one shared deadline) only where needed.

    An instance whose objects the pass's lists already show as current costs no
    request; the others are polled until current, failed, or the deadline.
    Sharing the deadline bounds a pass by ``timeout`` however many instances roll.
    """
    deadline = time.monotonic() + timeout
    reports: list[HealthReport | None] = []
    for plan, result in zip(plans, results, strict=True):
        skipped = all(e.action is Action.SKIPPED for e in result.changes.entries)
        rolling = plan.name in (skip or set())  # a rollout verifies its own batches
        if plan.instance.suspend or not plan.ok or not result.ok or skipped or rolling:
            reports.append(None)
            continue
        refs = [ObjectRef.of(obj) for obj in plan.objects]
        seen = _from_live(live, refs)
        if seen.healthy:
            reports.append(seen)
            continue
        remaining = max(0.0, deadline - time.monotonic())
        reports.append(wait_healthy(client, refs, remaining, interval=0.5))
    return reports


def _from_live(live: LiveState, refs: Sequence[ObjectRef]) -> HealthReport:
    found = []
    for ref in refs:
        obj = live.get(ref)
        if obj is None:
            found.append(ObjectHealth(ref, Health.NOT_FOUND, "not in the pass's view"))
            continue
        health, message = evaluate(obj)
        found.append(ObjectHealth(ref, health, message))
    return HealthReport(tuple(found))
