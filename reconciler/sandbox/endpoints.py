"""The Endpoints and EndpointSlice controllers: where each Service's traffic goes.

As https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/ and
https://kubernetes.io/docs/concepts/services-networking/service/#endpoints describe,
for every Service with a selector the control plane keeps an ``Endpoints`` object
of the Service's name, and EndpointSlices labelled ``kubernetes.io/service-name``
and ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``,
owned by the Service, listing the IPs of the pods the selector matches, with the
Service's ports resolved against each pod (a named ``targetPort`` is the
container port of that name). Ready pods are ``addresses`` (slice condition
``ready: true``), the others ``notReadyAddresses`` (``ready: false``); a pod being
deleted is left out of Endpoints and is ``terminating`` in its slice; pods without
an IP or in a terminal phase are left out. Both follow pods as they come, become
ready and go. A Service without a selector gets nothing: its Endpoints are the
user's (but go when the Service goes, as the real controller deletes the Endpoints
of any deleted Service). The slices go through garbage collection, as their owner
is gone.

``controllers.py`` runs :class:`EndpointsController` for every Service change and
for the Services a pod change concerns (:meth:`EndpointsController.affected`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.fielderrors import as_list, as_map
from reconciler.sandbox.kinds import ENDPOINT_SLICES, ENDPOINTS, PODS, SERVICES
from reconciler.sandbox.owned import alive, owner_reference
from reconciler.sandbox.pods import is_ready
from reconciler.sandbox.store import Resource, StoredEvent

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
HEADLESS = "service.kubernetes.io/headless"
Key = tuple[Resource, str, str]
Ports = tuple[tuple[str, int, str], ...]  # (name, port, protocol) as the pod serves them


def _selected(service: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Service's selector when this controller keeps its endpoints, else None."""
    spec = as_map(service.get("spec"))
    selector = spec.get("selector")
    if not isinstance(selector, Mapping) or not selector or spec.get("type") == "ExternalName":
        return None
    return dict(selector)


def _labels_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(as_map(obj["metadata"].get("labels")))


