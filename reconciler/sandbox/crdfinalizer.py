"""Deleting a CustomResourceDefinition: its custom resources go first, finalizers and all.

Follows apiextensions-apiserver's CRD registry and finalizer controller, as
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#delete-a-customresourcedefinition
describes: the first DELETE adds the ``customresourcecleanup.apiextensions.k8s.io``
finalizer and a ``Terminating`` condition; the controller deletes every custom
resource (each through its own finalizers, which may hold it), refuses new ones
(``405``: "create not allowed while custom resource definition is terminating"), and
drops its finalizer, removing the CRD, once none is left. ``gc.py`` drives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.apply import now
from reconciler.sandbox.copying import clone
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.store import Resource

CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
PENDING = (
    "InstanceDeletionPending",
    "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
)
IN_PROGRESS = ("InstanceDeletionInProgress", "CustomResource deletion is in progress")


def resource_of(crd: Mapping[str, Any]) -> Resource:
    spec = crd.get("spec") or {}
    return (str(spec.get("group")), str((spec.get("names") or {}).get("plural")))


def marked_for_deletion(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The CRD as its registry's first DELETE stores it (before the generic deletion
    sets ``deletionTimestamp``, which the finalizer now holds back)."""
    marked = clone(dict(crd))
    finalizers = list(marked["metadata"].get("finalizers") or [])
    if CLEANUP not in finalizers:
        marked["metadata"]["finalizers"] = [*finalizers, CLEANUP]
    return with_terminating(marked, *PENDING)


def with_terminating(crd: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    """``crd`` with its ``Terminating`` condition set to True for ``reason``."""
    updated = clone(dict(crd))
    status = updated.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Terminating"]
    old = terminating_condition(crd)
    since = old.get("lastTransitionTime") if old.get("status") == "True" else now()
    condition = {"type": "Terminating", "status": "True", "lastTransitionTime": since}
    status["conditions"] = [*conditions, {**condition, "reason": reason, "message": message}]
    return updated


def terminating_condition(crd: Mapping[str, Any]) -> dict[str, Any]:
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Terminating":
            return dict(condition)
    return {}


def cleaning_up(crd: Mapping[str, Any]) -> bool:
    """Deleted and still holding its custom resources' cleanup."""
    meta = crd["metadata"]
    return bool(meta.get("deletionTimestamp")) and CLEANUP in (meta.get("finalizers") or [])


def refuse_create(kind: Kind, crd: Mapping[str, Any] | None) -> None:
    """405 for a new custom resource of a terminating CRD (the custom resource
    handler's answer: MethodNotSupported with its own message)."""
    if crd is not None and terminating_condition(crd).get("status") == "True":
        raise ApiError(
            405,
            "create not allowed while custom resource definition is terminating",
            group=kind.group,
            kind=kind.plural,
        )
