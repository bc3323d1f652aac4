"""The APIService objects of the aggregation layer: one per served group/version.

``kubectl get apiservices`` on any cluster lists an APIService named
``<version>.<group>`` (``v1.`` for the core group) for every group/version
kube-apiserver serves itself, labelled ``kube-aggregator.kubernetes.io/automanaged:
onstart``, with no ``service`` and the condition ``Available`` (reason ``Local``),
and one per served version of every CustomResourceDefinition's group
(``automanaged: "true"``, group priority 1000, version priority 100) for as long as a
CRD serves it (https://kubernetes.io/docs/concepts/extend-kubernetes/api-extension/apiserver-aggregation/,
https://kubernetes.io/docs/tasks/extend-kubernetes/configure-aggregation-layer/).
The priorities of the built-in groups are kube-apiserver's
(``DefaultGenericAPIServicePriorities``). ``bootstrap.py`` starts :class:`APIServices`.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apply import now
from reconciler.sandbox.fielderrors import as_list, as_map
from reconciler.sandbox.kinds import API_SERVICES, CRDS
from reconciler.sandbox.store import StoredEvent

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
_APISERVER = WriteOptions("kube-apiserver")
# (group priority, version priority) of each built-in group/version
PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apiregistration.k8s.io", "v1"): (18000, 15),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
}
_CRD_PRIORITY = (1000, 100)


def api_service(group: str, version: str, *, crd: bool = False) -> dict[str, Any]:
    group_priority, version_priority = _CRD_PRIORITY if crd else PRIORITIES[(group, version)]
    spec: dict[str, Any] = {
        "version": version,
        "groupPriorityMinimum": group_priority,
        "versionPriority": version_priority,
    }
    if group:
        spec = {"group": group, **spec}
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": f"{version}.{group}",
            "labels": {AUTOMANAGED: "true" if crd else "onstart"},
        },
        "spec": spec,
    }


def _local_status() -> dict[str, Any]:
    return {
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastTransitionTime": now(),
                "reason": "Local",
                "message": "Local APIServices are always available",
            }
        ]
    }


def _served(crd: dict[str, Any]) -> set[tuple[str, str]]:
    spec = as_map(crd.get("spec"))
    group = str(spec.get("group", ""))
    return {
        (group, str(as_map(v).get("name")))
        for v in as_list(spec.get("versions"))
        if as_map(v).get("served")
    }


class APIServices:
    """Registers the built-in group/versions at start and follows the CRDs."""

    def __init__(self, api: SandboxApi) -> None:
        self.api = api

    def start(self) -> None:
        served = {(k.group, k.version) for k in self.api.kinds.all() if not k.crd}
        for group, version in sorted(served):
            if (group, version) in PRIORITIES:
                self._ensure(api_service(group, version))
        self.api.store.listeners.append(self._on_event)

    def _ensure(self, body: dict[str, Any]) -> None:
        kind = self.api.kinds.by_kind(body["apiVersion"], body["kind"])
        assert kind is not None
        name = body["metadata"]["name"]
        if self.api.store.view_one(API_SERVICES, "", name) is not None:
            return
        created = self.api.create(kind, "", body, _APISERVER)
        stored = self.api.store.get(API_SERVICES, "", created["metadata"]["name"])
        if stored is not None:
            body = {**stored, "status": _local_status()}
            self.api.commit(kind, stored, body, _APISERVER, "status")

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource != CRDS:
            return
        wanted: set[tuple[str, str]] = set()
        for crd in self.api.store.view(CRDS, None):
            if not crd["metadata"].get("deletionTimestamp"):
                wanted |= _served(crd)
        for group, version in sorted(wanted):
            if (group, version) not in PRIORITIES:
                self._ensure(api_service(group, version, crd=True))
        for stored in self.api.store.list(API_SERVICES, None):
            labels = as_map(stored["metadata"].get("labels"))
            spec = as_map(stored.get("spec"))
            key = (str(spec.get("group", "")), str(spec.get("version", "")))
            if labels.get(AUTOMANAGED) == "true" and key not in wanted:
                self.api.store.remove(API_SERVICES, "", stored["metadata"]["name"])
