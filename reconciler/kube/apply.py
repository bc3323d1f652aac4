"""Apply one instance's objects with server-side apply, and record what it owns.

The engine behind ``reconciler apply`` and the daemon's pass. For one instance
:func:`apply_instance`:

1. refuses the whole instance if an object is outside the cluster's limits, or if
   the API server refuses one in a dry run (``_dry_run``; a first install skips it and
   deletes what it created instead, ``_fresh_install``);
2. creates missing namespaces the limits allow;
3. applies objects in kind order (CRDs and Namespaces first, then discovery is
   refreshed for the new kinds), as field manager ``reconciler``, skipping
   every object whose live state and manifest fingerprint already match;
4. reverts drift made by imperative edits (managers with ``Update``
   operations), but reports conflicts with other appliers unless forced; fields
   of client-side ``kubectl apply`` are taken over first (``csaupgrade.py``), so
   an adopted object ends up exactly as in Git; applies with
   ``fieldValidation=Strict`` (a typo in a manifest fails the object, naming the
   field) and keeps the API server's warnings in the object's change set entry;
5. prunes what the previous inventory lists and Git no longer has
   (``reconciler.kube.prune``), and writes the new inventory if it changed; its
   ``sourceCommit`` is the commit that last changed it, so a commit that changes
   nothing the instance renders writes nothing (see ``_stamped``).

Everything is returned as an :class:`InstanceResult` holding a ``ChangeSet``;
nothing is printed here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.kube.client import FIELD_MANAGER, KubeClient, Response
from reconciler.kube.compare import fingerprint, matches
from reconciler.kube.csaupgrade import JSON_PATCH, client_side_managers, upgrade_patch
from reconciler.kube.discovery import crd_api_versions
from reconciler.kube.errors import ConflictError, KubeApiError, LimitViolation, UnknownKind
from reconciler.kube.inventory import INSTANCE_LABEL, MANAGED_BY, MANAGER_NAME, Inventory
from reconciler.kube.limits import Limits, violations
from reconciler.kube.live import LiveState, own_ref
from reconciler.kube.order import FIRST_STAGE_KINDS, apply_order
from reconciler.kube.prune import prune_stale, undo_created, write_inventory
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.errors import KubeError

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class InstanceTarget:
    """What one instance should run: its rendered objects and where they came from."""

    cluster: str
    instance: str
    namespace: str
    objects: tuple[Mapping[str, Any], ...]
    app: str = ""
    version: str = ""
    source_commit: str = ""
    allow_empty_prune: bool = False  # ``allowEmptyPrune: true`` in the instance file
    images: Mapping[str, str] = field(default_factory=dict)  # pinned builds (SPEC section 8)


@dataclass(frozen=True)
class ApplyOptions:
    """Settings of an apply pass; ``limits`` come from the cluster's ``cluster.yaml``."""

    limits: Limits = field(default_factory=Limits)
    force_conflicts: bool = False
    allow_empty_prune: bool = False
    allow_mass_prune: bool = False  # lift the cluster guard on uninstalling many instances
    prune: bool = True
    # This reconciler's identity, recorded in each inventory it writes; "" (one-off
    # ``reconciler apply``) keeps the recorded writer and compares nothing.
    writer: str = ""


@dataclass(frozen=True, slots=True)
class InstanceResult:
    """The outcome for one instance; ``reason`` is a kstatus reason when it failed."""

    instance: str
    changes: ChangeSet
    reason: str | None = None
    message: str = ""
    inventory: Inventory | None = None
    other_writer: str = ""  # another reconciler wrote this instance's inventory last

    @property
    def ok(self) -> bool:
        return self.reason is None and not self.changes.failed


