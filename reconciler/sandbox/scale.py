"""The ``/scale`` subresource: an autoscaling/v1 Scale view of a workload's replicas.

Follows https://kubernetes.io/docs/reference/kubernetes-api/autoscaling/scale-v1/.
Built-in kinds keep replicas at ``.spec.replicas``/``.status.replicas``; a CRD names
its own paths (``specReplicasPath``...). ``server.py`` calls these for GET, PUT and
PATCH on ``.../scale``; writes then go through ``SandboxApi.commit``.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import clone
from reconciler.sandbox.kinds import Kind, ScalePaths
from reconciler.sandbox.selectors import selector_to_string


def _parts(path: str) -> list[str]:
    return [p for p in path.split(".") if p]


def _get(obj: Any, path: str) -> Any:
    for part in _parts(path):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _selector(paths: ScalePaths, obj: dict[str, Any]) -> str:
    if paths.label_selector and paths.label_selector != ".status.selector":
        value = _get(obj, paths.label_selector)
        if isinstance(value, dict):  # a ReplicationController's plain equality selector
            return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        return str(value or "")
    return selector_to_string(_get(obj, ".spec.selector"))


def scale_of(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    paths = kind.scale
    if paths is None:
        raise ApiError(404, "the server could not find the requested resource")
    meta = obj["metadata"]
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    status: dict[str, Any] = {"replicas": int(_get(obj, paths.status_replicas) or 0)}
    selector = _selector(paths, obj)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": int(_get(obj, paths.spec_replicas) or 0)},
        "status": status,
    }


def with_replicas(kind: Kind, obj: dict[str, Any], scale: Any) -> dict[str, Any]:
    """``obj`` with the replicas a written Scale asks for (and its resourceVersion)."""
    assert kind.scale is not None
    replicas = scale.get("spec", {}).get("replicas") if isinstance(scale, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ApiError(
            422,
            f'Scale "{obj["metadata"]["name"]}" is invalid: spec.replicas: '
            "must be a non-negative integer",
        )
    new = clone(obj)
    parts = _parts(kind.scale.spec_replicas)
    target = new
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = replicas
    wanted_rv = scale.get("metadata", {}).get("resourceVersion")
    new["metadata"]["resourceVersion"] = wanted_rv or obj["metadata"]["resourceVersion"]
    return new