def _subset(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    return bool(labels) and all(labels.get(k) == v for k, v in selector.items())


def _matches(selector: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    return _subset(selector, as_map(pod["metadata"].get("labels")))


def _container_port(pod: Mapping[str, Any], name: str, protocol: str) -> int | None:
    for container in as_list(as_map(pod.get("spec")).get("containers")):
        for port in as_list(as_map(container).get("ports")):
            port = as_map(port)
            if port.get("name") == name and (port.get("protocol") or "TCP") == protocol:
                value = port.get("containerPort")
                return value if isinstance(value, int) else None
    return None


def _ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> Ports:
    """The Service's ports as ``pod`` serves them (a named target it lacks is left out)."""
    resolved: list[tuple[str, int, str]] = []
    for port in map(as_map, as_list(as_map(service.get("spec")).get("ports"))):
        protocol = str(port.get("protocol") or "TCP")
        target = port.get("targetPort", port.get("port"))
        number = _container_port(pod, target, protocol) if isinstance(target, str) else target
        if isinstance(number, int):
            resolved.append((str(port.get("name") or ""), number, protocol))
    return tuple(resolved)


def _target_ref(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "kind": "Pod",
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta["uid"],
    }


def _labels(service: Mapping[str, Any]) -> dict[str, str]:
    labels = dict(as_map(service["metadata"].get("labels")))
    if as_map(service.get("spec")).get("clusterIP") == "None":
        labels[HEADLESS] = ""
    return labels


def _serves(pod: Mapping[str, Any] | None) -> bool:
    """The pod has an address a Service may route to: an IP, and a phase not terminal."""
    if pod is None:
        return False
    status = as_map(pod.get("status"))
    return bool(status.get("podIP")) and status.get("phase") not in ("Succeeded", "Failed")


def endpoint_view(pod: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """Everything of ``pod`` that the Endpoints and EndpointSlices of any Service are
    made of (:func:`serving_groups`, :func:`subsets`, :func:`slice_endpoints` read
    nothing else); None when the pod is in none (no IP yet, or finished).

    The real controller syncs a pod's Services only when its labels, readiness,
    address or deletion changed (``podEndpointsChanged`` in
    pkg/controller/util/endpoint, per
    https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/): most
    pod writes (a container's state, a restart count) change none of those, and
    syncing its Service after each was a tenth of the sandbox's CPU in an install.
    """
    if not _serves(pod):
        return None
    assert pod is not None
    meta, spec = pod["metadata"], as_map(pod.get("spec"))
    return (
        as_map(meta.get("labels")),
        pod["status"]["podIP"],
        spec.get("nodeName"),
        spec.get("containers"),
        is_ready(pod),
        alive(pod),
        meta.get("uid"),
        meta.get("namespace", ""),
        meta["name"],
    )


def serving_groups(
    service: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> dict[Ports, list[Mapping[str, Any]]]:
    """The pods among ``pods`` in the Service's endpoints, by the ports they serve it on."""
    selector = _selected(service) or {}
    groups: dict[Ports, list[Mapping[str, Any]]] = {}
    for pod in pods:
        if _serves(pod) and _matches(selector, pod):
            groups.setdefault(_ports(service, pod), []).append(pod)
    return groups


def subsets(groups: Mapping[Ports, list[Mapping[str, Any]]], publish: bool) -> list[dict[str, Any]]:
    """The ``subsets`` of a Service's Endpoints."""
    found: list[dict[str, Any]] = []
    for ports, pods in groups.items():
        ready: list[dict[str, Any]] = []
        not_ready: list[dict[str, Any]] = []
        for pod in pods:
            if not alive(pod) and not publish:
                continue  # terminating: out of Endpoints
            address = {
                "ip": pod["status"]["podIP"],
                "nodeName": as_map(pod.get("spec")).get("nodeName"),
                "targetRef": _target_ref(pod),
            }
            if not address["nodeName"]:
                del address["nodeName"]
            (ready if publish or is_ready(pod) else not_ready).append(address)
        if not ports or not (ready or not_ready):
            continue
        subset: dict[str, Any] = {}
        if ready:
            subset["addresses"] = sorted(ready, key=lambda a: a["ip"])
        if not_ready:
            subset["notReadyAddresses"] = sorted(not_ready, key=lambda a: a["ip"])
        subset["ports"] = [
            {**({"name": n} if n else {}), "port": p, "protocol": proto} for n, p, proto in ports
        ]
        found.append(subset)
    return found


def slice_endpoints(pods: Iterable[Mapping[str, Any]], publish: bool) -> list[dict[str, Any]]:
    """The ``endpoints`` of one EndpointSlice."""
    endpoints = []
    for pod in pods:
        serving = publish or is_ready(pod)
        terminating = not alive(pod)
        endpoint: dict[str, Any] = {
            "addresses": [pod["status"]["podIP"]],
            "conditions": {
                "ready": serving and not terminating,
                "serving": serving,
                "terminating": terminating,
            },
            "targetRef": _target_ref(pod),
        }
        node = as_map(pod.get("spec")).get("nodeName")
        if node:
            endpoint["nodeName"] = node
        endpoints.append(endpoint)
    return endpoints


class LabelIndex:
    """Names by ``(namespace, key, value)``: the pods carrying a label, or the Services
    whose selector requires it, kept from store events. Matching every pod event
    against every Service of its namespace (and every Service against every pod) cost
    O(services x pods) per namespace; through the index a sync reads only candidates."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str, str], set[str]] = {}
        self._labels: dict[tuple[str, str], dict[str, Any]] = {}

    def update(self, namespace: str, name: str, labels: Mapping[str, Any] | None) -> dict[str, Any]:
        """Record ``name``'s labels (None: gone); returns the labels it had."""
        old = self._labels.pop((namespace, name), {})
        for key, value in old.items():
            names = self._names.get((namespace, key, str(value)))
            if names is not None:
                names.discard(name)
                if not names:
                    del self._names[(namespace, key, str(value))]
        if labels:
            self._labels[(namespace, name)] = dict(labels)
            for key, value in labels.items():
                self._names.setdefault((namespace, key, str(value)), set()).add(name)
        return old

    def having(self, namespace: str, labels: Mapping[str, Any]) -> set[str]:
        """The names indexed under any of ``labels``."""
        found: set[str] = set()
        for key, value in labels.items():
            found |= self._names.get((namespace, key, str(value)), set())
        return found

    def fewest(self, namespace: str, labels: Mapping[str, Any]) -> set[str]:
        """The names indexed under the rarest of ``labels`` (a superset of those under all)."""
        sets: list[set[str]] = [
            self._names.get((namespace, k, str(v)), set()) for k, v in labels.items()
        ]
        if not sets:
            return set()
        rarest: set[str] = min(sets, key=len)
        return set(rarest)


class EndpointsController:
    """Keeps the Endpoints and EndpointSlices of every Service with a selector."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._pods = LabelIndex()  # pods by label
        self._services = LabelIndex()  # Services by what their selector requires
        for pod in plane.api.store.view(PODS, None):
            self._pods.update(
                pod["metadata"].get("namespace", ""), pod["metadata"]["name"], _labels_of(pod)
            )
        for service in plane.api.store.view(SERVICES, None):
            meta = service["metadata"]
            self._services.update(meta.get("namespace", ""), meta["name"], _selected(service))

    def affected(self, event: StoredEvent) -> list[Key]:
        """The Services to sync after ``event``: a pod's old and new ones. A deleted
        Service's Endpoints go at once (its slices through garbage collection)."""
        name, namespace = event.obj["metadata"]["name"], event.namespace
        gone = event.type == "DELETED"
        if event.resource == SERVICES:
            self._services.update(namespace, name, None if gone else _selected(event.obj))
            if gone:
                # any Service's, even one without a selector (the controller's syncService)
                stored = self.plane.api.store.view_one(ENDPOINTS, namespace, name)
                if stored is not None:
                    self.plane.delete(ENDPOINTS, stored)
            return []
        if event.resource != PODS:
            return []
        labels = {} if gone else _labels_of(event.obj)
        old = self._pods.update(namespace, name, labels)
        if endpoint_view(event.old) == endpoint_view(None if gone else event.obj):
            return []  # in every Service's endpoints as it was (or, before and after, in none)
        keys: list[Key] = []
        candidates = self._services.having(namespace, old) | self._services.having(
            namespace, labels
        )
        for svc in sorted(candidates):
            service = self.plane.api.store.view_one(SERVICES, namespace, svc)
            selector = _selected(service) if service is not None else None
            if selector is not None and (_subset(selector, old) or _subset(selector, labels)):
                keys.append((SERVICES, namespace, svc))
        return keys

    def reconcile(self, service: dict[str, Any]) -> float | None:
        selector = _selected(service)
        if selector is None or not alive(service):
            return None
        namespace = service["metadata"].get("namespace", "")
        view_one = self.plane.api.store.view_one
        candidates = [
            view_one(PODS, namespace, n) for n in sorted(self._pods.fewest(namespace, selector))
        ]
        groups = serving_groups(service, [p for p in candidates if p is not None])
        publish = bool(as_map(service.get("spec")).get("publishNotReadyAddresses"))
        self._write_endpoints(service, groups, publish)
        self._write_slices(service, groups, publish)
        return None

    # --- Endpoints ----------------------------------------------------------------------

    def _write_endpoints(
        self,
        service: dict[str, Any],
        groups: Mapping[Ports, list[Mapping[str, Any]]],
        publish: bool,
    ) -> None:
        found = subsets(groups, publish)
        meta = service["metadata"]
        namespace = meta.get("namespace", "")
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": meta["name"], "namespace": namespace, "labels": _labels(service)},
        }
        if found:
            body["subsets"] = found
        old = self.plane.api.store.view_one(ENDPOINTS, namespace, meta["name"])
        if old is None:
            self.plane.create(ENDPOINTS, namespace, body)
        elif old.get("subsets") != body.get("subsets") or as_map(
            old["metadata"].get("labels")
        ) != _labels(service):
            new_meta = {**old["metadata"], "labels": _labels(service)}
            self.plane.update(ENDPOINTS, old, {**body, "metadata": new_meta})

    # --- EndpointSlices -----------------------------------------------------------------

    def _write_slices(
        self,
        service: dict[str, Any],
        groups: Mapping[Ports, list[Mapping[str, Any]]],
        publish: bool,
    ) -> None:
        """One slice per set of resolved ports (one placeholder with no endpoints when
        nothing is selected), as the EndpointSlice controller's reconciler groups them."""
        namespace = service["metadata"].get("namespace", "")
        wanted: dict[Ports, list[Mapping[str, Any]]] = dict(groups) or {(): []}
        existing = list(self.plane.owned(ENDPOINT_SLICES, service))
        labels = {**_labels(service), SERVICE_NAME: service["metadata"]["name"]}
        labels[MANAGED_BY] = SLICE_CONTROLLER
        unused = []
        for found in existing:
            ports = tuple(
                (str(p.get("name") or ""), int(p.get("port") or 0), str(p.get("protocol")))
                for p in map(as_map, as_list(found.get("ports")))
            )
            if ports not in wanted:
                unused.append(found)
                continue
            body = self._slice(service, labels, ports, wanted.pop(ports), publish)
            body["metadata"] = {**found["metadata"], "labels": labels}
            if any(found.get(k) != body.get(k) for k in ("endpoints", "ports", "addressType")) or (
                found["metadata"].get("labels") != labels
            ):
                self.plane.update(ENDPOINT_SLICES, found, body)
        creates = [
            self._slice(service, labels, ports, pods, publish) for ports, pods in wanted.items()
        ]
        # A slice to create and one to delete make an update of the latter (the
        # placeholder becomes the first real slice), as the controller's reconciler
        # does in ``finalize`` ("change the creates to updates of the slices that would
        # otherwise be deleted"): one MODIFIED event instead of an ADDED and a DELETED.
        # Only a slice of the same addressType (immutable); ``owned`` gave this
        # Service's own slices only.
        for found in list(unused):
            if not creates or found.get("addressType") != creates[-1]["addressType"]:
                continue
            body = creates.pop()
            body["metadata"] = {**found["metadata"], "labels": labels}
            self.plane.update(ENDPOINT_SLICES, found, body)
            unused.remove(found)
        for body in creates:
            self.plane.create(ENDPOINT_SLICES, namespace, body)
        for found in unused:
            self.plane.delete(ENDPOINT_SLICES, found)

    def _slice(
        self,
        service: dict[str, Any],
        labels: dict[str, str],
        ports: Ports,
        pods: list[Mapping[str, Any]],
        publish: bool,
    ) -> dict[str, Any]:
        meta = service["metadata"]
        endpoints = slice_endpoints(pods, publish)
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "namespace": meta.get("namespace", ""),
                "labels": labels,
                "ownerReferences": [owner_reference(service)],
            },
            "addressType": "IPv4",
            # a Go nil slice: a real server writes null, not [], for no endpoints
            "endpoints": endpoints or None,
            "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports] or None,
        }
