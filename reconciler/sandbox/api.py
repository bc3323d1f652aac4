"""The API machinery behind every route: validation, metadata, writes and reads.

``server.py`` parses HTTP into calls on :class:`SandboxApi`; this module decides
what a real API server would: names and namespaces are checked, bodies are defaulted
(``defaults.py``) and given what storage assigns (``allocation.py``), ``uid``,
``creationTimestamp``, ``generation`` (on kinds that have one) and ``resourceVersion``
are kept by the server (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions),
a stale resourceVersion is a 409, ``/status`` writes touch only status and main
writes never touch it, a no-op write changes nothing, and ``dryRun`` stores
nothing. Deletion and garbage collection live in ``gc.py``; apply in ``apply.py``.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.sandbox import crdfinalizer, crds, crvalidation, storage
from reconciler.sandbox.allocation import (
    allocate_service,
    job_selector,
    service_ips,
    service_node_ports,
)
from reconciler.sandbox.apierrors import ApiError, already_exists, conflict, invalid, not_found
from reconciler.sandbox.apply import now, server_side_apply, track_update
from reconciler.sandbox.copying import clone
from reconciler.sandbox.defaults import apply_defaults, generation_changes, tracks_generation
from reconciler.sandbox.kinds import (
    CLAIMS,
    CLASSES,
    CRDS,
    JOBS,
    NAMESPACES,
    SERVICES,
    Kind,
    KindRegistry,
)
from reconciler.sandbox.patch import apply_patch
from reconciler.sandbox.rules import check_rules
from reconciler.sandbox.selectors import Matcher
from reconciler.sandbox.store import DEFAULT_HISTORY_LIMIT, Store, Tally
from reconciler.sandbox.validation import check_object

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Set by the server, never taken from a client's body.
_SYSTEM_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
# What a real API server returns right after create; the official client's models
# require some of these fields, so ``status: {}`` would not deserialize.
_INITIAL_STATUS: dict[str, dict[str, Any]] = {
    "Pod": {"phase": "Pending"},
    "PersistentVolumeClaim": {"phase": "Pending"},
    "PersistentVolume": {"phase": "Pending"},
    "Service": {"loadBalancer": {}},
    "Ingress": {"loadBalancer": {}},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "ReplicaSet": {"replicas": 0},
    "ReplicationController": {"replicas": 0},
    "DaemonSet": {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    "HorizontalPodAutoscaler": {"currentReplicas": 0, "desiredReplicas": 0},
    "PodDisruptionBudget": {
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "disruptionsAllowed": 0,
        "expectedPods": 0,
    },
}
Decode = Callable[[dict[str, Any]], dict[str, Any]]
# An admission plugin's look at a new object (``admission.py``): it may change the
# object (mutating) or refuse it with an ApiError (validating).
Admit = Callable[["Kind", dict[str, Any]], None]


@dataclass(frozen=True)
class WriteOptions:
    """Query parameters every write accepts."""

    field_manager: str = ""
    dry_run: bool = False
    force: bool = False


def present(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as served at ``kind``'s version: apiVersion and kind first.

    A custom resource is pruned and defaulted by its served version's schema.
    """
    if kind.schema is not None:
        obj = crvalidation.on_read(kind, obj)
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": kind.api_version, "kind": kind.kind, **rest}


_MISSING = object()


