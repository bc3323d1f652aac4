"""A tiny reader of the Kustomize features ``deploy/base/kustomization.yaml`` uses.

The deploy tests must not need kubectl, so this builds the base the way
``kubectl kustomize`` would for the keys below, and refuses any other key: a
new Kustomize feature in ``deploy/`` has to be taught here first (or the test
comparing against ``kubectl kustomize``, where kubectl exists, catches the gap).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SUPPORTED_KEYS = {"apiVersion", "kind", "namespace", "resources", "labels", "commonLabels"}
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


def read_kustomization(root: Path) -> dict[str, Any]:
    data = yaml.safe_load((root / "kustomization.yaml").read_text())
    unknown = set(data) - SUPPORTED_KEYS
    if unknown:
        raise UnsupportedKustomization(f"kustomization keys not understood: {sorted(unknown)}")
    return data


def build(root: Path) -> list[dict[str, Any]]:
    """The objects of a kustomization, in resource order, transformed like Kustomize."""
    spec = read_kustomization(root)
    objects: list[dict[str, Any]] = []
    for resource in spec.get("resources") or []:
        path = root / resource
        if path.is_dir():
            raise UnsupportedKustomization(f"{resource}: nested kustomizations are not supported")
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    for obj in objects:
        _set_namespace(obj, spec.get("namespace"))
        for entry in spec.get("labels") or []:
            _add_labels(obj, entry["pairs"], selectors=bool(entry.get("includeSelectors")))
        if spec.get("commonLabels"):
            _add_labels(obj, spec["commonLabels"], selectors=True)
    return objects


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
