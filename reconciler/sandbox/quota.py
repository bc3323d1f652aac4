"""ResourceQuota: the quota controller's ``status`` and the ResourceQuota admission plugin.

As https://kubernetes.io/docs/concepts/policy/resource-quotas/ describes, a
namespace's ResourceQuota caps what its objects may use in total: object counts
(``pods``, ``services``, ``count/deployments.apps``, ...), and the compute its live
pods request or are limited to (``requests.cpu``, ``limits.memory``; ``cpu`` and
``memory`` mean requests), or its claims' ``requests.storage``. The quota
controller keeps ``status.hard`` (the spec's) and ``status.used`` current as
objects come and go; admission refuses a create that would take any ``used``
beyond ``hard`` with 403 Forbidden: ``exceeded quota: NAME, requested: ...,
used: ..., limited: ...``, and, when a quota caps cpu or memory, a pod whose
containers do not all say how much: ``failed quota: NAME: must specify ...``
(``plugin/pkg/admission/resourcequota``, ``pkg/quota/v1/evaluator/core``). Pods in
a terminal phase use nothing. A quota's ``scopes`` (``Terminating``,
``NotTerminating``, ``BestEffort``, ``NotBestEffort``) and ``scopeSelector`` on
``PriorityClass`` narrow it to the pods they match.

The sandbox computes ``used`` from the stored objects at admission (a real server
reads the status its controller wrote, and refuses until the first one exists), so
a pod created right after its quota is admitted against what the namespace holds.
``controllers.py`` runs :class:`QuotaController`; ``admission.py`` installs
:class:`QuotaAdmission`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.fielderrors import as_list, as_map
from reconciler.sandbox.kinds import CLAIMS, PODS, QUOTAS, SERVICES, Kind
from reconciler.sandbox.limitranges import amount, pod_totals
from reconciler.sandbox.owned import alive
from reconciler.sandbox.priorities import forbidden
from reconciler.sandbox.quantity import add
from reconciler.sandbox.store import Resource, Store, StoredEvent

_LEGACY_COUNTS = ("configmaps", "secrets", "replicationcontrollers", "resourcequotas")
_COMPUTE = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)
_STORAGE_CLASS = ".storageclass.storage.k8s.io/"
Key = tuple[Resource, str, str]


def counted_resource(name: str) -> Resource:
    """The resource whose objects a quota's resource name counts or sums."""
    if name.startswith("count/"):
        plural, _, group = name.removeprefix("count/").partition(".")
        return (group, plural)
    if name in ("services", "services.loadbalancers", "services.nodeports"):
        return SERVICES
    if name in _LEGACY_COUNTS:
        return ("", name)
    if name in ("persistentvolumeclaims", "requests.storage") or _STORAGE_CLASS in name:
        return CLAIMS
    return PODS  # pods, cpu, memory, requests.*, limits.*: the pod evaluator's


