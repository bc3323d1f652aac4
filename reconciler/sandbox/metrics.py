"""The resource metrics API (``metrics.k8s.io/v1beta1``), as metrics-server serves it.

https://kubernetes.io/docs/tasks/debug/debug-cluster/resource-metrics-pipeline/: most
clusters run metrics-server, which answers ``kubectl top``, the HorizontalPodAutoscaler
and clients' metrics helpers with read-only ``NodeMetrics`` and ``PodMetrics`` (CPU and
memory ``usage`` over a ``window``), for running pods only. The sandbox's containers run
nothing, so each is taken to use what it requests (a container without requests a
token 1m CPU and 4Mi memory); a node uses what its running pods use. Only ``get`` and
``list`` (with a label selector) are served. ``server.py`` routes the group here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.apierrors import ApiError, not_found
from reconciler.sandbox.apply import now
from reconciler.sandbox.kinds import NODES, PODS
from reconciler.sandbox.quantity import parse
from reconciler.sandbox.selectors import Matcher

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
WINDOW = "15s"  # metrics-server's default metric resolution
IDLE = {"cpu": Decimal("0.001"), "memory": Decimal(4 * 1024 * 1024)}


def resource_list() -> dict[str, Any]:
    """The group version's discovery document: two read-only kinds."""
    resources = [
        {"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind}
        | {"verbs": ["get", "list"]}
        for plural, namespaced, kind in (
            ("nodes", False, "NodeMetrics"),
            ("pods", True, "PodMetrics"),
        )
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": resources,
    }


def group() -> dict[str, Any]:
    listed = [{"groupVersion": API_VERSION, "version": VERSION}]
    return {"name": GROUP, "versions": listed, "preferredVersion": listed[0]}


def _usage(totals: Mapping[str, Decimal]) -> dict[str, str]:
    """CPU in nanocores and memory in Ki, as metrics-server writes them."""
    return {
        "cpu": f"{int(totals['cpu'] * 1_000_000_000)}n",
        "memory": f"{int(totals['memory'] // 1024)}Ki",
    }


def _container_use(container: Mapping[str, Any]) -> dict[str, Decimal]:
    requests = (container.get("resources") or {}).get("requests") or {}
    return {name: parse(requests[name])[0] if name in requests else IDLE[name] for name in IDLE}


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _pod_metrics(pod: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    meta = pod["metadata"]
    containers = [
        {"name": c.get("name", ""), "usage": _usage(_container_use(c))}
        for c in (pod.get("spec") or {}).get("containers") or []
    ]
    return {
        "kind": "PodMetrics",
        "apiVersion": API_VERSION,
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "labels": dict(meta.get("labels") or {}),
            "creationTimestamp": stamp,
        },
        "timestamp": stamp,
        "window": WINDOW,
        "containers": containers,
    }


def _node_metrics(
    node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], stamp: str
) -> dict[str, Any]:
    name = node["metadata"]["name"]
    totals = {key: Decimal(0) for key in IDLE}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != name:
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            for key, value in _container_use(container).items():
                totals[key] += value
    labels = dict(node["metadata"].get("labels") or {})
    return {
        "kind": "NodeMetrics",
        "apiVersion": API_VERSION,
        "metadata": {"name": name, "labels": labels, "creationTimestamp": stamp},
        "timestamp": stamp,
        "window": WINDOW,
        "usage": _usage(totals),
    }


def serve(
    api: SandboxApi, plural: str, namespace: str | None, name: str | None, labels: Matcher
) -> dict[str, Any]:
    """A NodeMetrics/PodMetrics object or list; 404 for what metrics-server has no
    metrics of (a missing or not running pod, a missing node)."""
    stamp = now()
    pods = [p for p in api.store.list(PODS, namespace if plural == "pods" else None) if _running(p)]
    if plural == "pods":
        items = [_pod_metrics(p, stamp) for p in pods]
        kind = "PodMetrics"
    elif plural == "nodes" and namespace is None:
        items = [_node_metrics(n, pods, stamp) for n in api.store.list(NODES)]
        kind = "NodeMetrics"
    else:
        raise ApiError(404, "the server could not find the requested resource")
    if name is not None:
        for item in items:
            if item["metadata"]["name"] == name:
                return item
        raise not_found(GROUP, plural, name)
    selected = [item for item in items if labels(item)]
    return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": selected}
