"""Shape checks a real API server's schemas would do, for the fields the sandbox reads.

The sandbox has no OpenAPI schemas, but its controllers, selectors and GC read
metadata and pod templates; a malformed body must be a 422 naming the field (as
https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
describes), never a crash. ``api.py`` calls :func:`check_object` on every write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.apierrors import invalid
from reconciler.sandbox.kinds import Kind

_TEMPLATED = frozenset(
    {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"}
)
_OBJECTS = ("spec", "status", "data", "stringData")
_INTEGERS = ("replicas", "completions", "parallelism", "backoffLimit")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def check_metadata(kind: Kind, meta: Mapping[str, Any], where: str = "metadata") -> None:
    name = str(meta.get("name", ""))

    def bad(field: str, why: str) -> None:
        raise invalid(kind.kind, name, kind.group, f"{where}.{field}", why)

    for field in ("labels", "annotations"):
        if meta.get(field) is not None and not _string_map(meta[field]):
            bad(field, "must map strings to strings")
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (
        isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)
    ):
        bad("finalizers", "must be a list of strings")
    refs = meta.get("ownerReferences")
    if refs is not None and not (
        isinstance(refs, list) and all(isinstance(r, Mapping) and r.get("uid") for r in refs)
    ):
        bad("ownerReferences", "each reference needs a uid")


def _check_pod_spec(bad: Any, spec: Any, where: str) -> None:
    if not isinstance(spec, Mapping):
        bad(where, "must be an object")
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if items is None:
            continue
        if not isinstance(items, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in items
        ):
            bad(f"{where}.{field}", "must be a list of objects with a name")


def check_object(kind: Kind, obj: Mapping[str, Any]) -> None:
    """Raise a 422 ApiError for the first field whose shape is wrong."""
    name = str(obj.get("metadata", {}).get("name", ""))

    def bad(field: str, why: str) -> None:
        raise invalid(kind.kind, name, kind.group, field, why)

    check_metadata(kind, obj["metadata"])
    if kind.crd:
        return  # the rest of a custom resource is its CRD schema's business (crvalidation.py)
    for field in _OBJECTS:
        if obj.get(field) is not None and not isinstance(obj[field], Mapping):
            bad(field, "must be an object")
    if kind.kind in ("ConfigMap", "Secret") and kind.group == "":
        # the API's types are map[string]string (Secret.data: base64 strings); a
        # number or boolean there is a 422 on a real cluster, so it must be here too
        for field in ("data", "stringData") if kind.kind == "Secret" else ("data",):
            values = obj.get(field)
            if isinstance(values, Mapping):
                for key, value in values.items():
                    if not isinstance(value, str):
                        bad(f"{field}[{key}]", f"must be a string, got {type(value).__name__}")
    spec = obj.get("spec") or {}
    for field in _INTEGERS:
        if spec.get(field) is not None and not (_is_int(spec[field]) and spec[field] >= 0):
            bad(f"spec.{field}", "must be a non-negative integer")
    if kind.kind == "Pod":
        _check_pod_spec(bad, spec, "spec")
    strategy = spec.get("updateStrategy") or {}
    rolling = strategy.get("rollingUpdate") if isinstance(strategy, Mapping) else None
    partition = rolling.get("partition") if isinstance(rolling, Mapping) else None
    if partition is not None and not (_is_int(partition) and partition >= 0):
        bad("spec.updateStrategy.rollingUpdate.partition", "must be a non-negative integer")
    if kind.kind not in _TEMPLATED or "template" not in spec:
        return
    template = spec["template"]
    if not isinstance(template, Mapping):
        bad("spec.template", "must be an object")
    if not isinstance(template.get("metadata") or {}, Mapping):
        bad("spec.template.metadata", "must be an object")
    check_metadata(kind, template.get("metadata") or {}, "spec.template.metadata")
    _check_pod_spec(bad, template.get("spec") or {}, "spec.template.spec")
