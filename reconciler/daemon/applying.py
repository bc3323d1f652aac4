"""Apply a cluster's instance plans through the engine: the step ``apply`` and the daemon share.

For each plan: a suspended instance is skipped, a plan that cannot proceed
(broken files, unresolvable selection, blocked downgrade) keeps its objects as
they are (one ``failed`` entry for the instance, ``skipped`` for each object it
owns), and every other instance is applied with ``reconciler.kube``. An
instance's engine error fails that instance alone. Instances deleted from Git
are uninstalled through ``remove_instance`` (no flag needed), unless the commit
removes more instances than the cluster's ``prune.maxRemovedInstances`` allows.
Migration hooks (``reconciler.daemon.migrating``) plug in through ``before`` and
an ``Uninstaller``.

Instances are applied concurrently (:func:`apply_concurrently`), as many at once
as the client's request budget (``--max-requests-in-flight``) allows; results
come back in plan order, so records and logs are the same as a serial pass's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Protocol

from reconciler.daemon.lanes import run_lanes
from reconciler.daemon.plan import CATALOG_INVALID, InstancePlan
from reconciler.daemon.rendered import refs_of
from reconciler.kube import (
    PRUNE_REFUSED,
    ApplyOptions,
    ClusterUnreachable,
    InstanceResult,
    InstanceTarget,
    Inventory,
    KubeClient,
    LiveState,
    apply_instance,
    remove_instance,
)
from reconciler.kube.order import FIRST_STAGE_KINDS
from reconciler.model.catalog import ClusterEntry
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.errors import KubeError

INSTANCE_KIND = ("reconciler/v1", "Instance")


def instance_target(cluster: str, plan: InstancePlan, source_commit: str = "") -> InstanceTarget:
    inst = plan.instance
    return InstanceTarget(
        cluster=cluster,
        instance=inst.name,
        namespace=inst.namespace,
        objects=tuple(plan.objects),  # decoded once, for this apply (``RenderedObjects``)
        app=inst.app,
        version=plan.version.key if plan.version is not None else "",
        source_commit=source_commit,
        allow_empty_prune=inst.allow_empty_prune,
        images=plan.images,
    )


class Uninstaller(Protocol):
    """Runs an uninstalled instance's migrations around its prune (``MigrationHooks``)."""

    def before_prune(self, inventory: Inventory) -> InstanceResult | None:
        """None to go on and prune, else the failed result that stops the uninstall."""

    def after_prune(self, result: InstanceResult) -> None: ...


def apply_plans(
    client: KubeClient,
    live: LiveState,
    plans: Sequence[InstancePlan],
    options: ApplyOptions,
    *,
    source_commit: str = "",
    before: Callable[[InstancePlan], InstanceResult | None] | None = None,
) -> list[InstanceResult]:
    """Apply every plan; one result per plan, in order.

    ``before(plan)`` (pre migrations) returning a result stops that plan's apply;
    every ``before`` runs, in order, before the applies start.
    """
    stopped = [before(plan) if before is not None else None for plan in plans]
    go = [plan for plan, result in zip(plans, stopped, strict=True) if result is None]
    applied = iter(apply_concurrently(client, live, go, options, source_commit=source_commit))
    return [result if result is not None else next(applied) for result in stopped]


def apply_concurrently(
    client: KubeClient,
    live: LiveState,
    plans: Sequence[InstancePlan],
    options: ApplyOptions,
    *,
    source_commit: str = "",
) -> list[InstanceResult]:
    """``apply_plan`` for every plan, up to ``client.max_requests_in_flight`` at once.

    Each thread applies one instance at a time and sends one request at a time, so
    the budget of requests in flight is also the number of instances in progress.
    What one instance needs another to create first is kept in order:

    * instances that carry CRDs or Namespaces (first-stage kinds) are applied
      first, one after another in plan order, so the kinds and namespaces they
      create exist for every instance after them, as in a serial pass;
    * instances that would create the same missing namespace share a lane (one
      after another, in plan order), so the first creates it and says so, and the
      others find it.

    Everything else is independent: each instance reads the pass's one
    ``LiveState`` and writes only its own objects and inventory. A failure stays
    the instance's own (``apply_plan``); only an unreachable cluster stops the
    pass, raised once the instances in progress are done.

    A lane is one after another only until what it shares exists: the first
    instance of each lane goes in a round of its own (all lanes' firsts at once),
    then the lanes are worked out again for the rest, whose namespaces now exist,
    so they go concurrently too (:func:`_rounds`). Run whole, 20 instances per new
    namespace in 50 lanes on 8 threads took 7 lanes' time where 6.25 was the work,
    the last two lanes alone on the wire; and every instance of a new cluster whose
    instances share one namespace went one at a time.
    """

    def apply(plan: InstancePlan) -> InstanceResult:
        return apply_plan(client, live, plan, options, source_commit=source_commit)

    first = [i for i, plan in enumerate(plans) if creates_first_stage_kinds(plan)]
    done = {i: apply(plans[i]) for i in first}
    for batch in _rounds(live, plans, [i for i in range(len(plans)) if i not in done]):
        chosen = [plans[i] for i in batch]
        applied = run_lanes(chosen, _lanes(live, chosen), apply, client.max_requests_in_flight)
        done.update(zip(batch, applied, strict=True))
    return [done[i] for i in range(len(plans))]