def _unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Equal but for what changes on every write (apiVersion, rv, managedFields times).

    Compared in place: copying both objects to strip those fields first was the
    biggest cost of a controller's status write.
    """
    if any(
        old.get(k, _MISSING) != new.get(k, _MISSING)
        for k in old.keys() | new.keys()
        if k not in ("apiVersion", "metadata")
    ):
        return False
    om, nm = old.get("metadata", {}), new.get("metadata", {})
    if any(
        om.get(k, _MISSING) != nm.get(k, _MISSING)
        for k in om.keys() | nm.keys()
        if k not in ("resourceVersion", "managedFields")
    ):
        return False
    of, nf = om.get("managedFields", _MISSING), nm.get("managedFields", _MISSING)
    if isinstance(of, list) and isinstance(nf, list):
        return len(of) == len(nf) and all(
            _untimed(a) == _untimed(b) for a, b in zip(of, nf, strict=True)
        )
    return bool(of == nf)


def _untimed(entry: Any) -> Any:
    if isinstance(entry, dict) and "time" in entry:
        return {k: v for k, v in entry.items() if k != "time"}
    return entry


def _held_ips(service: dict[str, Any]) -> list[str]:
    return service_ips(service.get("spec"))


def _held_node_ports(service: dict[str, Any]) -> list[Any]:
    return service_node_ports(service.get("spec"))


class SandboxApi:
    """One sandbox cluster's state and the rules for changing it."""

    def __init__(self, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.kinds = KindRegistry()
        self.store = Store(history_limit)
        self._services: tuple[Tally, Tally] | None = None
        # run on every create, as kube-apiserver's admission chain: the mutating
        # plugins before validation, the validating ones after it
        self.mutating: list[Admit] = []
        self.validating: list[Admit] = []
        namespace_kind = self.namespace_kind
        for name in SYSTEM_NAMESPACES:
            self.create(namespace_kind, "", {"metadata": {"name": name}}, WriteOptions("sandbox"))

    @property
    def namespace_kind(self) -> Kind:
        kind = self.kinds.lookup("", "v1", "namespaces")
        assert kind is not None
        return kind

    # --- reads ----------------------------------------------------------------------

    def read(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(kind.resource, namespace if kind.namespaced else "", name)
        if obj is None:
            raise not_found(kind.group, kind.plural, name)
        return obj

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        """The object as served, sharing all but its top level with the stored one (a
        read copies nothing: stored objects are replaced on write, never changed, and
        the answer is only serialized)."""
        obj = self.store.view_one(kind.resource, namespace if kind.namespaced else "", name)
        if obj is None:
            raise not_found(kind.group, kind.plural, name)
        return present(kind, obj)

    def list(
        self, kind: Kind, namespace: str | None, labels: Matcher, fields: Matcher
    ) -> dict[str, Any]:
        """The matching objects as served; like :meth:`get`, shared with the store."""
        items = [
            present(kind, obj)
            for obj in self.store.view(kind.resource, namespace if kind.namespaced else None)
            if labels(obj) and fields(obj)
        ]
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": {"resourceVersion": str(self.store.resource_version)},
            "items": items,
        }

    # --- create -----------------------------------------------------------------------

    def create(
        self,
        kind: Kind,
        namespace: str,
        body: Any,
        opts: WriteOptions,
        *,
        tracked: bool = False,
    ) -> dict[str, Any]:
        obj = self._checked_body(kind, body)
        if kind.crd:
            crd = self.store.view_one(CRDS, "", f"{kind.plural}.{kind.group}")
            crdfinalizer.refuse_create(kind, crd)
        meta = obj["metadata"]
        self._place(kind, namespace, meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        self._check_name(kind, meta.get("name"))
        if self.store.view_one(kind.resource, meta.get("namespace", ""), meta["name"]) is not None:
            raise already_exists(kind.group, kind.plural, meta["name"])
        for key in (*_SYSTEM_META, "resourceVersion"):
            meta.pop(key, None)
        if kind.crd and kind.status:
            obj.pop("status", None)  # a CR's status starts absent, written only via /status
        elif kind.status:
            obj["status"] = clone(_INITIAL_STATUS.get(kind.kind, {}))
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now())
        if tracks_generation(kind):
            meta["generation"] = 1
        # decoding defaults the body before ownership is recorded: a creator owns the
        # defaults; an applier's fields were computed from its applied config already
        apply_defaults(kind, obj)
        crvalidation.admit(kind, obj)
        if not tracked:
            track_update(
                None,
                obj,
                manager=opts.field_manager,
                subresource="",
                has_status=kind.status,
                schema=kind.schema,
            )
        self._default(kind, obj)
        self._allocate(kind, obj, None)
        for admit in self.mutating:
            admit(kind, obj)
        check_rules(kind, obj, None)
        for admit in self.validating:
            admit(kind, obj)
        if opts.dry_run:
            return present(kind, obj)
        return present(kind, self.store.put(kind.resource, obj, handover=True))

    def _checked_body(self, kind: Kind, body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise ApiError(400, "the request body must be a JSON object")
        obj = clone(dict(body))
        if obj.get("kind", kind.kind) != kind.kind:
            raise ApiError(400, f"the kind {obj.get('kind')!r} does not match {kind.kind!r}")
        api_version = obj.get("apiVersion", kind.api_version)
        if api_version != kind.api_version:
            raise ApiError(
                400, f"the apiVersion {api_version!r} does not match {kind.api_version!r}"
            )
        if not isinstance(obj.setdefault("metadata", {}), dict):
            raise ApiError(400, "metadata must be an object")
        check_object(kind, obj)
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        return obj

    def _place(self, kind: Kind, namespace: str, meta: dict[str, Any]) -> None:
        if not kind.namespaced:
            meta.pop("namespace", None)
            return
        if meta.get("namespace", namespace) != namespace:
            raise ApiError(
                400,
                "the namespace of the provided object does not match "
                "the namespace sent on the request",
            )
        meta["namespace"] = namespace
        ns = self.store.get(NAMESPACES, "", namespace)
        if ns is None:
            raise not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            # NamespaceLifecycle admission's NewForbidden: the resource, then the name
            # when the request has one (a generateName has none yet)
            name = str(meta.get("name") or "")
            resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
            raise ApiError(
                403,
                f"{resource}{f' {json.dumps(name)}' if name else ''} is forbidden: "
                f"unable to create new content in namespace {namespace} because it is "
                "being terminated",
                reason="Forbidden",
                name=name,
                group=kind.group,
                kind=kind.plural,
            )

    def _check_name(self, kind: Kind, name: Any) -> None:
        if not name:
            raise invalid(kind.kind, "", kind.group, "metadata.name", "Required value")
        if kind.group in ("rbac.authorization.k8s.io", "apiregistration.k8s.io"):
            # path segment names (an APIService is ``<version>.<group>``, ``v1.``)
            ok = isinstance(name, str) and "/" not in name and name not in (".", "..")
        elif kind.kind == "Namespace":
            ok = isinstance(name, str) and len(name) <= 63 and bool(_LABEL.match(name))
        else:
            ok = isinstance(name, str) and len(name) <= 253 and bool(_SUBDOMAIN.match(name))
        if not ok:
            why = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            raise invalid(kind.kind, str(name), kind.group, "metadata.name", why + "characters")

    def _default(self, kind: Kind, obj: dict[str, Any]) -> None:
        if kind.kind == "Namespace":
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        if kind.kind == "CustomResourceDefinition":
            crds.validate(obj)
            obj["status"] = crds.initial_status(obj)
        if kind.resource == CLAIMS:
            storage.admit_claim(self.store, obj)
        if kind.resource == CLASSES:
            storage.default_class(obj)

    def _service_tallies(self) -> tuple[Tally, Tally]:
        """Cluster IPs and node ports held by stored Services (the API server's allocators)."""
        if self._services is None:
            self._services = (
                self.store.tally(SERVICES, _held_ips),
                self.store.tally(SERVICES, _held_node_ports),
            )
        return self._services

    def _allocate(self, kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """What the storage layer assigns: Service IPs and node ports, a new Job's selector."""
        if kind.resource == SERVICES:
            meta = obj["metadata"]
            stored = self.store.view_one(kind.resource, meta.get("namespace", ""), meta["name"])
            ips, ports = self._service_tallies()
            allocate_service(obj, old, ips.held_by_others(stored), ports.held_by_others(stored))
        elif kind.resource == JOBS and old is None:
            job_selector(obj)

    # --- update -----------------------------------------------------------------------

    def replace(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Any,
        opts: WriteOptions,
        subresource: str = "",
    ) -> dict[str, Any]:
        old = self.read(kind, namespace, name)
        new = self._checked_body(kind, body)
        if new["metadata"].get("name", name) != name:
            raise ApiError(
                400,
                f"the name of the object ({new['metadata']['name']}) does not match "
                f"the name on the URL ({name})",
            )
        return self.commit(kind, old, new, opts, subresource)

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        opts: WriteOptions,
        subresource: str = "",
        decode: Decode | None = None,
    ) -> dict[str, Any]:
        """``decode`` sees the patched object before validation (field validation drops
        undeclared fields there, as the server's decoding of the patch result does)."""
        old = self.read(kind, namespace, name)
        patched = apply_patch(content_type, present(kind, old), patch)
        if decode is not None:
            patched = decode(patched)
        patched = self._checked_body(kind, patched)
        patched["metadata"]["name"] = name
        if not patched["metadata"].get("resourceVersion"):
            patched["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self.commit(kind, old, patched, opts, subresource)

    def apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Any,
        opts: WriteOptions,
        subresource: str = "",
        check: Callable[[Any], None] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply; returns the object and whether it was created.

        ``check`` sees the applied configuration first (its typed conversion)."""
        if not opts.field_manager:
            raise ApiError(400, "PATCH requests with apply content type must specify fieldManager")
        if check is not None:
            check(body)
        if isinstance(body, Mapping) and body.get("apiVersion") != kind.api_version:
            # the field manager compares the applied configuration's version first
            raise ApiError(
                400,
                "Incorrect version specified in apply patch. Specified patch version: "
                f"{body.get('apiVersion') or ''}, expected: {kind.api_version}",
            )
        applied = self._checked_body(kind, body)
        if applied["metadata"].get("name") != name:
            raise ApiError(400, f"the name of the applied object must be {name!r}")
        crvalidation.check_applied(kind, applied)
        key = namespace if kind.namespaced else ""
        live = self.store.get(kind.resource, key, name)
        if live is None and subresource:
            raise not_found(kind.group, kind.plural, name)
        merged = server_side_apply(
            live,
            applied,
            manager=opts.field_manager,
            force=opts.force,
            subresource=subresource,
            has_status=kind.status,
            schema=kind.schema,
        )
        if live is None:
            return self.create(kind, namespace, merged, opts, tracked=True), True
        merged["metadata"]["resourceVersion"] = applied["metadata"].get("resourceVersion")
        return self.commit(kind, live, merged, opts, subresource, tracked=True), False

    def commit(
        self,
        kind: Kind,
        old: dict[str, Any],
        body: dict[str, Any],
        opts: WriteOptions,
        subresource: str = "",
        *,
        tracked: bool = False,
    ) -> dict[str, Any]:
        """Store ``body`` as the new state of ``old`` with every server-side rule applied."""
        meta = old["metadata"]
        wanted_rv = body.get("metadata", {}).get("resourceVersion")
        if wanted_rv and str(wanted_rv) != meta["resourceVersion"]:
            raise conflict(
                kind.group,
                kind.plural,
                meta["name"],
                "the object has been modified; please apply your changes "
                "to the latest version and try again",
            )
        new = self._scope_write(kind, old, body, subresource)
        if subresource != "status":
            apply_defaults(kind, new)
            self._allocate(kind, new, old)
        crvalidation.admit(kind, new)
        if not subresource:
            check_rules(kind, new, old)
        if not tracked:
            track_update(
                old,
                new,
                manager=opts.field_manager,
                subresource=subresource,
                has_status=kind.status,
                schema=kind.schema,
            )
        # a status write never moves the generation: it is the spec's
        # (https://kubernetes.io/docs/concepts/overview/working-with-objects/#object-spec-and-status)
        if (
            subresource != "status"
            and tracks_generation(kind)
            and generation_changes(kind, old, new)
        ):
            new["metadata"]["generation"] = int(meta.get("generation", 1)) + 1
        if kind.kind == "CustomResourceDefinition" and subresource != "status":
            crds.validate(new)
        if _unchanged(old, new):
            return present(kind, old)
        if opts.dry_run:
            return present(kind, new)
        # the last finalizer gone removes the object (a namespace: once finalized too;
        # a pod still in its grace period: once its kubelet deletes it, termination.py)
        finalized = not (kind.kind == "Namespace" and (new.get("spec") or {}).get("finalizers"))
        finalized = finalized and not meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and not new["metadata"].get("finalizers") and finalized:
            self.store.put(kind.resource, new)
            gone = self.store.remove(kind.resource, meta.get("namespace", ""), meta["name"])
            return present(kind, gone or new)
        # the answer is only read (serialized by the server, or dropped by a controller)
        return present(kind, self.store.put(kind.resource, new, handover=True))

    def bind(self, kind: Kind, old: dict[str, Any], node: str) -> dict[str, Any]:
        """The ``pods/binding`` subresource: ``spec.nodeName`` and the ``PodScheduled``
        condition in one write, as the API server's BindingREST stores them
        (pkg/registry/core/pod/storage: ``setPodHostAndAnnotations``). The binding
        writes storage directly, past the field manager, so no manager owns either
        field (kubernetes/kubernetes#127508 shows the PodScheduled condition absent
        from a pod's managedFields); https://kubernetes.io/docs/concepts/scheduling-eviction/kube-scheduler/
        describes the binding step. 409 when the pod is bound already or being deleted.
        """
        meta = old["metadata"]
        spec = old.get("spec") or {}
        if meta.get("deletionTimestamp"):
            why = "pod is being deleted, cannot be assigned to a host"
            raise conflict(kind.group, kind.plural, meta["name"], why)
        if spec.get("nodeName"):
            why = f"pod {meta['name']} is already assigned to node {spec['nodeName']!r}"
            raise conflict(kind.group, kind.plural, meta["name"], why)
        status = dict(old.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now(),
        }
        status.update(phase="Pending", conditions=[*conditions, scheduled])
        status.setdefault("qosClass", "BestEffort")
        # a new object sharing all but what the binding changes with the stored one
        # (stored objects are never changed in place); its managedFields stay as they are
        new = {**old, "metadata": dict(meta), "spec": {**spec, "nodeName": node}}
        new["status"] = status
        return present(kind, self.store.put(kind.resource, new, handover=True))

    def _scope_write(
        self, kind: Kind, old: dict[str, Any], body: dict[str, Any], subresource: str
    ) -> dict[str, Any]:
        """What a write may change: /status only status, the main resource never status."""
        if subresource == "status" and kind.schema is None:
            # only status and metadata change (both replaced, never edited in place):
            # the rest is shared with the stored object, as nothing edits stored objects
            new = {**old, "metadata": dict(old["metadata"])}
            if "status" in body:
                new["status"] = clone(body["status"])
            else:
                new.pop("status", None)
            if (kind.group, kind.kind) == ("apps", "Deployment"):
                # the Deployment status strategy resets only spec and labels: its
                # controller writes the revision annotation this way
                # (pkg/registry/apps/deployment/strategy.go, deploymentStatusStrategy)
                annotations = (body.get("metadata") or {}).get("annotations")
                if annotations:
                    new["metadata"]["annotations"] = clone(annotations)
                else:
                    new["metadata"].pop("annotations", None)
            return new
        if subresource == "status":
            new = clone(old)
            if "status" in body:
                new["status"] = clone(body["status"])
            else:
                new.pop("status", None)
            return new
        new = clone(body)
        for key in (*_SYSTEM_META, "name", "namespace", "resourceVersion"):
            if key in old["metadata"]:
                new["metadata"][key] = old["metadata"][key]
            else:
                new["metadata"].pop(key, None)
        if kind.status or kind.kind == "Namespace":
            if "status" in old:
                new["status"] = clone(old["status"])
            else:
                new.pop("status", None)
        return new