def apply_instance(
    client: KubeClient,
    target: InstanceTarget,
    options: ApplyOptions | None = None,
    live: LiveState | None = None,
) -> InstanceResult:
    """Reconcile one instance with the cluster; never raises for a per-object failure.

    Pass one ``LiveState`` for every instance of a pass so each kind is listed once.
    """
    if live is None:  # a view of its own: it sends the inventory it staged itself
        live = LiveState(client, target.cluster)
        result = apply_instance(client, target, options, live)
        return inventory_written(result, live.flush_inventories())
    options = options or ApplyOptions()
    objects = place_objects(client, target)
    refused = violations(objects, options.limits, lambda o: bool(ObjectRef.of(o).namespace))
    if not _namespace_allowed(target, options.limits):
        refused[ObjectRef("v1", "Namespace", "", target.namespace)] = (
            f'instance namespace "{target.namespace}" is not allowed in this cluster '
            f"(cluster.yaml allowedNamespaces: [{options.limits.describe_namespaces()}])"
        )
    if refused:
        return _refused(target, objects, refused)

    old = live.inventory(target.instance)
    # the inventory keeps these references: strings of their own, the few API versions,
    # kinds and namespaces shared, not pieces of this apply's decoded objects
    fingerprints = {own_ref(ObjectRef.of(o)): fingerprint(o) for o in objects}
    unchanged: set[ObjectRef] = set()
    fresh = _fresh_install(live, objects, old)
    gate: ObjectRef | None = None
    if not fresh:
        refused, gate = _dry_run(
            client, live, target, objects, old, options, fingerprints, unchanged
        )
        if refused:
            return _refused(target, objects, refused, by_dry_run=True)
    created: dict[ObjectRef, str] = {}
    entries = _ensure_namespaces(client, live, target, objects)
    entries += _apply_objects(
        client, live, target, objects, old, options, fingerprints, unchanged, created, gate
    )
    applied_ok = not any(e.action is Action.FAILED for e in entries)
    undone = fresh and not applied_ok
    if undone:
        entries = undo_created(client, live, target.instance, entries, created)
    kept: dict[ObjectRef, str] = _kept_fingerprints(fingerprints, entries, old)
    if undone and not kept:  # nothing of it is left: no inventory to write
        return InstanceResult(
            target.instance, ChangeSet.of(entries), "ApplyFailed", _first_failure(entries)
        )
    reason, message = (None, "") if applied_ok else ("ApplyFailed", _first_failure(entries))

    if options.prune and applied_ok and old is not None:
        stale = {r: fp for r, fp in old.objects.items() if r not in fingerprints}
        pruned = prune_stale(
            client,
            live,
            target.instance,
            stale,
            refuse_all=not objects and not (options.allow_empty_prune or target.allow_empty_prune),
        )
        entries += pruned.entries
        kept.update(pruned.kept)
        if pruned.reason:
            reason, message = pruned.reason, pruned.message
    elif old is not None:
        # nothing is pruned after a failed apply; keep listing what may still exist
        kept = {**{r: fp for r, fp in old.objects.items() if r not in kept}, **kept}

    inventory = _stamped(
        Inventory(
            cluster=target.cluster,
            instance=target.instance,
            namespace=target.namespace,
            app=target.app,
            version=target.version if applied_ok or old is None else old.version,
            images=target.images if applied_ok or old is None else old.images,
            source_commit=old.source_commit if old is not None else "",
            objects=kept,
            writer=options.writer or (old.writer if old is not None else ""),
            limits=options.limits.source,
        ),
        old,
        target.source_commit if applied_ok or old is None else "",
    )
    try:
        inventory = write_inventory(client, live, inventory, old)
    except KubeError as e:
        reason, message = reason or "ApplyFailed", message or str(e)
    return InstanceResult(
        target.instance,
        ChangeSet.of(entries),
        reason,
        message,
        inventory,
        other_writer=_other_writer(old, options.writer),
    )


def inventory_written(result: InstanceResult, failed: Mapping[str, str]) -> InstanceResult:
    """``result``, failed (``ApplyFailed``) if writing its inventory failed (``failed``:
    instance -> error, from ``LiveState.flush_inventories``)."""
    error = failed.get(result.instance)
    if error is None or result.reason is not None:
        return result
    return replace(result, reason="ApplyFailed", message=f"inventory not written: {error}")


def _stamped(inventory: Inventory, old: Inventory | None, commit: str) -> Inventory:
    """The inventory with ``sourceCommit``: the commit that last changed what it records.

    Every commit of the catalog reaches every instance, and most commits change
    nothing an instance renders (a README, another app). Stamping each inventory
    with the current commit would patch every inventory on every commit: as many
    writes as instances for a commit that changes nothing. The commit of the
    pass is recorded only when the inventory changes anyway (objects or their
    fingerprints, version, app, namespace, writer); otherwise the commit that
    established it stays. The status branch records the commit each pass saw
    for each instance (SPEC section 3), so nothing is lost. ``commit`` is ""
    after a failed apply of an instance that has an inventory: it keeps its commit.
    """
    if not commit or inventory.same_as(old):
        return inventory
    return replace(inventory, source_commit=commit)


