"""Deletion: DELETE answers, finalizers, propagation policies, the GC and namespace controllers.

What a DELETE does and answers follows kube-apiserver's generic registry:

- an object without finalizers is removed at once; the answer is ``200`` with the
  removed object for the kinds whose storage returns it (Namespace, Pod, Service,
  ServiceAccount, PersistentVolumeClaim), else a ``Status`` ``Success`` naming it;
- an object with finalizers only gets ``deletionTimestamp`` (and ``generation`` + 1);
  the answer is that object with ``200`` (``202`` only when the deprecated
  ``orphanDependents: false`` was sent), and removing its last finalizer removes it
  (https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/);
- ``propagationPolicy: Orphan`` adds the ``orphan`` finalizer, ``Foreground`` the
  ``foregroundDeletion`` one, ``Background`` removes both; without a policy the
  object's own GC finalizers, then the kind's default (``Orphan`` for batch/v1 Jobs)
  decide (https://kubernetes.io/docs/concepts/architecture/garbage-collection/).

The garbage collector then acts at once, as a cluster's would a moment later:
an ``orphan`` owner's dependents lose their ownerReference before the finalizer is
dropped; a ``foregroundDeletion`` owner's dependents are deleted (in the foreground
themselves when they own objects) and the owner stays until no dependent with
``blockOwnerDeletion: true`` is left; a removed owner's dependents are deleted unless
another live owner keeps them, in which case only the dangling reference goes. A
dependent naming an owner that does not exist (never did, or lives in another
namespace) is collected the same way as soon as it is written.

A deleted namespace turns ``Terminating``; the namespace controller deletes its
content (background propagation), reports what is left in the conditions
``NamespaceDeletionDiscoveryFailure``, ``NamespaceDeletionGroupVersionParsingFailure``,
``NamespaceDeletionContentFailure``, ``NamespaceContentRemaining`` and
``NamespaceFinalizersRemaining``, and once the namespace is empty removes the
``kubernetes`` finalizer from ``spec.finalizers`` and with it the namespace
(https://kubernetes.io/docs/tasks/administer-cluster/namespaces/). A second DELETE
of a terminating namespace is ``409``.

The controllers listen to the store and work through a queue, so every cascade is
done before the request that caused it returns. ``server.py`` calls
:meth:`Lifecycle.delete` and :meth:`Lifecycle.delete_collection`; CRD kinds are
(un)registered here too.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.sandbox import crdfinalizer, crds, priorities
from reconciler.sandbox.api import SandboxApi, present
from reconciler.sandbox.apierrors import (
    ApiError,
    conflict,
    field_errors,
    success_status,
    unsupported_dry_run,
)
from reconciler.sandbox.apply import now
from reconciler.sandbox.copying import clone
from reconciler.sandbox.kinds import (
    CLAIMS,
    CRDS,
    JOBS,
    NAMESPACES,
    PODS,
    SERVICE_ACCOUNTS,
    SERVICES,
    Kind,
)
from reconciler.sandbox.namespaces import check_deletable
from reconciler.sandbox.selectors import Matcher
from reconciler.sandbox.store import Resource, StoredEvent
from reconciler.sandbox.termination import mark_terminating, plan_pod_delete, requested_grace

ObjectKey = tuple[Resource, str, str]  # resource, namespace, name

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
NAMESPACE_FINALIZER = "kubernetes"
POLICIES = ("Foreground", "Background", "Orphan")

# Registries with ReturnDeletedObject: a DELETE answers with the object, not a Status.
_RETURNS_OBJECT: frozenset[Resource] = frozenset(
    {
        NAMESPACES,
        PODS,
        SERVICES,
        SERVICE_ACCOUNTS,
        CLAIMS,
    }
)
# DefaultGarbageCollectionPolicy OrphanDependents (batch/v1 keeps it for compatibility).
_ORPHAN_BY_DEFAULT: frozenset[Resource] = frozenset({JOBS})
_STILL_TERMINATING = (
    "The system is ensuring all content is removed from this namespace.  "
    "Upon completion, this namespace will automatically be purged by the system."
)
# The namespace controller's conditions and the text of their "all well" variant.
_NAMESPACE_CONDITIONS = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered",
     "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentRemoved", "All content successfully removed"),
)  # fmt: skip

# ("namespace", name) | ("owner", uid) | ("removed", uid) | ("crd", name)
Task = tuple[str, str]


@dataclass(frozen=True)
class DeleteOptions:
    """A DELETE's options (the ``DeleteOptions`` body, or the query without one)."""

    propagation: str | None = None
    orphan_dependents: bool | None = None
    preconditions: Mapping[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    grace_period: int | None = None  # gracePeriodSeconds (pods: termination.py)

    @classmethod
    def parse(cls, body: Any, query: Mapping[str, str]) -> DeleteOptions:
        """Decode and validate; like the API server, a body makes the query's options ignored."""
        if body is None:
            source: dict[str, Any] = {}
            if "propagationPolicy" in query:
                source["propagationPolicy"] = query["propagationPolicy"]
            if "orphanDependents" in query:
                source["orphanDependents"] = _parse_bool(query["orphanDependents"])
            if "dryRun" in query:
                source["dryRun"] = [query["dryRun"]]
            if "gracePeriodSeconds" in query:
                source["gracePeriodSeconds"] = _parse_int(query["gracePeriodSeconds"])
        elif isinstance(body, dict):
            source = body
        else:
            raise ApiError(400, "DeleteOptions must be an object")
        policy = source.get("propagationPolicy")
        orphan = source.get("orphanDependents")
        dry_run = source.get("dryRun") or []
        preconditions = source.get("preconditions") or {}
        grace = source.get("gracePeriodSeconds")
        if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
            raise ApiError(400, "DeleteOptions.gracePeriodSeconds must be an integer")
        if policy is not None and not isinstance(policy, str):
            raise ApiError(400, "DeleteOptions.propagationPolicy must be a string")
        if orphan is not None and not isinstance(orphan, bool):
            raise ApiError(400, "DeleteOptions.orphanDependents must be a boolean")
        if not isinstance(dry_run, list) or not isinstance(preconditions, dict):
            raise ApiError(400, "DeleteOptions.dryRun must be a list, preconditions an object")
        errors: list[tuple[str, str, str]] = []
        if orphan is not None and policy is not None:
            why = "orphanDependents and deletionPropagation cannot be both set"
            errors.append(
                ("FieldValueInvalid", "propagationPolicy", f'Invalid value: "{policy}": {why}')
            )
        if policy is not None and policy not in POLICIES:
            allowed = ", ".join(f'"{p}"' for p in (*POLICIES, "nil"))
            body_text = f'Unsupported value: "{policy}": supported values: {allowed}'
            errors.append(("FieldValueNotSupported", "propagationPolicy", body_text))
        dry_run_error = unsupported_dry_run(dry_run)
        if dry_run_error is not None:
            errors.append(dry_run_error)
        if errors:
            raise field_errors(("meta.k8s.io", "DeleteOptions"), "", errors)
        return cls(policy, orphan, preconditions, bool(dry_run), requested_grace(grace))


def _parse_int(raw: str) -> int:
    """Go's ``strconv.ParseInt``, which an integer query parameter goes through."""
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def _parse_bool(raw: str) -> bool:
    """Go's ``strconv.ParseBool``, which query parameters go through."""
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ApiError(400, f'strconv.ParseBool: parsing "{raw}": invalid syntax')


@dataclass(frozen=True)
class DeleteResult:
    """The answer to a DELETE: its body and HTTP status."""

    body: dict[str, Any]
    code: int = 200


def _first(finalizers: list[str], yes: str, no: str, default: bool) -> bool:
    for name in finalizers:
        if name == yes:
            return True
        if name == no:
            return False
    return default


def gc_finalizers(current: list[str], options: DeleteOptions, default_orphan: bool) -> list[str]:
    """The finalizers a delete leaves (``deletionFinalizersForGarbageCollection``)."""
    if options.orphan_dependents is not None:
        orphan, foreground = options.orphan_dependents, False
    elif options.propagation is not None:
        orphan = options.propagation == "Orphan"
        foreground = options.propagation == "Foreground"
    else:
        orphan = _first(current, ORPHAN, FOREGROUND, default_orphan)
        foreground = _first(current, FOREGROUND, ORPHAN, False)
    wanted = [f for f in current if f not in (ORPHAN, FOREGROUND)]
    wanted += [ORPHAN] if orphan else []
    wanted += [FOREGROUND] if foreground else []
    return current if set(wanted) == set(current) else wanted


def _refs(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, dict)]