def _terminal(pod: Mapping[str, Any]) -> bool:
    return as_map(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def _pod_usage(pod: Mapping[str, Any]) -> dict[str, str]:
    if _terminal(pod):
        return {}
    spec = as_map(pod.get("spec"))
    usage = {"pods": "1", "count/pods": "1"}
    for key in ("requests", "limits"):
        for name, total in pod_totals(spec, key).items():
            usage[f"{key}.{name}"] = total
            if key == "requests" and name in ("cpu", "memory", "ephemeral-storage"):
                usage[name] = total
    return usage


def _claim_usage(claim: Mapping[str, Any]) -> dict[str, str]:
    spec = as_map(claim.get("spec"))
    storage = as_map(as_map(spec.get("resources")).get("requests")).get("storage")
    usage = {"persistentvolumeclaims": "1", "count/persistentvolumeclaims": "1"}
    cls = spec.get("storageClassName")
    if cls:
        usage[f"{cls}{_STORAGE_CLASS}persistentvolumeclaims"] = "1"
    if storage is not None:
        usage["requests.storage"] = add(None, storage)
        if cls:
            usage[f"{cls}{_STORAGE_CLASS}requests.storage"] = add(None, storage)
    return usage


def usage(resource: Resource, obj: Mapping[str, Any]) -> dict[str, str]:
    """What one object uses of each quota resource name that can count it."""
    if resource == PODS:
        return _pod_usage(obj)
    if resource == CLAIMS:
        return _claim_usage(obj)
    group, plural = resource
    result = {f"count/{plural}.{group}" if group else f"count/{plural}": "1"}
    if resource == SERVICES:
        result["services"] = "1"
        spec = as_map(obj.get("spec"))
        kind = spec.get("type")
        if kind == "LoadBalancer":
            result["services.loadbalancers"] = "1"
        if kind in ("NodePort", "LoadBalancer"):
            result["services.nodeports"] = str(len(as_list(spec.get("ports"))))
    elif not group and plural in _LEGACY_COUNTS:
        result[plural] = "1"
    return result


def _best_effort(pod: Mapping[str, Any]) -> bool:
    spec = as_map(pod.get("spec"))
    return not any(pod_totals(spec, "requests")) and not any(pod_totals(spec, "limits"))


def _scope_matches(scope: str, operator: str, values: list[Any], pod: Mapping[str, Any]) -> bool:
    spec = as_map(pod.get("spec"))
    if scope == "PriorityClass":
        name = spec.get("priorityClassName")
        return {
            "In": name in values,
            "NotIn": name not in values,
            "Exists": bool(name),
            "DoesNotExist": not name,
        }.get(operator, False)
    terminating = spec.get("activeDeadlineSeconds") is not None
    matched = {
        "Terminating": terminating,
        "NotTerminating": not terminating,
        "BestEffort": _best_effort(pod),
        "NotBestEffort": not _best_effort(pod),
    }.get(scope, False)
    return matched if operator in ("", "Exists", "In") else not matched


def in_scope(quota: Mapping[str, Any], resource: Resource, obj: Mapping[str, Any]) -> bool:
    """Whether ``quota`` counts ``obj``: a scoped quota counts only the pods it matches."""
    spec = as_map(quota.get("spec"))
    scopes: list[tuple[str, str, list[Any]]] = [
        (str(s), "", []) for s in as_list(spec.get("scopes"))
    ]
    for expr in as_list(as_map(spec.get("scopeSelector")).get("matchExpressions")):
        expr = as_map(expr)
        values = list(as_list(expr.get("values")))
        scopes.append((str(expr.get("scopeName")), str(expr.get("operator")), values))
    if not scopes:
        return True
    return resource == PODS and all(_scope_matches(s, o, v, obj) for s, o, v in scopes)


def used(store: Store, quota: Mapping[str, Any], names: Iterable[str]) -> dict[str, str]:
    """What the quota's namespace uses now of each of ``names``."""
    namespace = str(quota["metadata"].get("namespace", ""))
    names = list(names)
    totals: dict[str, str] = {name: "0" for name in names}
    for resource in {counted_resource(n) for n in names}:
        for obj in store.view(resource, namespace):
            if not in_scope(quota, resource, obj):
                continue
            for name, value in usage(resource, obj).items():
                if name in totals:
                    totals[name] = value if totals[name] == "0" else add(totals[name], value)
    return totals


def _listed(values: Mapping[str, str]) -> str:
    """``prettyPrint``: ``name=value`` pairs sorted by name, joined by commas."""
    return ",".join(f"{name}={values[name]}" for name in sorted(values))


def _unspecified(pod: Mapping[str, Any], hard: Iterable[str]) -> str:
    """``podEvaluator.Constraints``: the containers that do not say a capped quantity."""
    required = sorted(name for name in hard if name in _COMPUTE)
    missing: dict[str, list[str]] = {}
    spec = as_map(pod.get("spec"))
    for group in ("containers", "initContainers"):
        for container in map(as_map, as_list(spec.get(group))):
            resources = as_map(container.get("resources"))
            for name in required:
                key, _, resource = name.rpartition(".")
                if not as_map(resources.get(key or "requests")).get(resource):
                    missing.setdefault(name, []).append(str(container.get("name")))
    return "; ".join(f"{name} for: {','.join(sorted(set(c)))}" for name, c in missing.items())


class QuotaAdmission:
    """Refuses a create that would take a namespace beyond one of its quotas."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def validate(self, kind: Kind, obj: dict[str, Any]) -> None:
        namespace = obj["metadata"].get("namespace", "")
        if not kind.namespaced or not namespace:
            return
        for quota in self.store.view(QUOTAS, namespace):
            self._check(kind, quota, obj)

    def _check(self, kind: Kind, quota: Mapping[str, Any], obj: dict[str, Any]) -> None:
        hard = as_map(as_map(quota.get("spec")).get("hard"))
        if not in_scope(quota, kind.resource, obj):
            return
        name = quota["metadata"]["name"]
        requested = {k: v for k, v in usage(kind.resource, obj).items() if k in hard}
        if kind.resource == PODS and not _terminal(obj):
            missing = _unspecified(obj, hard)
            if missing:
                raise forbidden(kind, obj, f"failed quota: {name}: must specify {missing}")
        if not requested:
            return
        now = used(self.store, quota, requested)
        exceeded = sorted(
            k for k, v in requested.items() if amount(add(now[k], v)) > amount(hard[k])
        )
        if exceeded:
            why = (
                f"exceeded quota: {name}, "
                f"requested: {_listed({k: requested[k] for k in exceeded})}, "
                f"used: {_listed({k: now[k] for k in exceeded})}, "
                f"limited: {_listed({k: str(hard[k]) for k in exceeded})}"
            )
            raise forbidden(kind, obj, why)


class QuotaController:
    """Keeps each ResourceQuota's ``status.hard`` and ``status.used`` current."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def reconcile(self, quota: dict[str, Any]) -> float | None:
        if not alive(quota):
            return None
        hard = dict(as_map(as_map(quota.get("spec")).get("hard")))
        status = {"hard": hard, "used": used(self.plane.api.store, quota, hard)}
        self.plane.write_status(QUOTAS, quota, status)
        return None

    def affected(self, event: StoredEvent) -> list[Key]:
        """The quotas of the event's namespace that count what changed."""
        if event.resource == QUOTAS or not event.namespace:
            return []
        keys: list[Key] = []
        for quota in self.plane.api.store.view(QUOTAS, event.namespace):
            hard = as_map(as_map(quota.get("spec")).get("hard"))
            if any(counted_resource(name) == event.resource for name in hard):
                keys.append((QUOTAS, event.namespace, quota["metadata"]["name"]))
        return keys