def _fresh_install(live: LiveState, objects: list[JsonObject], old: Inventory | None) -> bool:
    """True when nothing of the instance exists yet: no inventory, none of its objects.

    A first install is applied without a dry run first, which took three requests
    of seven per instance when a cluster of new instances was installed (issue 12:
    a first install should cost no more than ``kubectl apply --server-side``). It is
    still applied whole or not at all: if the API server refuses an object, what
    this apply created is deleted again (:func:`reconciler.kube.prune.undo_created`),
    which is possible only because nothing existed before. Namespaces and CRDs are
    left to the dry run: deleting one deletes what others put in it. So is any
    object the view cannot look up (an unknown kind): the dry run names it.
    """
    if old is not None:
        return False
    for obj in objects:
        if obj.get("kind") in FIRST_STAGE_KINDS:
            return False
        ref = ObjectRef.of(obj)
        if ref.namespace and not live.namespace_exists(ref.namespace):
            continue  # nothing lives in a namespace that does not exist
        try:
            if live.get(ref) is not None:
                return False
        except KubeError:
            return False
    return True


def _other_writer(old: Inventory | None, writer: str) -> str:
    """The writer recorded by someone else, when this pass found one.

    Two daemons following different branches for one cluster (no leader
    election between them) undo each other's work every pass, and each sees
    the other's name in the inventory every pass, since each writes its own.
    A single sighting is also what a hand-over looks like (a daemon moved to
    another branch), so it is reported, never acted upon.
    """
    if old is None or not writer or not old.writer or old.writer == writer:
        return ""
    return old.writer


def _apply_objects(
    client: KubeClient,
    live: LiveState,
    target: InstanceTarget,
    objects: list[JsonObject],
    old: Inventory | None,
    options: ApplyOptions,
    fingerprints: Mapping[ObjectRef, str],
    unchanged: AbstractSet[ObjectRef] = frozenset(),
    created: dict[ObjectRef, str] | None = None,
    gate: ObjectRef | None = None,
) -> list[ChangeSetEntry]:
    """Apply in kind order; ``created`` collects the uid of every object this created.

    ``gate`` is the first object written, the one the dry run left out: if the API
    server refuses it, nothing was written yet, and nothing else is (``_dry_run``).
    """
    ordered = apply_order(objects)
    first = [o for o in ordered if o.get("kind") in FIRST_STAGE_KINDS]
    rest = [o for o in ordered if o.get("kind") not in FIRST_STAGE_KINDS]
    entries: list[ChangeSetEntry] = []

    def apply(group: list[Mapping[str, Any]]) -> bool:
        """Apply ``group``; False when the gate was refused (the rest is then skipped)."""
        for index, obj in enumerate(group):
            entry = _apply_one(
                client, live, target.instance, obj, old, options, fingerprints, unchanged, created
            )
            entries.append(entry)
            if entry.ref == gate and entry.action is Action.FAILED:
                left = group[index + 1 :] + (rest if group is first else [])
                entries.extend(
                    ChangeSetEntry.for_ref(target.instance, ObjectRef.of(o), Action.SKIPPED, GATED)
                    for o in left
                )
                return False
        return True

    if not apply(first):
        return entries
    new_crds = [
        o
        for o, e in zip(first, entries, strict=True)
        if o.get("kind") == "CustomResourceDefinition" and e.changed
    ]
    for crd in new_crds:
        client.discovery.expect(crd_api_versions(crd))
    apply(rest)
    return entries


GATED = "not applied: the first object of the instance to be written was refused"


