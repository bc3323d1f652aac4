"""The DaemonSet controller: one pod per node, replaced node by node on a template change.

Follows https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/ and
https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/: every node of the
sandbox (``--nodes``) runs one pod of each DaemonSet, bound to it by the controller
(``spec.nodeName``). Each template is a ControllerRevision ``<name>-<hash>`` labelled
``controller-revision-hash: <hash>``, and every pod carries that hash under the same
label (kubernetes/kubernetes pkg/controller/daemon/update.go ``snapshot`` and
util/daemonset_util.go ``CreatePodTemplate``): a pod is updated when its hash is the
one of the revision matching the current template (``IsPodUpdated``), which is also
how ``kubectl rollout history daemonset`` and ``rollout undo`` find revisions.
``RollingUpdate`` deletes outdated pods while no more than ``maxUnavailable`` (default
1, a percentage rounded up) pods are unavailable, and the controller recreates them
from the new template; ``OnDelete`` replaces a pod only when someone deletes it, and
then from the current template. A pod is available once Ready for
``minReadySeconds``. A node whose pod is being deleted gracefully (Terminating) gets
its new pod once the old one is gone, as the real controller counts a terminating
pod as the node's daemon pod (pkg/controller/daemon ``podsShouldBeOnNode``).
Node selectors, taints and tolerations are not simulated: every node is eligible.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.kinds import DAEMONSETS, NODES, PODS
from reconciler.sandbox.owned import (
    alive,
    int_or_percent,
    pod_from_template,
    random_suffix,
)
from reconciler.sandbox.replicasets import ReadySince
from reconciler.sandbox.statefulsets import REVISION_LABEL, ensure_revision, template_of

Pod = dict[str, Any]


def _hash_of(pod: Pod) -> str:
    return str((pod["metadata"].get("labels") or {}).get(REVISION_LABEL, ""))


class DaemonSetController:
    def __init__(self, plane: ControlPlane, ready_since: ReadySince) -> None:
        self.plane = plane
        self.ready_since = ready_since

    def reconcile(self, ds: dict[str, Any]) -> float | None:
        if not alive(ds):
            return None
        spec = ds.get("spec") or {}
        nodes = sorted(self.plane.names(NODES, None))
        revision = ensure_revision(
            self.plane, ds, spec.get("template") or {}, hash_label=REVISION_LABEL
        )
        digest = revision[len(ds["metadata"]["name"]) + 1 :]
        owned_pods = self.plane.pods_of(ds)
        leaving = {str((p.get("spec") or {}).get("nodeName", "")) for p in owned_pods}
        pods = [p for p in owned_pods if alive(p)]
        on_node: dict[str, list[Pod]] = {n: [] for n in nodes}
        for pod in pods:
            node = str((pod.get("spec") or {}).get("nodeName", ""))
            if node in on_node:
                on_node[node].append(pod)
            else:
                self.plane.delete(PODS, pod)  # its node is gone
        for node, here in on_node.items():
            if not here and node not in leaving:
                self._create_pod(ds, node, revision, digest)
            for extra in here[1:]:
                self.plane.delete(PODS, extra)
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type") != "OnDelete":
            self._roll(ds, [here[0] for here in on_node.values() if here], digest, len(nodes))
        pods = [p for p in self.plane.pods_of(ds) if alive(p)]
        status, wait = self._status(ds, pods, digest, len(nodes))
        self.plane.write_status(DAEMONSETS, ds, status)
        return wait

    def _available(self, ds: dict[str, Any], pod: Pod) -> bool:
        """Ready for ``minReadySeconds`` (``podutil.IsPodAvailable``)."""
        since = self.ready_since(pod)
        min_ready = float((ds.get("spec") or {}).get("minReadySeconds") or 0)
        return since is not None and self.plane.clock() - since >= min_ready

    def _create_pod(self, ds: dict[str, Any], node: str, revision: str, digest: str) -> None:
        meta = ds["metadata"]
        body = pod_from_template(
            ds,
            template_of(self.plane, ds, revision),
            f"{meta['name']}-{random_suffix()}",
            labels={REVISION_LABEL: digest},
            spec={"nodeName": node},
        )
        self.plane.create(PODS, meta.get("namespace", ""), body)

    def _roll(self, ds: dict[str, Any], pods: list[Pod], digest: str, nodes: int) -> None:
        """Delete outdated pods within ``maxUnavailable`` (``rollingUpdate`` in update.go):
        an outdated pod that is unavailable anyway goes at once and costs nothing."""
        rolling = ((ds["spec"].get("updateStrategy") or {}).get("rollingUpdate")) or {}
        budget = int_or_percent(rolling.get("maxUnavailable", 1), nodes, round_up=True, default=1)
        budget = max(1, budget)
        unavailable = nodes - sum(1 for p in pods if self._available(ds, p))
        outdated = [p for p in pods if _hash_of(p) != digest]
        outdated.sort(key=lambda p: self._available(ds, p))
        for pod in outdated:
            if not self._available(ds, pod):
                self.plane.delete(PODS, pod)
            elif unavailable < budget:
                self.plane.delete(PODS, pod)
                unavailable += 1

    def _status(
        self, ds: dict[str, Any], pods: list[Pod], digest: str, nodes: int
    ) -> tuple[dict[str, Any], float | None]:
        """The status, and when to look again for a pod that becomes available."""
        ready = [since for p in pods if (since := self.ready_since(p)) is not None]
        min_ready = float((ds.get("spec") or {}).get("minReadySeconds") or 0)
        clock = self.plane.clock()
        available = sum(1 for since in ready if clock - since >= min_ready)
        waits = [since + min_ready - clock for since in ready if clock - since < min_ready]
        status: dict[str, Any] = {
            "currentNumberScheduled": len({p["spec"].get("nodeName") for p in pods}),
            "numberMisscheduled": 0,
            "desiredNumberScheduled": nodes,
            "numberReady": len(ready),
            "observedGeneration": int(ds["metadata"].get("generation", 1)),
        }
        counts = {  # omitempty in the API types
            "updatedNumberScheduled": sum(1 for p in pods if _hash_of(p) == digest),
            "numberAvailable": available,
            "numberUnavailable": max(0, nodes - available),
        }
        status.update({k: v for k, v in counts.items() if v})
        return status, (min(waits) if waits else None)