def _uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"].get("uid", ""))


class Lifecycle:
    """Deletes objects the way an API server plus its GC and namespace controllers would."""

    def __init__(self, api: SandboxApi) -> None:
        self.api = api
        self._queue: OrderedDict[Task, None] = OrderedDict()
        self._draining = False
        # uids of owners being deleted with the orphan or foreground finalizer, kept from
        # the store's events: the only owners ``_process_owner`` acts on, so every other
        # queued owner (each pod created or deleted queues its ReplicaSet) costs no scan
        self._finalizing: set[str] = set()
        # the stored objects naming each uid in their ownerReferences (how many times),
        # and where the object with each uid is: kept from the store's events, so the
        # collector finds an owner's dependents and a dependent's owners without a scan
        # of every object in the cluster (each ReplicaSet deleted cost two of them)
        self._dependents_of: dict[str, Counter[ObjectKey]] = {}
        self._where: dict[str, ObjectKey] = {}
        # the custom resources of each CRD being deleted, and that CRD's name
        self._cleanups: dict[Resource, str] = {}
        for resource, obj in api.store.iter_all():
            self._index(resource, obj, +1)
        api.store.listeners.append(self._on_event)

    def _index(self, resource: Resource, obj: Mapping[str, Any] | None, step: int) -> None:
        if obj is None:
            return
        meta = obj["metadata"]
        key = (resource, str(meta.get("namespace", "")), str(meta["name"]))
        uid = _uid(obj)
        if step > 0:
            self._where[uid] = key
        elif self._where.get(uid) == key:
            del self._where[uid]
        for ref in _refs(obj):
            owner = str(ref.get("uid"))
            dependents = self._dependents_of.setdefault(owner, Counter())
            dependents[key] += step
            if dependents[key] <= 0:
                del dependents[key]
                if not dependents:
                    del self._dependents_of[owner]

    # --- the API ----------------------------------------------------------------------

    def delete(
        self, kind: Kind, namespace: str, name: str, options: DeleteOptions | None = None
    ) -> DeleteResult:
        opts = options or DeleteOptions()
        obj = self.api.read(kind, namespace, name)
        check_deletable(kind.resource, name)
        priorities.check_deletable(kind.resource, name)
        if kind.resource == NAMESPACES:
            return self._delete_namespace(kind, obj, opts)
        if kind.resource == CRDS and not obj["metadata"].get("deletionTimestamp"):
            obj = crdfinalizer.marked_for_deletion(obj)
        self._check_preconditions(kind, obj, opts.preconditions)
        after, removed = self._apply(kind.resource, obj, opts)
        return self._answer(kind, after, removed, opts)

    def delete_collection(
        self,
        kind: Kind,
        namespace: str | None,
        labels: Matcher,
        fields: Matcher,
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]:
        """Delete every matching object; the answer is the list as it was before."""
        listed = self.api.list(kind, namespace, labels, fields)
        for item in listed["items"]:
            meta = item["metadata"]
            try:
                self.delete(kind, meta.get("namespace", ""), meta["name"], options)
            except ApiError as e:
                if e.code != 404:  # gone meanwhile (a cascade): as DeleteCollection ignores
                    raise
        return listed

    def _answer(
        self, kind: Kind, obj: dict[str, Any], removed: bool, opts: DeleteOptions
    ) -> DeleteResult:
        if not removed:
            return DeleteResult(present(kind, obj), 202 if opts.orphan_dependents is False else 200)
        if kind.resource in _RETURNS_OBJECT:
            return DeleteResult(present(kind, obj))
        meta = obj["metadata"]
        return DeleteResult(success_status(meta["name"], kind.group, kind.plural, _uid(obj)))

    def _check_preconditions(
        self, kind: Kind, obj: dict[str, Any], preconditions: Mapping[str, Any]
    ) -> None:
        meta = obj["metadata"]
        wanted_uid, wanted_rv = preconditions.get("uid"), preconditions.get("resourceVersion")
        why = ""
        if wanted_uid and str(wanted_uid) != _uid(obj):
            why = (
                f"the UID in the precondition ({wanted_uid}) does not match the UID in record "
                f"({_uid(obj)}). The object might have been deleted and then recreated"
            )
        elif wanted_rv and str(wanted_rv) != meta.get("resourceVersion"):
            why = (
                f"the ResourceVersion in the precondition ({wanted_rv}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion')}). "
                "The object might have been modified"
            )
        if why:
            raise conflict(kind.group, kind.kind, meta["name"], why)

    def _apply(
        self, resource: Resource, obj: dict[str, Any], opts: DeleteOptions
    ) -> tuple[dict[str, Any], bool]:
        """Delete ``obj``: (the object after, whether it is gone); finalizers keep it, marked,
        and a running pod's grace period keeps it Terminating (``termination.py``)."""
        meta = obj["metadata"]
        current = list(meta.get("finalizers") or [])
        if resource == PODS:
            plan = plan_pod_delete(obj, opts.grace_period)
            if plan.pending:  # finalizers are not changed while a deletion is pending
                return obj, False
            if plan.grace > 0 or (meta.get("deletionTimestamp") and current):
                marked = clone(obj)
                if not meta.get("deletionTimestamp"):
                    wanted = gc_finalizers(current, opts, False)
                    if wanted != current:
                        marked["metadata"]["finalizers"] = wanted
                mark_terminating(marked["metadata"], plan.grace)
                if marked == obj or opts.dry_run:
                    return marked, False
                return self.api.store.put(resource, marked, handover=True), False
        wanted = gc_finalizers(current, opts, resource in _ORPHAN_BY_DEFAULT)
        if wanted:
            marked = clone(obj)
            mark = marked["metadata"]
            mark["finalizers"] = wanted
            if not mark.get("deletionTimestamp"):
                mark["deletionTimestamp"] = now()
                if int(mark.get("generation") or 0) > 0:
                    mark["generation"] = int(mark["generation"]) + 1
            mark["deletionGracePeriodSeconds"] = 0
            if marked == obj or opts.dry_run:
                return marked, False
            return self.api.store.put(resource, marked, handover=True), False
        if not opts.dry_run:
            self.api.store.remove(resource, meta.get("namespace", ""), meta["name"])
        return obj, True

    # --- namespaces ---------------------------------------------------------------------

    def _delete_namespace(
        self, kind: Kind, ns: dict[str, Any], opts: DeleteOptions
    ) -> DeleteResult:
        """The namespace registry's Delete: mark it Terminating; purge only once finalized."""
        meta, name = ns["metadata"], ns["metadata"]["name"]
        for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = opts.preconditions.get(field_name)
            if wanted and str(wanted) != str(meta.get(field_name)):
                why = (
                    f"Precondition failed: {label} in precondition: {wanted}, "
                    f"{label} in object meta: {meta.get(field_name)}"
                )
                raise conflict("", "namespaces", name, why)
        if meta.get("deletionTimestamp"):
            if (ns.get("spec") or {}).get("finalizers"):
                raise conflict("", "namespaces", name, _STILL_TERMINATING)
            after, removed = self._apply(NAMESPACES, ns, opts)
            return self._answer(kind, after, removed, opts)
        marked = clone(ns)
        mark = marked["metadata"]
        mark["deletionTimestamp"] = now()
        marked["status"] = {**(marked.get("status") or {}), "phase": "Terminating"}
        current = list(mark.get("finalizers") or [])
        wanted = gc_finalizers(current, opts, False)
        if wanted:
            mark["finalizers"] = wanted
        else:
            mark.pop("finalizers", None)
        code = 202 if opts.orphan_dependents is False else 200
        if opts.dry_run:
            return DeleteResult(present(kind, marked), code)
        stored = self.api.store.put(NAMESPACES, marked, handover=True)
        return DeleteResult(present(kind, stored), code)

    def _sync_namespace(self, name: str) -> None:
        """One pass of the namespace controller over a terminating namespace."""
        ns = self.api.store.get(NAMESPACES, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        background = DeleteOptions(propagation="Background")
        for resource, obj in self._contents(name):
            self._apply(resource, obj, background)
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for (group, plural), obj in self._contents(name):
            remaining[f"{plural}.{group}"] = remaining.get(f"{plural}.{group}", 0) + 1
            for finalizer in obj["metadata"].get("finalizers") or []:
                finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        ns = self._set_conditions(ns, remaining, finalizers)
        if remaining:
            return
        spec = ns.get("spec") or {}
        left = [f for f in spec.get("finalizers") or [] if f != NAMESPACE_FINALIZER]
        if not left and not ns["metadata"].get("finalizers"):
            self.api.store.remove(NAMESPACES, "", name)
        elif left != spec.get("finalizers"):
            self.api.store.put(NAMESPACES, {**ns, "spec": {**spec, "finalizers": left}})

    def _contents(self, namespace: str) -> Iterator[tuple[Resource, dict[str, Any]]]:
        for resource, obj in list(self.api.store.iter_all()):
            if resource != NAMESPACES and obj["metadata"].get("namespace") == namespace:
                yield resource, obj

    def _set_conditions(
        self, ns: dict[str, Any], remaining: Mapping[str, int], finalizers: Mapping[str, int]
    ) -> dict[str, Any]:
        """Write the controller's five conditions when they changed; returns the namespace."""
        failing: dict[str, tuple[str, str]] = {}
        if remaining:
            listed = ", ".join(
                sorted(f"{r} has {n} resource instances" for r, n in remaining.items())
            )
            failing["NamespaceContentRemaining"] = (
                "SomeResourcesRemain",
                f"Some resources are remaining: {listed}",
            )
        if finalizers:
            listed = ", ".join(
                sorted(f"{f} in {n} resource instances" for f, n in finalizers.items())
            )
            failing["NamespaceFinalizersRemaining"] = (
                "SomeFinalizersRemain",
                f"Some content in the namespace has finalizers remaining: {listed}",
            )
        status = clone(ns.get("status") or {})
        conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
        changed = False
        for kind, ok_reason, ok_message in _NAMESPACE_CONDITIONS:
            state, (reason, message) = (
                ("True", failing[kind]) if kind in failing else ("False", (ok_reason, ok_message))
            )
            old = next((c for c in conditions if c.get("type") == kind), None)
            if old is None:
                conditions.append(
                    {
                        "type": kind,
                        "status": state,
                        "lastTransitionTime": now(),
                        "reason": reason,
                        "message": message,
                    }
                )
                changed = True
            elif (old.get("status"), old.get("reason"), old.get("message")) != (
                state,
                reason,
                message,
            ):
                if old.get("status") != state:
                    old["lastTransitionTime"] = now()
                old.update(status=state, reason=reason, message=message)
                changed = True
        if not changed:
            return ns
        return self.api.store.put(NAMESPACES, {**ns, "status": status})

    # --- the garbage collector ------------------------------------------------------------

    def _object(self, uid: str) -> tuple[Resource, dict[str, Any]] | None:
        """The stored object with ``uid`` (never to be mutated), and its resource."""
        key = self._where.get(uid)
        if key is None:
            return None
        obj = self.api.store.view_one(*key)
        return (key[0], obj) if obj is not None and _uid(obj) == uid else None

    def _owner_of(self, dep: Mapping[str, Any], uid: str) -> tuple[Resource, dict[str, Any]] | None:
        """``dep``'s owner with ``uid``, or None when the reference is absent: no such
        object, or a namespaced owner in another namespace than a namespaced dependent
        ("A namespaced owner must exist in the same namespace as the dependent. If it
        does not, the owner reference is treated as absent",
        https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents).
        A cluster-scoped dependent naming a namespaced owner stays: that reference is
        unresolvable, not absent."""
        owner = self._object(uid)
        namespace = dep["metadata"].get("namespace", "")
        if owner is None or not namespace:
            return owner
        owner_ns = owner[1]["metadata"].get("namespace", "")
        return owner if not owner_ns or owner_ns == namespace else None

    def _dependents(self, uid: str) -> list[tuple[Resource, dict[str, Any]]]:
        """The stored objects naming ``uid`` in their ownerReferences (in no particular
        order, as the garbage collector's graph gives them)."""
        found = []
        for resource, namespace, name in sorted(self._dependents_of.get(uid, ())):
            obj = self.api.store.view_one(resource, namespace, name)
            if obj is not None and any(r.get("uid") == uid for r in _refs(obj)):
                found.append((resource, obj))
        return found

    def _process_owner(self, uid: str) -> None:
        """An owner being deleted with the ``orphan`` or ``foregroundDeletion`` finalizer."""
        if uid not in self._finalizing:
            return
        found = self._object(uid)
        if found is None or not found[1]["metadata"].get("deletionTimestamp"):
            return
        resource, owner = found
        finalizers = owner["metadata"].get("finalizers") or []
        if ORPHAN in finalizers:
            for dep_resource, dep in self._dependents(uid):
                self._drop_refs(dep_resource, dep, {uid})
            self._drop_finalizer(resource, uid, ORPHAN)
        elif FOREGROUND in finalizers:
            for dep_resource, dep in self._dependents(uid):
                self._attempt_dependent(dep_resource, dep)
            blocking = any(
                r.get("uid") == uid and r.get("blockOwnerDeletion") is True
                for _, dep in self._dependents(uid)
                for r in _refs(dep)
            )
            if not blocking:
                self._drop_finalizer(resource, uid, FOREGROUND)

    def _attempt_dependent(self, resource: Resource, dep: dict[str, Any]) -> None:
        """``attemptToDeleteItem``: keep a dependent a live owner holds, else delete it."""
        solid: set[str] = set()
        gone: set[str] = set()  # dangling, or waiting for its dependents' deletion
        waiting = False
        for ref in _refs(dep):
            ref_uid = str(ref.get("uid"))
            owner = self._owner_of(dep, ref_uid)
            owner_meta = owner[1]["metadata"] if owner else {}
            if owner is None:
                gone.add(ref_uid)
            elif owner_meta.get("deletionTimestamp") and FOREGROUND in (
                owner_meta.get("finalizers") or []
            ):
                gone.add(ref_uid)
                waiting = True
            else:
                solid.add(ref_uid)
        if solid:
            if gone:
                self._drop_refs(resource, dep, gone)
            return
        finalizers = dep["metadata"].get("finalizers") or []
        if waiting and self._dependents(_uid(dep)):
            policy = "Foreground"
        elif ORPHAN in finalizers:
            policy = "Orphan"
        elif FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self._apply(resource, dep, DeleteOptions(propagation=policy))

    def _drop_refs(self, resource: Resource, dep: dict[str, Any], uids: set[str]) -> None:
        current = self.api.store.get(
            resource, dep["metadata"].get("namespace", ""), dep["metadata"]["name"]
        )
        if current is None:
            return
        kept = [r for r in _refs(current) if r.get("uid") not in uids]
        if len(kept) == len(_refs(current)):
            return
        if kept:
            current["metadata"]["ownerReferences"] = kept
        else:
            current["metadata"].pop("ownerReferences", None)
        self.api.store.put(resource, current, handover=True)  # a copy: ``get`` made it

    def _drop_finalizer(self, resource: Resource, uid: str, finalizer: str) -> None:
        """Remove one finalizer, and the object with it when it was the last."""
        found = self._object(uid)
        if found is None:
            return
        obj = clone(found[1])
        meta = obj["metadata"]
        left = [f for f in meta.get("finalizers") or [] if f != finalizer]
        if left == (meta.get("finalizers") or []):
            return
        finalized = resource != NAMESPACES or not (obj.get("spec") or {}).get("finalizers")
        finalized = finalized and not meta.get("deletionGracePeriodSeconds")  # a pod's grace
        if not left and meta.get("deletionTimestamp") and finalized:
            self.api.store.remove(resource, meta.get("namespace", ""), meta["name"])
            return
        meta["finalizers"] = left
        self.api.store.put(resource, obj, handover=True)  # a copy of the stored object

    # --- event handling ----------------------------------------------------------------------

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource == CRDS:
            self._sync_crd(event)
            if event.type != "DELETED" and crdfinalizer.cleaning_up(event.obj):
                self._enqueue(("crd", event.obj["metadata"]["name"]))
        elif event.type == "DELETED" and event.resource in self._cleanups:
            self._enqueue(("crd", self._cleanups[event.resource]))
        meta = event.obj["metadata"]
        was = event.old["metadata"] if event.old is not None else None
        # a status write shares the owner list with the object it replaces: no change
        shared = (
            event.type != "DELETED"
            and was is not None
            and was.get("ownerReferences") is meta.get("ownerReferences")
        )
        old_refs, refs = ([], []) if shared else (_refs(event.old), _refs(event.obj))
        if (
            event.type == "DELETED"
            or was is None
            or refs != old_refs
            or was.get("uid") != meta.get("uid")
        ):
            # most events are status writes, which change neither the uid nor the
            # owners: taking such an object out of the index and putting it back
            # was half of the collector's time during an install
            self._index(event.resource, event.old, -1)
            if event.type != "DELETED":
                self._index(event.resource, event.obj, +1)
        if event.type == "DELETED":
            self._finalizing.discard(_uid(event.obj))
            self._enqueue(("removed", _uid(event.obj)))
        elif meta.get("deletionTimestamp") and {ORPHAN, FOREGROUND} & set(
            meta.get("finalizers") or []
        ):
            self._finalizing.add(_uid(event.obj))
            self._enqueue(("owner", _uid(event.obj)))
        else:
            self._finalizing.discard(_uid(event.obj))
        if event.type == "DELETED" or old_refs != refs:
            # a dependent gone, or one that let go: its foreground owners may be done
            for ref in old_refs + refs:
                self._enqueue(("owner", str(ref.get("uid"))))
            if event.type != "DELETED":
                self._check_owners(event.obj)
        if event.resource == NAMESPACES and event.type != "DELETED":
            if meta.get("deletionTimestamp"):
                self._enqueue(("namespace", meta["name"]))
        elif event.namespace:
            ns = self.api.store.view_one(NAMESPACES, "", event.namespace)
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self._enqueue(("namespace", event.namespace))
        self._drain()

    def _check_owners(self, dep: Mapping[str, Any]) -> None:
        """A dependent naming an owner that does not exist (never did, or is gone) is
        collected like the dependents of a deleted owner: "the garbage collector ...
        deletes the dependent" once every owner is verified absent
        (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents)."""
        for ref in _refs(dep):
            uid = str(ref.get("uid"))
            if self._owner_of(dep, uid) is None:
                self._enqueue(("removed", uid))

    def _enqueue(self, task: Task) -> None:
        self._queue[task] = None

    def _drain(self) -> None:
        """Run queued controller work; events raised meanwhile only queue more."""
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue:
                (what, key), _ = self._queue.popitem(last=False)
                if what == "namespace":
                    self._sync_namespace(key)
                elif what == "owner":
                    self._process_owner(key)
                elif what == "crd":
                    self._clean_up_crd(key)
                else:
                    for resource, dep in self._dependents(key):
                        self._attempt_dependent(resource, dep)
        finally:
            self._draining = False

    def _clean_up_crd(self, name: str) -> None:
        """The CRD finalizer's pass: delete every custom resource (each one's finalizers
        may hold it), and drop the CRD's finalizer once none is left."""
        crd = self.api.store.view_one(CRDS, "", name)
        if crd is None or not crdfinalizer.cleaning_up(crd):
            return
        resource = crdfinalizer.resource_of(crd)
        self._cleanups[resource] = name
        if crdfinalizer.terminating_condition(crd).get("reason") != crdfinalizer.IN_PROGRESS[0]:
            crd = self.api.store.put(
                CRDS, crdfinalizer.with_terminating(crd, *crdfinalizer.IN_PROGRESS)
            )
        for obj in self.api.store.list(resource):
            if not obj["metadata"].get("deletionTimestamp"):
                self._apply(resource, obj, DeleteOptions())
        if not self.api.store.list(resource):
            del self._cleanups[resource]
            self._drop_finalizer(CRDS, _uid(crd), crdfinalizer.CLEANUP)

    def _sync_crd(self, event: StoredEvent) -> None:
        kinds = crds.kinds_of(event.obj)
        if event.type != "DELETED":
            if kinds:
                self.api.kinds.register(kinds)
            return
        spec = event.obj.get("spec") or {}
        group, plural = str(spec.get("group")), str((spec.get("names") or {}).get("plural"))
        self.api.kinds.unregister(group, plural)
        for obj in self.api.store.list((group, plural)):
            self.api.store.remove(
                (group, plural), obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
            )