def _dry_run(
    client: KubeClient,
    live: LiveState,
    target: InstanceTarget,
    objects: list[JsonObject],
    old: Inventory | None,
    options: ApplyOptions,
    fingerprints: Mapping[ObjectRef, str],
    unchanged: set[ObjectRef],
) -> tuple[dict[ObjectRef, str], ObjectRef | None]:
    """Ask the API server to accept every object apply would write, before writing any.

    Returns the refused objects, and the gate: the first object apply will write,
    which is not sent here. Nothing is written before it, so its own apply is its
    dry run: if it is refused, nothing else is written (``_apply_objects``). An
    upgrade that changes one object then costs no dry run, one of three objects
    two. Only when every namespace the instance needs exists, or creating one would
    be a write before the gate.

    The objects found unchanged are added to ``unchanged``: apply then skips them
    without comparing them with the cluster a second time (the comparison was the
    biggest cost of a pass that changes nothing).

    An instance is applied whole or not at all: an unknown kind or an invalid
    object found halfway would otherwise leave half of a new version running.
    Only objects that will be written are sent (``dryRun=All`` server-side
    apply, https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run),
    so an unchanged pass costs nothing more. Objects that cannot be judged yet
    are left to the apply itself: kinds served by a CRD of this same instance,
    and objects in a namespace that does not exist yet. A conflict is not a
    refusal here; apply decides about conflicts.
    """
    served_here = {
        v
        for o in objects
        if o.get("kind") == "CustomResourceDefinition"
        for v in crd_api_versions(o)
    }
    refused: dict[ObjectRef, str] = {}
    gate: ObjectRef | None = None
    # no gate chosen yet; none if creating a namespace would be a write before it
    gating = all(live.namespace_exists(n) for n in _namespaces_needed(target, objects))
    for obj in apply_order(objects):
        ref = ObjectRef.of(obj)
        if ref.api_version in served_here:
            gating = False
            continue
        if (
            ref.namespace
            and obj.get("kind") != "Namespace"
            and not live.namespace_exists(ref.namespace)
        ):
            gating = False
            continue
        try:
            current = live.get(ref)
            recorded = old.objects.get(ref) if old is not None else None
            if recorded == fingerprints[ref] and matches(obj, current):
                unchanged.add(ref)
                continue
            if gating:
                gate, gating = ref, False
                continue
            client.apply(obj, force=options.force_conflicts, dry_run=True)
        except ConflictError:
            continue
        except KubeError as e:
            refused[ref] = str(e)
            gating = False
    return refused, gate


def _apply_one(
    client: KubeClient,
    live: LiveState,
    instance: str,
    obj: Mapping[str, Any],
    old: Inventory | None,
    options: ApplyOptions,
    fingerprints: Mapping[ObjectRef, str],
    unchanged: AbstractSet[ObjectRef] = frozenset(),
    created: dict[ObjectRef, str] | None = None,
) -> ChangeSetEntry:
    ref = ObjectRef.of(obj)
    if ref in unchanged:  # the dry run compared it already, against the same live object
        return ChangeSetEntry.for_ref(instance, ref, Action.UNCHANGED)
    try:
        current = live.get(ref)
        owner = _owner(current)
        if owner and owner != instance:
            return ChangeSetEntry.for_ref(
                instance, ref, Action.FAILED, f"{ref}: already owned by instance {owner}"
            )
        recorded = old.objects.get(ref) if old is not None else None
        if recorded == fingerprints[ref] and matches(obj, current):
            return ChangeSetEntry.for_ref(instance, ref, Action.UNCHANGED)
        response, note = _apply_adopting(client, ref, obj, current, options.force_conflicts)
    except ConflictError as e:
        return ChangeSetEntry.for_ref(instance, ref, Action.FAILED, _conflict_message(ref, e))
    except KubeError as e:
        return ChangeSetEntry.for_ref(instance, ref, Action.FAILED, str(e))
    live.remember(response.body)
    action = _action(response, current)
    if action is Action.CREATED and created is not None:
        created[ref] = str((response.body.get("metadata") or {}).get("uid") or "")
    return ChangeSetEntry.for_ref(instance, ref, action, _with_warnings(note, response))


def _with_warnings(note: str, response: Response) -> str:
    """An entry's message: its note and each warning the API server answered with
    (deprecated APIs, duplicate ports...), which would otherwise only reach a log."""
    parts = [note] if note else []
    parts += [f"API server warning: {text}" for text in response.warnings]
    return "; ".join(parts)


