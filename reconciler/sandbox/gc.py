"""Deletion: finalizers, namespace cascades, ownerReference garbage collection, CRDs.

Follows https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/
(a delete of an object with finalizers only sets ``deletionTimestamp``; removing the
last finalizer deletes it), https://kubernetes.io/docs/concepts/architecture/garbage-collection/
(deleting an owner deletes its dependents, ``propagationPolicy: Orphan`` keeps them)
and namespace termination (a deleted namespace is ``Terminating`` until everything
in it is gone). It listens to the store, so a removal from anywhere cascades.
``server.py`` calls :meth:`Lifecycle.delete`; CRD kinds are (un)registered here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox import crds
from reconciler.sandbox.api import SandboxApi, WriteOptions, present
from reconciler.sandbox.apierrors import conflict
from reconciler.sandbox.apply import now
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.namespaces import check_deletable
from reconciler.sandbox.selectors import Matcher
from reconciler.sandbox.store import Resource, StoredEvent

_NAMESPACES: Resource = ("", "namespaces")
_CRDS: Resource = ("apiextensions.k8s.io", "customresourcedefinitions")


class Lifecycle:
    """Deletes objects the way an API server plus its GC controller would."""

    def __init__(self, api: SandboxApi) -> None:
        self.api = api
        api.store.listeners.append(self._on_event)

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        opts: WriteOptions,
        *,
        propagation: str = "Background",
        preconditions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        obj = self.api.read(kind, namespace, name)
        check_deletable(kind.resource, name)
        self._check_preconditions(kind, obj, preconditions or {})
        if opts.dry_run:
            return present(kind, obj)
        if propagation == "Orphan":
            self._orphan(obj["metadata"]["uid"])
        return present(kind, self._delete_object(kind.resource, obj))

    def delete_collection(
        self,
        kind: Kind,
        namespace: str | None,
        labels: Matcher,
        fields: Matcher,
        opts: WriteOptions,
    ) -> dict[str, Any]:
        listed = self.api.list(kind, namespace, labels, fields)
        deleted = []
        for item in listed["items"]:
            meta = item["metadata"]
            deleted.append(self.delete(kind, meta.get("namespace", ""), meta["name"], opts))
        return {**listed, "items": deleted}

    def _check_preconditions(
        self, kind: Kind, obj: dict[str, Any], preconditions: Mapping[str, Any]
    ) -> None:
        meta = obj["metadata"]
        for field in ("uid", "resourceVersion"):
            wanted = preconditions.get(field)
            if wanted and str(wanted) != str(meta.get(field)):
                raise conflict(
                    kind.group,
                    kind.plural,
                    meta["name"],
                    f"Precondition failed: {field}: {wanted}, actual: {meta.get(field)}",
                )

    def _delete_object(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Remove ``obj`` now, or mark it when finalizers (or namespace contents) hold it."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if resource == _NAMESPACES:
            return self._terminate_namespace(obj)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            meta["deletionTimestamp"] = now()
            meta["deletionGracePeriodSeconds"] = 0
            return self.api.store.put(resource, obj)
        gone = self.api.store.remove(resource, namespace, meta["name"])
        return gone or obj

    def _terminate_namespace(self, ns: dict[str, Any]) -> dict[str, Any]:
        name = ns["metadata"]["name"]
        if not ns["metadata"].get("deletionTimestamp"):
            ns["metadata"]["deletionTimestamp"] = now()
            ns["status"] = {"phase": "Terminating"}
            ns = self.api.store.put(_NAMESPACES, ns)
        for resource, obj in list(self.api.store.iter_all()):
            if resource != _NAMESPACES and obj["metadata"].get("namespace") == name:
                self._delete_object(resource, obj)
        return self._finish_namespace(name) or ns

    def _finish_namespace(self, name: str) -> dict[str, Any] | None:
        """Remove a terminating namespace once nothing is left in it."""
        ns = self.api.store.get(_NAMESPACES, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        if ns["metadata"].get("finalizers"):
            return None
        for resource, obj in self.api.store.iter_all():
            if resource != _NAMESPACES and obj["metadata"].get("namespace") == name:
                return None
        return self.api.store.remove(_NAMESPACES, "", name)

    def _orphan(self, uid: str) -> None:
        for resource, obj in list(self.api.store.iter_all()):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == uid for r in refs):
                changed = {**obj, "metadata": dict(obj["metadata"])}
                kept = [r for r in refs if r.get("uid") != uid]
                changed["metadata"]["ownerReferences"] = kept
                if not kept:
                    del changed["metadata"]["ownerReferences"]
                self.api.store.put(resource, changed)

    def _collect_dependents(self, owner: dict[str, Any]) -> None:
        uid = owner["metadata"].get("uid")
        alive = {obj["metadata"].get("uid") for _, obj in self.api.store.iter_all()}
        for resource, obj in list(self.api.store.iter_all()):
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == uid for r in refs):
                continue
            if any(r.get("uid") in alive for r in refs if r.get("uid") != uid):
                self._orphan_one(resource, obj, str(uid))
            else:
                current = self.api.store.get(
                    resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
                )
                if current is not None:
                    self._delete_object(resource, current)

    def _orphan_one(self, resource: Resource, obj: dict[str, Any], uid: str) -> None:
        refs = [r for r in obj["metadata"]["ownerReferences"] if r.get("uid") != uid]
        self.api.store.put(
            resource, {**obj, "metadata": {**obj["metadata"], "ownerReferences": refs}}
        )

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource == _CRDS:
            self._sync_crd(event)
        if event.type != "DELETED":
            return
        self._collect_dependents(event.obj)
        if event.namespace:
            self._finish_namespace(event.namespace)

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