def _rounds(
    live: LiveState, plans: Sequence[InstancePlan], waiting: list[int]
) -> Iterator[list[int]]:
    """Indexes of ``plans`` to apply together, round after round, the next worked out
    once the last was applied: every waiting plan when none shares a lane with
    another (``_lanes``), else the first plan of each lane (plan order). Each round
    takes at least one plan of every lane, so a namespace that cannot be created
    costs at most its lane's length in rounds, the order a lane had."""
    while waiting:
        lane_of = _lanes(live, [plans[i] for i in waiting])
        firsts: dict[Hashable, int] = {}
        for i in waiting:
            firsts.setdefault(lane_of(plans[i]), i)
        if len(firsts) == len(waiting):
            yield waiting
            return
        batch = sorted(firsts.values())
        yield batch
        taken = set(batch)
        waiting = [i for i in waiting if i not in taken]


def creates_first_stage_kinds(plan: InstancePlan) -> bool:
    return plan.ok and any(ref.kind in FIRST_STAGE_KINDS for ref in refs_of(plan.objects))


def _lanes(live: LiveState, plans: Sequence[InstancePlan]) -> Callable[[InstancePlan], Hashable]:
    """The lane of each plan: its own, or one shared with every plan that would create one
    of the same missing namespaces (its own or one its objects name), transitively."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    def missing(namespace: str) -> bool:
        try:
            return not live.namespace_exists(namespace)
        except KubeError:  # cannot tell: take turns; each apply meets the error itself
            return True

    for plan in plans:
        if plan.instance.suspend or not plan.ok:
            continue
        wanted = {plan.instance.namespace}
        wanted |= {ref.namespace for ref in refs_of(plan.objects)}
        for namespace in sorted(n for n in wanted if n and missing(n)):
            parent[root("instance/" + plan.name)] = root("namespace/" + namespace)
    return lambda plan: root("instance/" + plan.name)


def apply_plan(
    client: KubeClient,
    live: LiveState,
    plan: InstancePlan,
    options: ApplyOptions,
    *,
    source_commit: str = "",
) -> InstanceResult:
    if plan.instance.suspend:
        return kept_as_is(live, plan, Action.SKIPPED, "suspended")
    if not plan.ok:
        return kept_as_is(live, plan, Action.FAILED, plan.message or str(plan.reason))
    try:
        target = instance_target(live.cluster, plan, source_commit)
        return apply_instance(client, target, options, live)
    except ClusterUnreachable:
        raise
    except KubeError as e:  # e.g. its kinds could not be listed: this instance fails alone
        inst = plan.instance
        ref = ObjectRef(*INSTANCE_KIND, inst.namespace, inst.name)
        entry = ChangeSetEntry.for_ref(inst.name, ref, Action.FAILED, str(e))
        return InstanceResult(inst.name, ChangeSet.of([entry]), e.reason, str(e))


def kept_as_is(live: LiveState, plan: InstancePlan, action: Action, message: str) -> InstanceResult:
    """An instance left alone: one entry for the instance, one skipped entry per object."""
    inst = plan.instance
    ref = ObjectRef(*INSTANCE_KIND, inst.namespace, inst.name)
    reason = None if action is Action.SKIPPED else (plan.reason or "ReconcileFailed")
    entries = [ChangeSetEntry.for_ref(inst.name, ref, action, message)]
    inventory = live.inventory(inst.name)
    kept_message = f"left as it is ({plan.reason or message})"
    for obj in sorted(inventory.objects) if inventory else ():
        entries.append(ChangeSetEntry.for_ref(inst.name, obj, Action.SKIPPED, kept_message))
    return InstanceResult(inst.name, ChangeSet.of(entries), reason, message)


def remove_deleted(
    client: KubeClient,
    live: LiveState,
    entry: ClusterEntry,
    options: ApplyOptions,
    uninstaller: Uninstaller | None = None,
    held: Callable[[str], bool] | None = None,
    owns: Callable[[str], bool] | None = None,
    blocked: Sequence[str] = (),
) -> list[InstanceResult]:
    """Uninstall instances that have an inventory in the cluster but no file in Git.

    Deleting an instance file is the request, so no flag is needed. Broken
    instance files stay listed in the catalog (``valid=False``), so a file that
    fails to parse never counts as deleted. A cluster whose ``cluster.yaml`` is
    invalid gets no deletions at all (fail closed), nor does one with any file
    in error under its directory (``blocked``, ``Catalog.cluster_errors``): a
    renamed ``web.yaml.bak`` or ``instance/`` is an error, not a deletion, so each
    instance it would remove is ``CatalogInvalid`` instead. A commit that would
    remove more instances than ``prune.maxRemovedInstances`` allows (default:
    more than half, or all) removes none: each is ``PruneRefused``.
    Each result carries the inventory it removed, for the status record.
    ``uninstaller`` runs the instance's uninstall migrations and undo steps first
    (a failure keeps every object for a retry) and forgets its ledger after.
    ``held(name)`` True skips a removal that failed before and is backing off (no
    result: its last record stands), so a failing uninstall Job is not re-run on
    every pass. ``owns(name)`` False (``--shards``: another replica's shard) leaves
    that removal to its owner; the guard still counts every removed instance of the
    cluster, so every shard refuses or allows the same commit.
    """
    if not entry.cluster.valid:
        return []
    inventories = live.inventories()
    gone = sorted(name for name in inventories if name not in entry.instances)
    mine = [name for name in gone if owns is None or owns(name)]
    if blocked:
        return [_removal_blocked(inventories[name], blocked) for name in mine]
    if not options.allow_mass_prune and not entry.removal_allowed(len(gone), len(inventories)):
        return [_prune_refused(inventories[name], len(gone), len(inventories)) for name in mine]
    results = []
    for name in mine:
        if held is not None and held(name):
            continue
        inventory = inventories[name]
        stopped = uninstaller.before_prune(inventory) if uninstaller is not None else None
        if stopped is not None:
            results.append(stopped)
            continue
        changes, reason, message = remove_instance(client, live, inventory)
        results.append(InstanceResult(name, changes, reason, message, inventory))
        if uninstaller is not None:
            uninstaller.after_prune(results[-1])
    return results


def _removal_blocked(inventory: Inventory, blocked: Sequence[str]) -> InstanceResult:
    shown = ", ".join(blocked[:3]) + (f" and {len(blocked) - 3} more" if len(blocked) > 3 else "")
    message = (
        f"not removed: this commit has validation errors in clusters/{inventory.cluster}/ "
        f"({shown}); an instance is removed only when its file is deleted in a valid "
        "commit (a renamed instance file or instances/ directory is an error, not a "
        "deletion)"
    )
    return _not_removed(inventory, CATALOG_INVALID, message)


def _prune_refused(inventory: Inventory, removed: int, total: int) -> InstanceResult:
    message = (
        f"not removed: this commit removes {removed} of the cluster's {total} instances, "
        "more than cluster.yaml prune.maxRemovedInstances allows (default 50%, never all); "
        "restore the instance files, raise the limit, or run with --allow-mass-prune"
    )
    return _not_removed(inventory, PRUNE_REFUSED, message)


def _not_removed(inventory: Inventory, reason: str, message: str) -> InstanceResult:
    """A removal refused: every object of the inventory kept (skipped), saying why."""
    entries = [
        ChangeSetEntry.for_ref(inventory.instance, ref, Action.SKIPPED, message)
        for ref in sorted(inventory.objects)
    ]
    return InstanceResult(inventory.instance, ChangeSet.of(entries), reason, message, inventory)