def _server_side_apply(
    client: KubeClient, obj: Mapping[str, Any], current: JsonObject | None, force: bool
) -> tuple[Response, str]:
    """Apply; take fields back from imperative edits (drift), not from other appliers."""
    try:
        return client.apply(obj, force=force), ""
    except ConflictError as e:
        if force or not e.managers or not all(_edits_only(current, m, e) for m in e.managers):
            raise
        response = client.apply(obj, force=True)
        return response, f"reverted changes made by {', '.join(e.managers)}"


def _apply_adopting(
    client: KubeClient,
    ref: ObjectRef,
    obj: Mapping[str, Any],
    current: JsonObject | None,
    force: bool,
) -> tuple[Response, str]:
    """Apply, owning what client-side ``kubectl apply`` owned, so Git is the whole truth.

    A listed object of ours is upgraded before the apply. An object we did not list
    (someone else's, being adopted) shows its managers only in the apply's answer:
    then the upgrade follows and a second apply removes what only the client-side
    configuration had. Objects without client-side apply fields cost nothing more.
    """
    took_over = _take_over_client_side_apply(client, ref, current)
    response, note = _server_side_apply(client, obj, current, force)
    if not took_over and client_side_managers(response.body):
        took_over = _take_over_client_side_apply(client, ref, response.body)
        response = client.apply(obj, force=force)
    return response, "; ".join(n for n in (took_over, note) if n)


def _take_over_client_side_apply(
    client: KubeClient, ref: ObjectRef, current: JsonObject | None
) -> str:
    """Move client-side ``kubectl apply`` ownership to us before applying; say so."""
    patch = upgrade_patch(current, FIELD_MANAGER) if current is not None else None
    if patch is None or current is None:
        return ""
    client.request(
        "PATCH",
        client.object_path(ref),
        subject=str(ref),
        verb="take over client-side apply fields",
        query=[("fieldManager", FIELD_MANAGER)],
        body=patch,
        content_type=JSON_PATCH,
    )
    names = ", ".join(sorted(client_side_managers(current)))
    return f"took over the fields of client-side apply ({names})"


def _edits_only(current: JsonObject | None, manager: str, error: ConflictError) -> bool:
    """True when ``manager`` only ever wrote with Update (kubectl edit/patch/scale): drift."""
    entries = [
        m
        for m in ((current or {}).get("metadata") or {}).get("managedFields") or ()
        if m.get("manager") == manager
    ]
    if entries:
        return all(m.get("operation") == "Update" for m in entries)
    # no live copy to look at: the API names Update managers with their "using <version>"
    return any(f'"{manager}" using ' in c.get("message", "") for c in error.causes)


def _action(response: Response, current: JsonObject | None) -> Action:
    if response.status == 201:
        return Action.CREATED
    before = ((current or {}).get("metadata") or {}).get("resourceVersion")
    after = (response.body.get("metadata") or {}).get("resourceVersion")
    if before is not None and before == after:
        return Action.UNCHANGED
    return Action.CONFIGURED


def _conflict_message(ref: ObjectRef, e: ConflictError) -> str:
    fields = sorted({c.get("field", "") for c in e.causes if c.get("field")})
    who = ", ".join(e.managers) or "another field manager"
    return (
        f"{ref}: conflict with field manager {who} on {', '.join(fields) or 'some fields'}; "
        "not taken over without force (--force-conflicts)"
    )


def _ensure_namespaces(
    client: KubeClient, live: LiveState, target: InstanceTarget, objects: list[JsonObject]
) -> list[ChangeSetEntry]:
    """Create the namespaces the instance needs that neither exist nor are in its objects."""
    declared = {ObjectRef.of(o).name for o in objects if o.get("kind") == "Namespace"}
    needed = _namespaces_needed(target, objects) - declared
    live.prefetch(ObjectRef.of(o) for o in objects if o.get("kind") not in FIRST_STAGE_KINDS)
    missing = sorted(n for n in needed if not live.namespace_exists(n))
    entries: list[ChangeSetEntry] = []
    for name in missing:
        ns: JsonObject = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {MANAGED_BY: MANAGER_NAME}},
        }
        ref = ObjectRef.of(ns)
        try:
            response = client.apply(ns)
        except KubeError as e:
            entries.append(ChangeSetEntry.for_ref(target.instance, ref, Action.FAILED, str(e)))
            continue
        live.remember(response.body)
        entries.append(
            ChangeSetEntry.for_ref(target.instance, ref, Action.CREATED, "namespace was missing")
        )
    return entries


