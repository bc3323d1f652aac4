"""Delete what Git no longer has, carefully; and keep the inventory up to date.

Prune is the only code that deletes. It deletes an object only when all hold:
the instance's inventory lists it, the live object carries
``app.kubernetes.io/managed-by: reconciler`` and this instance's
``app.kubernetes.io/instance`` label, and the delete is conditioned on the uid
we inspected. It walks reverse kind order, and refuses to remove every object
of an instance in one pass (an empty render usually means a broken commit)
unless the caller allows it. ``reconciler.kube.apply`` calls
:func:`prune_stale` and :func:`write_inventory`; :func:`remove_instance`
handles instances deleted from Git. One more delete is not a prune:
:func:`undo_created` takes back what a failed first install created a moment
before (the objects' uids come from the answers that created them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from reconciler.kube.client import KubeClient
from reconciler.kube.inventory import (
    INSTANCE_LABEL,
    MANAGED_BY,
    MANAGER_NAME,
    PER_NAMESPACE,
    SHARED_SUFFIX,
    Inventory,
    inventory_name,
    shared_ref,
    to_configmap,
)
from reconciler.kube.live import LiveState
from reconciler.kube.order import prune_order
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.errors import KubeError

PRUNE_REFUSED = "PruneRefused"
EMPTY_RENDER = "EmptyRender"


@dataclass(frozen=True)
class PruneResult:
    """Entries for stale objects, those still to list in the inventory, and a failure reason."""

    entries: tuple[ChangeSetEntry, ...] = ()
    kept: Mapping[ObjectRef, str] = field(default_factory=dict)
    reason: str | None = None
    message: str = ""


def prune_stale(
    client: KubeClient,
    live: LiveState,
    instance: str,
    stale: Mapping[ObjectRef, str],
    *,
    refuse_all: bool,
) -> PruneResult:
    """Delete ``stale`` objects of ``instance`` in reverse kind order.

    ``refuse_all`` means the instance still exists but renders nothing: every
    stale object is then kept and the result carries reason ``EmptyRender``.
    """
    if not stale:
        return PruneResult()
    if refuse_all:
        message = (
            f"instance {instance} renders no objects; keeping its {len(stale)} objects "
            "(an empty render usually means a broken commit). Set allowEmptyPrune: true "
            "in the instance file (or pass --allow-empty-prune) to delete them"
        )
        skipped = tuple(
            ChangeSetEntry.for_ref(instance, ref, Action.SKIPPED, message)
            for ref in prune_order(stale)
        )
        return PruneResult(skipped, dict(stale), EMPTY_RENDER, message)
    entries: list[ChangeSetEntry] = []
    kept: dict[ObjectRef, str] = {}
    for ref in prune_order(stale):
        entry = _prune_one(client, live, instance, ref)
        if entry is None:
            continue
        entries.append(entry)
        if entry.action is Action.FAILED:
            kept[ref] = stale[ref]
    failed = [e for e in entries if e.action is Action.FAILED]
    if failed:
        return PruneResult(tuple(entries), kept, "PruneFailed", failed[0].message)
    return PruneResult(tuple(entries), kept)


def _prune_one(
    client: KubeClient, live: LiveState, instance: str, ref: ObjectRef
) -> ChangeSetEntry | None:
    """Delete one stale object if it is provably ours; None when it is already gone."""
    try:
        current = live.fetch(ref)
        if current is None:
            return None
        meta = current.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(MANAGED_BY) != MANAGER_NAME or labels.get(INSTANCE_LABEL) != instance:
            return ChangeSetEntry.for_ref(
                instance,
                ref,
                Action.SKIPPED,
                f"not deleted: it lacks the labels {MANAGED_BY}={MANAGER_NAME} and "
                f"{INSTANCE_LABEL}={instance}",
            )
        client.delete(ref, uid=str(meta.get("uid") or ""))
    except KubeError as e:
        return ChangeSetEntry.for_ref(instance, ref, Action.FAILED, str(e))
    live.forget(ref)
    return ChangeSetEntry.for_ref(instance, ref, Action.DELETED)


UNDONE = (
    "not applied: another object of the instance was refused; "
    "this one was created and deleted again"
)


def undo_created(
    client: KubeClient,
    live: LiveState,
    instance: str,
    entries: list[ChangeSetEntry],
    created: Mapping[ObjectRef, str],
) -> list[ChangeSetEntry]:
    """Delete, in reverse kind order, the objects a failed first install created.

    ``created`` maps each object this apply created to the uid the API server gave
    it, so a delete never reaches an object someone made since. An object that
    cannot be deleted stays ``created`` (the inventory then lists it, and the next
    pass prunes or re-applies it) with the reason in its message; the others are
    reported ``skipped``, as when a dry run refuses an instance: nothing of it runs.
    """
    outcome: dict[ObjectRef, ChangeSetEntry] = {}
    for ref in prune_order(created):
        try:
            client.delete(ref, uid=created[ref])
        except KubeError as e:
            outcome[ref] = ChangeSetEntry.for_ref(
                instance, ref, Action.CREATED, f"created, and could not be deleted again: {e}"
            )
            continue
        live.forget(ref)
        outcome[ref] = ChangeSetEntry.for_ref(instance, ref, Action.SKIPPED, UNDONE)
    return [outcome.get(e.ref, e) if e.action is Action.CREATED else e for e in entries]


def write_inventory(
    client: KubeClient, live: LiveState, inventory: Inventory, old: Inventory | None
) -> Inventory:
    """Store ``inventory`` unless it equals ``old`` where the cluster's layout keeps it.

    Per instance (the default): its own ConfigMap, applied now. Per namespace
    (``live.layout``): its key of the namespace's shared ConfigMap, staged for the
    pass's flush (``kube.inventory_writes``), or its own ConfigMap when the shared
    one has no room. Wherever it was before (another namespace, the other layout)
    is cleared once the new place is written.

    Returns the inventory that now stands: ``old`` itself when nothing changed, so a
    daemon keeps one copy of an unchanged inventory (its cache of parsed inventories
    and its memo of settled instances hold the same object), not one per pass.
    """
    homes = live.inventory_homes(inventory.instance)
    shared_home = shared_ref(live.cluster, inventory.namespace)
    own_home = ObjectRef("v1", "ConfigMap", inventory.namespace, inventory_name(inventory.instance))
    if (
        old is not None
        and inventory.same_as(old)
        and _in_place(live, homes, shared_home, inventory)
    ):
        return old
    own = tuple(ref for ref in homes if ref.name == own_home.name)
    if live.layout == PER_NAMESPACE and live.writes.stage(inventory, replaces=own):
        live.record_inventory(inventory, home=shared_home)
        for ref in homes:
            if ref.name.endswith(SHARED_SUFFIX) and ref.namespace != inventory.namespace:
                live.writes.stage_removal(ref.namespace, inventory.instance)
        return inventory
    response = client.apply(to_configmap(inventory), force=True)
    live.remember(response.body)
    live.record_inventory(
        inventory, str(response.body.get("metadata", {}).get("resourceVersion", ""))
    )
    for ref in homes:
        if ref == own_home:
            continue
        if ref.name.endswith(SHARED_SUFFIX):
            live.writes.stage_removal(ref.namespace, inventory.instance)
        else:
            client.delete(ref)
            live.forget(ref)
    return inventory


def _in_place(
    live: LiveState, homes: tuple[ObjectRef, ...], shared_home: ObjectRef, inventory: Inventory
) -> bool:
    """True when the inventory sits where the layout wants it, in one place.

    An unchanged inventory in its own ConfigMap is moved into the shared one when
    the cluster says ``perNamespace`` (and back when it says ``perInstance``), so a
    switch of layouts moves every instance at its next pass, not only those that
    change. One in its own ConfigMap under ``perNamespace`` stays there when the
    shared one has no room for it (``SHARED_BYTES``).
    """
    if len(homes) != 1 or homes[0].namespace != shared_home.namespace:
        return False
    shared = homes[0] == shared_home
    if live.layout == PER_NAMESPACE:
        return shared or not live.writes.fits(inventory)
    return not shared


def remove_instance(
    client: KubeClient, live: LiveState, inventory: Inventory
) -> tuple[ChangeSet, str | None, str]:
    """Uninstall an instance whose file Git no longer has: prune its objects, then its inventory.

    Deleting the file is the explicit request, so no flag is needed; the cluster-wide
    guard against mass removal is the caller's (``reconciler.daemon.applying``).
    Returns the change set, a failure reason (``PruneFailed``) and message.
    """
    result = prune_stale(client, live, inventory.instance, inventory.objects, refuse_all=False)
    if result.reason is None:
        jobs = _delete_leftover_jobs(client, inventory.namespace, inventory.instance)
        failed = [e for e in jobs if e.action is Action.FAILED]
        if failed:
            return ChangeSet((*result.entries, *jobs)), "PruneFailed", failed[0].message
        result = replace(result, entries=(*result.entries, *jobs))
        homes = live.inventory_homes(inventory.instance) or (
            ObjectRef("v1", "ConfigMap", inventory.namespace, inventory_name(inventory.instance)),
        )
        for ref in homes:
            if ref.name.endswith(SHARED_SUFFIX):
                live.writes.stage_removal(ref.namespace, inventory.instance)
                continue
            try:
                client.delete(ref)
            except KubeError as e:
                return ChangeSet(result.entries), "PruneFailed", str(e)
        live.drop_inventory(inventory.instance)
    elif result.kept != inventory.objects:
        write_inventory(client, live, _with_objects(inventory, result.kept), inventory)
    return ChangeSet(result.entries), result.reason, result.message


# Jobs the reconciler creates outside the inventory, for one instance: migration Jobs
# (a failed one is kept for ``kubectl describe``) and rollout analysis Jobs. Both carry
# the managed-by and instance labels of every rendered object, plus their own label.
_LEFTOVER_JOB_LABELS = ("reconciler.dev/migration", "reconciler.dev/rollout-analysis")


def _delete_leftover_jobs(
    client: KubeClient, namespace: str, instance: str
) -> list[ChangeSetEntry]:
    """Delete the instance's kept migration and analysis Jobs when the instance goes.

    A failed Job is kept while the instance lives so a person can look at it; once
    the instance is uninstalled nothing will report or replace it, so it would stay
    forever. Only Jobs with the reconciler's managed-by label, this instance's label
    and a migration or analysis label are touched.
    """
    entries: list[ChangeSetEntry] = []
    for label in _LEFTOVER_JOB_LABELS:
        selector = f"{MANAGED_BY}={MANAGER_NAME},{INSTANCE_LABEL}={instance},{label}"
        try:
            jobs = client.list("batch/v1", "Job", namespace=namespace, label_selector=selector)
        except KubeError as e:
            ref = ObjectRef("batch/v1", "Job", namespace, f"*({label})")
            return [*entries, ChangeSetEntry.for_ref(instance, ref, Action.FAILED, str(e))]
        for job in jobs:
            ref = ObjectRef.of(job)
            try:
                client.delete(ref, uid=str(job["metadata"].get("uid", "")))
            except KubeError as e:
                entries.append(ChangeSetEntry.for_ref(instance, ref, Action.FAILED, str(e)))
                continue
            entries.append(ChangeSetEntry.for_ref(instance, ref, Action.DELETED))
    return entries


def _with_objects(inventory: Inventory, objects: Mapping[ObjectRef, str]) -> Inventory:
    """``inventory`` listing ``objects``; every other field (the writer too) kept."""
    return replace(inventory, objects=dict(objects))
