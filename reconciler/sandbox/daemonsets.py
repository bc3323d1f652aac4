"""The DaemonSet controller: one pod per node, replaced node by node on a template change.

Follows https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/ and
https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/: every node of the
sandbox (``--nodes``) runs one pod of each DaemonSet, bound to it by the controller
(``spec.nodeName``); pods carry the ``controller-revision-hash`` of the template's
ControllerRevision. ``RollingUpdate`` deletes outdated pods while no more than
``maxUnavailable`` (default 1) pods are unavailable, and the controller recreates them
from the new template; ``OnDelete`` replaces a pod only when someone deletes it.
Node selectors, taints and tolerations are not simulated: every node is eligible.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.controlplane import DAEMONSETS, NODES, PODS, ControlPlane
from reconciler.sandbox.owned import (
    alive,
    int_or_percent,
    owned,
    pod_from_template,
    random_suffix,
)
from reconciler.sandbox.replicasets import ReadySince
from reconciler.sandbox.statefulsets import REVISION_LABEL, ensure_revision, template_of


class DaemonSetController:
    def __init__(self, plane: ControlPlane, ready_since: ReadySince) -> None:
        self.plane = plane
        self.ready_since = ready_since

    def reconcile(self, ds: dict[str, Any]) -> float | None:
        if not alive(ds):
            return None
        spec = ds.get("spec") or {}
        namespace = ds["metadata"].get("namespace", "")
        nodes = sorted(n["metadata"]["name"] for n in self.plane.list(NODES, None))
        revision = ensure_revision(self.plane, ds, spec.get("template") or {})
        pods = [p for p in owned(self.plane.list(PODS, namespace), ds) if alive(p)]
        on_node: dict[str, list[dict[str, Any]]] = {n: [] for n in nodes}
        for pod in pods:
            node = str((pod.get("spec") or {}).get("nodeName", ""))
            if node in on_node:
                on_node[node].append(pod)
            else:
                self.plane.delete(PODS, pod)  # its node is gone
        for node, here in on_node.items():
            if not here:
                self._create_pod(ds, node, revision)
            for extra in here[1:]:
                self.plane.delete(PODS, extra)
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type") != "OnDelete":
            self._roll(ds, [here[0] for here in on_node.values() if here], revision, len(nodes))
        pods = [p for p in owned(self.plane.list(PODS, namespace), ds) if alive(p)]
        self.plane.write_status(DAEMONSETS, ds, self._status(ds, pods, revision, len(nodes)))
        return None

    def _create_pod(self, ds: dict[str, Any], node: str, revision: str) -> None:
        meta = ds["metadata"]
        body = pod_from_template(
            ds,
            template_of(self.plane, ds, revision),
            f"{meta['name']}-{random_suffix()}",
            labels={REVISION_LABEL: revision},
            spec={"nodeName": node},
        )
        self.plane.create(PODS, meta.get("namespace", ""), body)

    def _roll(
        self, ds: dict[str, Any], pods: list[dict[str, Any]], revision: str, nodes: int
    ) -> None:
        rolling = ((ds["spec"].get("updateStrategy") or {}).get("rollingUpdate")) or {}
        budget = int_or_percent(rolling.get("maxUnavailable", 1), nodes, round_up=False, default=1)
        budget = max(1, budget)
        unavailable = nodes - sum(1 for p in pods if self.ready_since(p) is not None)
        outdated = [
            p for p in pods if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision
        ]
        # outdated pods that are unavailable anyway go first and cost nothing
        outdated.sort(key=lambda p: self.ready_since(p) is not None)
        for pod in outdated:
            if self.ready_since(pod) is None:
                self.plane.delete(PODS, pod)
            elif unavailable < budget:
                self.plane.delete(PODS, pod)
                unavailable += 1

    def _status(
        self, ds: dict[str, Any], pods: list[dict[str, Any]], revision: str, nodes: int
    ) -> dict[str, Any]:
        ready = sum(1 for p in pods if self.ready_since(p) is not None)
        updated = sum(
            1 for p in pods if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision
        )
        status: dict[str, Any] = {
            "currentNumberScheduled": len({p["spec"].get("nodeName") for p in pods}),
            "numberMisscheduled": 0,
            "desiredNumberScheduled": nodes,
            "numberReady": ready,
            "observedGeneration": int(ds["metadata"].get("generation", 1)),
        }
        counts = {
            "updatedNumberScheduled": updated,
            "numberAvailable": ready,
            "numberUnavailable": max(0, nodes - ready),
        }
        status.update({k: v for k, v in counts.items() if v})
        return status
