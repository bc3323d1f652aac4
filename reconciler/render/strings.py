"""Render numbers and booleans as strings where the Kubernetes API only takes strings.

A scalar that is exactly one placeholder keeps its value's type (SPEC section 1),
so ``replicas: ${params.replicas}`` stays an integer. In fields the API types
as strings (labels, annotations, ConfigMap data, Secret stringData, container
env values, args and command), the same placeholder would make the API server
answer 422, and quoting cannot help: ``"${params.replicas}"`` is still exactly
one placeholder. So those fields are converted here, the way the value would
be written in YAML (``3``, ``true``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def as_text(value: Any) -> Any:
    """A scalar as YAML would write it; strings, mappings and lists are left alone."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if value is None:
        return ""
    return value


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _map_values(mapping: Any, convert: Callable[[Any], Any]) -> None:
    if isinstance(mapping, dict):
        for key, value in mapping.items():
            mapping[key] = convert(value)


def _list_items(items: Any) -> None:
    if isinstance(items, list):
        items[:] = [as_text(item) for item in items]


def _metadata(meta: Any) -> None:
    if isinstance(meta, dict):
        _map_values(meta.get("labels"), as_text)
        _map_values(meta.get("annotations"), as_text)


def stringify_string_fields(obj: dict[str, Any]) -> None:
    """Convert, in place, the string-typed fields of one rendered object."""
    kind = obj.get("kind")
    _metadata(obj.get("metadata"))
    if kind == "ConfigMap":
        _map_values(obj.get("data"), as_text)
    elif kind == "Secret":
        _map_values(obj.get("stringData"), as_text)
    path = POD_SPEC_PATHS.get(str(kind))
    if path is None:
        return
    if len(path) > 1:
        _metadata(_dig(obj, (*path[:-1], "metadata")))
    pod = _dig(obj, path)
    if not isinstance(pod, dict):
        return
    for field in ("containers", "initContainers"):
        for container in pod.get(field) or ():
            if not isinstance(container, dict):
                continue
            _list_items(container.get("args"))
            _list_items(container.get("command"))
            for env in container.get("env") or ():
                if isinstance(env, dict) and "value" in env:
                    env["value"] = as_text(env["value"])