def _namespaces_needed(target: InstanceTarget, objects: list[JsonObject]) -> set[str]:
    """The instance's namespace and every namespace its objects live in."""
    return ({ObjectRef.of(o).namespace for o in objects} | {target.namespace}) - {""}


def place_objects(client: KubeClient, target: InstanceTarget) -> list[JsonObject]:
    """Copies of the target's objects with namespaces right for their scope.

    Render cannot know the scope of custom kinds; discovery (or a CRD in the same
    instance) does. Cluster-scoped objects lose a namespace, namespaced ones get the
    instance's when they have none.
    """
    return [_placed(client, target, o) for o in target.objects]


def _placed(client: KubeClient, target: InstanceTarget, obj: Mapping[str, Any]) -> JsonObject:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    namespaced = _is_namespaced(client, out, list(target.objects))
    if not namespaced:
        meta.pop("namespace", None)
    elif not meta.get("namespace"):
        meta["namespace"] = target.namespace
    out["metadata"] = meta
    return out


def _is_namespaced(
    client: KubeClient, obj: Mapping[str, Any], siblings: Iterable[Mapping[str, Any]]
) -> bool:
    ref = ObjectRef.of(obj)
    try:
        return client.resource(ref.api_version, ref.kind).namespaced
    except UnknownKind:
        for crd in siblings:
            spec = crd.get("spec") or {}
            if crd.get("kind") == "CustomResourceDefinition" and (
                (spec.get("names") or {}).get("kind") == ref.kind
                and ref.api_version in crd_api_versions(crd)
            ):
                return bool(spec.get("scope", "Namespaced") == "Namespaced")
        return bool(ref.namespace)
    except KubeApiError:
        return bool(ref.namespace)


def _namespace_allowed(target: InstanceTarget, limits: Limits) -> bool:
    return limits.namespace_allowed(target.namespace)


def _refused(
    target: InstanceTarget,
    objects: list[JsonObject],
    refused: dict[ObjectRef, str],
    *,
    by_dry_run: bool = False,
) -> InstanceResult:
    """Nothing of the instance is written: the refused objects failed, the rest skipped."""
    skipped = (
        "not applied: another object of the instance was refused by a dry run"
        if by_dry_run
        else "not applied: the instance is outside the cluster limits"
    )
    entries = [
        ChangeSetEntry.for_ref(
            target.instance,
            ObjectRef.of(o),
            Action.FAILED if ObjectRef.of(o) in refused else Action.SKIPPED,
            refused.get(ObjectRef.of(o), skipped),
        )
        for o in apply_order(objects)
    ]
    message = "; ".join(refused.values())
    if not entries:
        entries = [
            ChangeSetEntry.for_ref(target.instance, ref, Action.FAILED, msg)
            for ref, msg in refused.items()
        ]
    reason = "ApplyFailed" if by_dry_run else LimitViolation.reason
    return InstanceResult(target.instance, ChangeSet.of(entries), reason, message)


def _kept_fingerprints(
    fingerprints: Mapping[ObjectRef, str], entries: list[ChangeSetEntry], old: Inventory | None
) -> dict[ObjectRef, str]:
    """What the new inventory lists: applied objects with their fingerprints."""
    outcome = {e.ref: e.action for e in entries}
    kept: dict[ObjectRef, str] = {}
    for ref, fp in fingerprints.items():
        action = outcome.get(ref)
        if action in (Action.CREATED, Action.CONFIGURED, Action.UNCHANGED):
            kept[ref] = fp
        elif old is not None and ref in old.objects:
            kept[ref] = ""  # failed: keep it listed, and re-apply it next pass
    return kept


def _owner(current: Mapping[str, Any] | None) -> str:
    labels = ((current or {}).get("metadata") or {}).get("labels") or {}
    return str(labels.get(INSTANCE_LABEL, ""))


def _first_failure(entries: list[ChangeSetEntry]) -> str:
    failed = [e for e in entries if e.action is Action.FAILED]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return (failed[0].message + more) if failed else ""
