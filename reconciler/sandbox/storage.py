"""Storage objects as the API server admits them: the default StorageClass and claims.

Follows https://kubernetes.io/docs/concepts/storage/storage-classes/#default-storageclass
and https://kubernetes.io/docs/concepts/storage/persistent-volumes/#class-1: the cluster
starts with one StorageClass, ``standard``, marked default by the annotation
``storageclass.kubernetes.io/is-default-class: "true"`` (as minikube's, with
``volumeBindingMode: Immediate``, so a claim binds before a pod mounts it and a
GitOps tool waiting on it does not wait forever); the ``DefaultStorageClass``
admission plugin gives a claim created without ``spec.storageClassName`` the default
class (the newest, when several are marked), while ``storageClassName: ""`` asks for
no class at all. ``api.py`` calls :func:`admit_claim` and :func:`default_class` on
create; ``provisioning.py`` binds and provisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox import goformat
from reconciler.sandbox.kinds import CLASSES
from reconciler.sandbox.store import Store

DEFAULT_CLASS = "standard"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PROVISIONER = "sandbox.reconciler.dev/hostpath"


def default_storage_class() -> dict[str, Any]:
    """The class every new cluster has (``kubectl get storageclass`` marks it default)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": DEFAULT_CLASS,
            "annotations": {DEFAULT_CLASS_ANNOTATION: "true"},
            "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def default_class(obj: dict[str, Any]) -> None:
    """API defaults of a StorageClass (``reclaimPolicy``, ``volumeBindingMode``)."""
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def admit_claim(store: Store, claim: dict[str, Any]) -> None:
    """Validate a new claim (every cause in one 422) and give it the default class."""
    spec = claim.setdefault("spec", {})
    name = str(claim["metadata"].get("name", ""))
    causes: list[goformat.Cause] = []
    if not spec.get("accessModes"):
        causes.append(
            _cause("spec.accessModes", "Required value: at least 1 access mode is required")
        )
    if not spec.get("volumeName") and "storage" not in requests_of(spec):
        causes.append(_cause("spec.resources[storage]", "Required value"))
    if causes:
        raise goformat.invalid_error("PersistentVolumeClaim", "", name, causes)
    spec.setdefault("volumeMode", "Filesystem")
    if spec.get("storageClassName") is None:
        marked = [c for c in store.view(CLASSES, None) if _is_default(c)]
        if marked:
            newest = max(marked, key=lambda c: str(c["metadata"].get("creationTimestamp", "")))
            spec["storageClassName"] = newest["metadata"]["name"]


def _cause(field: str, message: str) -> goformat.Cause:
    return {"reason": "FieldValueRequired", "message": message, "field": field}


def _is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = storage_class["metadata"].get("annotations") or {}
    return str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true"


def requests_of(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    resources = spec.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    return requests if isinstance(requests, Mapping) else {}
