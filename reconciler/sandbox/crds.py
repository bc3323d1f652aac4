"""CustomResourceDefinitions: turning an apiextensions.k8s.io/v1 object into served kinds.

Follows https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/:
a CRD's served versions appear in discovery at once (namespaced or cluster-scoped,
with its short names and ``status``/``scale`` subresources), its status says
``Established``, and deleting it deletes its custom resources. Every version
needs a structural ``openAPIV3Schema`` (#specifying-a-structural-schema, checked
by ``structural.py``); the served kind carries it, and ``crvalidation.py`` prunes,
defaults and validates custom resources with it. No version conversion is done.
``api.py`` validates and sets status; ``gc.py`` registers and unregisters kinds as
CRDs are stored and removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox import goformat
from reconciler.sandbox.apierrors import invalid
from reconciler.sandbox.kinds import Kind, ScalePaths
from reconciler.sandbox.structural import schema_causes


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def validate(obj: Mapping[str, Any]) -> None:
    """Refuse a CRD that could not be served (422, naming the bad field)."""
    name = str(obj.get("metadata", {}).get("name", ""))
    spec = _spec(obj)
    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    group = spec.get("group")

    def bad(field: str, why: str) -> None:
        raise invalid("CustomResourceDefinition", name, "apiextensions.k8s.io", field, why)

    if not group or not isinstance(group, str):
        bad("spec.group", "Required value")
    for field in ("plural", "kind"):
        if not names.get(field):
            bad(f"spec.names.{field}", "Required value")
    if name != f"{names.get('plural')}.{group}":
        bad("metadata.name", 'must be spec.names.plural+"."+spec.group')
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        bad("spec.scope", 'Unsupported value: must be "Namespaced" or "Cluster"')
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        bad("spec.versions", "Required value")
    assert isinstance(versions, list)
    if not all(isinstance(v, Mapping) and v.get("name") for v in versions):
        bad("spec.versions", "every version needs a name")
    if sum(1 for v in versions if v.get("storage")) != 1:
        bad("spec.versions", "must have exactly one version marked as storage version")
    causes: list[goformat.Cause] = []
    for index, version in enumerate(versions):
        where = f"spec.versions[{index}].schema.openAPIV3Schema"
        causes += schema_causes(_schema_of(version), where)
    if causes:
        raise goformat.invalid_error(
            "CustomResourceDefinition", "apiextensions.k8s.io", name, causes
        )


def _schema_of(version: Mapping[str, Any]) -> Any:
    schema = version.get("schema")
    return schema.get("openAPIV3Schema") if isinstance(schema, Mapping) else None


def established_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = _spec(obj)
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    stamp = obj.get("metadata", {}).get("creationTimestamp", "")
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": stamp,
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": stamp,
        },
    ]
    # a CRD being deleted keeps saying so through any write (crdfinalizer.py)
    conditions += [
        c
        for c in (obj.get("status") or {}).get("conditions") or []
        if c.get("type") == "Terminating"
    ]
    stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    return {"conditions": conditions, "acceptedNames": names, "storedVersions": stored}


def kinds_of(obj: Mapping[str, Any]) -> list[Kind]:
    """The served kinds a stored CRD defines (one per served version)."""
    spec = _spec(obj)
    names = spec.get("names") or {}
    result = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        result.append(
            Kind(
                group=str(spec.get("group")),
                version=str(version.get("name")),
                kind=str(names.get("kind")),
                plural=str(names.get("plural")),
                namespaced=spec.get("scope") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                status="status" in subresources,
                scale=_scale_paths(scale) if isinstance(scale, Mapping) else None,
                categories=tuple(names.get("categories") or ()),
                singular=str(names.get("singular") or ""),
                crd=True,
                schema=_served_schema(version),
            )
        )
    return result


def _served_schema(version: Mapping[str, Any]) -> Mapping[str, Any]:
    """The version's schema; an unusable one (refused on write) preserves everything."""
    schema = _schema_of(version)
    if isinstance(schema, Mapping):
        return schema
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _scale_paths(scale: Mapping[str, Any]) -> ScalePaths:
    return ScalePaths(
        spec_replicas=str(scale.get("specReplicasPath", ".spec.replicas")),
        status_replicas=str(scale.get("statusReplicasPath", ".status.replicas")),
        label_selector=scale.get("labelSelectorPath"),
    )
