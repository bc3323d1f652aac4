"""PriorityClasses and the Priority admission plugin.

As https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
describes, a PriorityClass (``scheduling.k8s.io/v1``, cluster-scoped) maps a name to
a priority ``value``; every cluster has ``system-cluster-critical`` (2000000000) and
``system-node-critical`` (2000001000), which the API server creates at start and
refuses to delete. Names starting with ``system-`` are reserved, user classes may
not exceed 1000000000, and a class's value never changes. The Priority admission
plugin fills a new Pod's ``spec.priority`` (and ``preemptionPolicy``) from its
``priorityClassName``, or from the one ``globalDefault`` class (0 without one),
and refuses a pod naming a class that does not exist
(https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#priority).

``bootstrap.py`` creates :data:`SYSTEM_CLASSES`; ``rules.py`` calls
:func:`priority_class_causes`; ``gc.py`` calls :func:`check_deletable`;
``admission.py`` installs :class:`PriorityAdmission`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.fielderrors import Cause, as_map, cause, invalid
from reconciler.sandbox.kinds import PODS, PRIORITY_CLASSES, Kind
from reconciler.sandbox.store import Resource, Store

HIGHEST_USER_PRIORITY = 1_000_000_000
DEFAULT_PREEMPTION = "PreemptLowerPriority"
SYSTEM_CLASSES: dict[str, tuple[int, str]] = {
    "system-cluster-critical": (
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, "
        "but can be moved to another node if necessary.",
    ),
    "system-node-critical": (
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
}


def system_class(name: str) -> dict[str, Any]:
    value, description = SYSTEM_CLASSES[name]
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description,
        "globalDefault": False,
        "preemptionPolicy": DEFAULT_PREEMPTION,
    }


def priority_class_causes(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """``ValidatePriorityClass`` (and its update rule): reserved names, value bounds."""
    name = str(as_map(obj.get("metadata")).get("name", ""))
    value = obj.get("value")
    causes: list[Cause] = []
    if name in SYSTEM_CLASSES:
        if value != SYSTEM_CLASSES[name][0]:
            why = f"value of {name} PriorityClass must be {SYSTEM_CLASSES[name][0]}"
            causes.append(invalid("metadata.name", name, why))
    elif name.startswith("system-"):
        why = "priority class names with 'system-' prefix are reserved for system use only"
        causes.append(invalid("metadata.name", name, why))
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        why = (
            "Forbidden: maximum allowed value of a user defined priority is "
            f"{HIGHEST_USER_PRIORITY}"
        )
        causes.append(cause("FieldValueForbidden", "value", why))
    if old is not None and old.get("value") != value:
        causes.append(
            cause("FieldValueForbidden", "value", "Forbidden: may not be changed in an update.")
        )
    return causes


def check_deletable(resource: Resource, name: str) -> None:
    """The registry refuses to delete a built-in class (403 Forbidden)."""
    if resource == PRIORITY_CLASSES and name in SYSTEM_CLASSES:
        raise ApiError(
            403,
            f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: '
            "this is a system priority class and cannot be deleted",
            name=name,
            group="scheduling.k8s.io",
            kind="priorityclasses",
        )


def forbidden(kind: Kind, obj: Mapping[str, Any], why: str) -> ApiError:
    """``admission.NewForbidden``: ``<resource> "<name>" is forbidden: <why>``."""
    name = str(as_map(obj.get("metadata")).get("name", ""))
    resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
    return ApiError(
        403,
        f'{resource} "{name}" is forbidden: {why}',
        name=name,
        group=kind.group,
        kind=kind.plural,
    )


class PriorityAdmission:
    """The Priority plugin: resolves a new pod's priority, keeps one global default."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def mutate(self, kind: Kind, obj: dict[str, Any]) -> None:
        if kind.resource != PODS:
            return
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        name = spec.get("priorityClassName")
        if name:
            found = self.store.view_one(PRIORITY_CLASSES, "", str(name))
            if found is None:
                raise forbidden(kind, obj, f"no PriorityClass with name {name} was found")
            value = int(found.get("value") or 0)
            policy = found.get("preemptionPolicy") or DEFAULT_PREEMPTION
        else:
            default = self._global_default()
            value = int(default.get("value") or 0) if default else 0
            policy = (default or {}).get("preemptionPolicy") or DEFAULT_PREEMPTION
            if default is not None:
                spec["priorityClassName"] = default["metadata"]["name"]
        given = spec.get("priority")
        if given is not None and given != value:
            raise forbidden(
                kind,
                obj,
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given "
                "PriorityClass name",
            )
        spec["priority"] = value
        given = spec.get("preemptionPolicy")
        if given is not None and given != policy:
            raise forbidden(
                kind,
                obj,
                f"the string value of PreemptionPolicy ({given}) must not be provided in pod "
                f"spec; priority admission controller computed {policy} from the given "
                "PriorityClass name",
            )
        spec["preemptionPolicy"] = policy

    def validate(self, kind: Kind, obj: dict[str, Any]) -> None:
        if kind.resource != PRIORITY_CLASSES or obj.get("globalDefault") is not True:
            return
        other = self._global_default()
        if other is not None:
            why = (
                f"PriorityClass {other['metadata']['name']} is already marked as default. "
                "Only one default can exist"
            )
            raise forbidden(kind, obj, why)

    def _global_default(self) -> Mapping[str, Any] | None:
        for pc in self.store.view(PRIORITY_CLASSES, None):
            if pc.get("globalDefault") is True:
                return pc
        return None
