"""A tiny reader of the Kustomize features ``deploy/`` uses.

The deploy tests must not need kubectl, so this builds the base, the overlays and
the shards component the way ``kubectl kustomize`` would for the keys below, and
refuses any other key: a new Kustomize feature in ``deploy/`` has to be taught here
first (or the test comparing against ``kubectl kustomize``, where kubectl exists,
catches the gap). Patches are strategic merge patches of whole objects, as ours are:
``$patch: delete`` removes the object, maps merge, and a list replaces the old one
(right for lists without a merge key, such as a ClusterRole's ``rules``; a list of
named entries, such as ``containers``, would merge by name in Kustomize, so such a
patch is refused here rather than built wrong).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SUPPORTED_KEYS = {
    "apiVersion",
    "kind",
    "namespace",
    "resources",
    "labels",
    "commonLabels",
    "patches",
    "components",
}
COMPONENT_KEYS = {"apiVersion", "kind", "resources", "patches"}
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


class UnsupportedKustomization(Exception):
    pass


def read_kustomization(root: Path, *, component: bool = False) -> dict[str, Any]:
    data = yaml.safe_load((root / "kustomization.yaml").read_text())
    wanted = "Component" if component else "Kustomization"
    if data.get("kind", "Kustomization") != wanted:
        raise UnsupportedKustomization(f"{root}: a {data.get('kind')}, expected a {wanted}")
    unknown = set(data) - (COMPONENT_KEYS if component else SUPPORTED_KEYS)
    if unknown:
        raise UnsupportedKustomization(f"kustomization keys not understood: {sorted(unknown)}")
    return data


def build(root: Path) -> list[dict[str, Any]]:
    """The objects of a kustomization, in resource order, transformed like Kustomize."""
    spec = read_kustomization(root)
    objects = _resources(root, spec)
    for component in spec.get("components") or []:
        path = root / component
        part = read_kustomization(path, component=True)
        objects += _resources(path, part)
        objects = _patched(path, part, objects)
    objects = _patched(root, spec, objects)
    for obj in objects:
        _set_namespace(obj, spec.get("namespace"))
        for entry in spec.get("labels") or []:
            _add_labels(obj, entry["pairs"], selectors=bool(entry.get("includeSelectors")))
        if spec.get("commonLabels"):
            _add_labels(obj, spec["commonLabels"], selectors=True)
    return objects


def _resources(root: Path, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Files as their documents, directories built as kustomizations of their own."""
    objects: list[dict[str, Any]] = []
    for resource in spec.get("resources") or []:
        path = root / resource
        if path.is_dir():
            objects += build(path)
        else:
            objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return objects


def _patched(
    root: Path, spec: dict[str, Any], objects: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    for entry in spec.get("patches") or []:
        if set(entry) - {"path", "patch"} or len(entry) != 1:
            raise UnsupportedKustomization(f"patch entries take path or patch only: {entry}")
        text = (root / entry["path"]).read_text() if "path" in entry else entry["patch"]
        for patch in (doc for doc in yaml.safe_load_all(text) if doc):
            objects = _apply_patch(objects, patch)
    return objects


def _apply_patch(objects: list[dict[str, Any]], patch: dict[str, Any]) -> list[dict[str, Any]]:
    meta = patch["metadata"]
    matches = [
        o
        for o in objects
        if o["kind"] == patch["kind"]
        and o["metadata"]["name"] == meta["name"]
        and meta.get("namespace") in (None, o["metadata"].get("namespace"))
    ]
    if len(matches) != 1:
        raise UnsupportedKustomization(f"patch {patch['kind']}/{meta['name']}: no single target")
    [target] = matches
    if patch.get("$patch") == "delete":
        return [o for o in objects if o is not target]
    _merge(target, {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")})
    return objects


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, list) and any(isinstance(v, dict) and "name" in v for v in value):
            raise UnsupportedKustomization(f"{key}: a list merged by name is not supported")
        else:
            into[key] = value


def _set_namespace(obj: dict[str, Any], namespace: str | None) -> None:
    if not namespace:
        return
    if obj["kind"] in {"RoleBinding", "ClusterRoleBinding"}:
        # Kustomize moves the bound service accounts along with the namespace
        for subject in obj.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
    if obj["kind"] not in CLUSTER_SCOPED:
        obj["metadata"]["namespace"] = namespace


def _add_labels(obj: dict[str, Any], pairs: dict[str, str], *, selectors: bool) -> None:
    obj["metadata"].setdefault("labels", {}).update(pairs)
    if not selectors:
        return
    spec = obj.get("spec") or {}
    if obj["kind"] == "Service":
        spec.setdefault("selector", {}).update(pairs)
    elif obj["kind"] in WORKLOADS:
        spec.setdefault("selector", {}).setdefault("matchLabels", {}).update(pairs)
        spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {}).update(
            pairs
        )
