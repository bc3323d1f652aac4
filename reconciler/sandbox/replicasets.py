"""The ReplicaSet controller: keep ``spec.replicas`` pods alive, report how many are ready.

As https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/ describes, a
ReplicaSet owns the pods that carry its ControllerRef, creates pods from its template
when there are too few, and deletes the least useful ones when there are too many:
unscheduled before scheduled, pending before running, not ready before ready, newest
first. A pod counts as available once it has been Ready for ``minReadySeconds``.
A sync creates (or deletes) at most ``BURST_REPLICAS`` pods, in slow-start batches.
A refused creation (admission: a ResourceQuota, a LimitRange) is a ``FailedCreate``
Warning event, and the sync runs again a second later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.events import NORMAL, WARNING
from reconciler.sandbox.kinds import PODS, REPLICASETS
from reconciler.sandbox.owned import alive, pod_from_template, random_suffix, replicas_of
from reconciler.sandbox.store import Resource

_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}
CREATE_RETRY = 1.0  # seconds before a sync whose pod creations were refused runs again
# kube-controller-manager's ``BurstReplicas``: a sync creates or deletes at most this many
# pods; the pods' own events bring the ReplicaSet back for the rest. Without it a
# ``replicas: 100000`` made one sync create every pod, and the sandbox served nothing else
# until it was done.
BURST_REPLICAS = 500


def slow_start(count: int) -> list[int]:
    """The batches ``slowStartBatch`` creates ``count`` pods in: 1, 2, 4, ... (the last
    one what is left). A batch with a refused creation ends the sync, so a quota that
    refuses every pod costs one request, not ``count``."""
    batches: list[int] = []
    size = 1
    while count > 0:
        batches.append(min(size, count))
        count -= batches[-1]
        size *= 2
    return batches


def active_pods(plane: ControlPlane, owner: dict[str, Any]) -> list[dict[str, Any]]:
    """The owner's pods that still count: not being deleted, not finished."""
    pods = plane.pods_of(owner)
    return [
        p
        for p in pods
        if alive(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def deletion_order(pods: list[dict[str, Any]], ready_since: ReadySince) -> list[dict[str, Any]]:
    """Pods in the order a ReplicaSet deletes them (``controller.ActivePods`` ranking)."""

    def rank(pod: dict[str, Any]) -> tuple[int, int, int]:
        status = pod.get("status") or {}
        scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
        phase = _PHASE_ORDER.get(str(status.get("phase", "Pending")), 0)
        return scheduled, phase, 0 if ready_since(pod) is None else 1

    newest_first = sorted(
        pods, key=lambda p: str(p["metadata"].get("creationTimestamp", "")), reverse=True
    )
    return sorted(newest_first, key=rank)  # stable: newest first within a rank


ReadySince = Callable[[dict[str, Any]], float | None]


class ReplicaSetController:
    """Also the ReplicationController's controller: the same sync under another name
    (kube-controller-manager runs one ``ReplicaSetController`` for both, its
    ReplicationController manager converting each RC to a ReplicaSet), so
    ``resource`` and ``component`` say which it is serving."""

    def __init__(
        self,
        plane: ControlPlane,
        ready_since: ReadySince,
        resource: Resource = REPLICASETS,
        component: str = "replicaset-controller",
    ) -> None:
        self.plane = plane
        self.ready_since = ready_since
        self.resource = resource
        self.component = component

    def reconcile(self, rs: dict[str, Any]) -> float | None:
        if not alive(rs):
            return None
        spec = rs.get("spec") or {}
        want = replicas_of(spec)
        pods = active_pods(self.plane, rs)
        failures: list[ApiError] = []
        if len(pods) < want:
            for batch in slow_start(min(want - len(pods), BURST_REPLICAS)):
                for _ in range(batch):
                    self._create_pod(rs, spec, failures)
                if failures:  # the batches after a refused creation are skipped
                    break
            for error in failures[:1]:  # one a sync, as the controller's slow start stops
                message = f"Error creating: {error.message}"
                self.plane.events.emit(rs, WARNING, "FailedCreate", message, self.component)
        elif len(pods) > want:
            doomed = min(len(pods) - want, BURST_REPLICAS)
            for pod in deletion_order(pods, self.ready_since)[:doomed]:
                self.plane.delete(PODS, pod)
                self._record(rs, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")
        pods = active_pods(self.plane, rs)
        status, wait = self._status(rs, pods)
        self.plane.write_status(self.resource, rs, status)
        if failures:  # refused (a quota, say): try again later, as its work queue does
            return min(wait or CREATE_RETRY, CREATE_RETRY)
        return wait

    def _create_pod(
        self, rs: dict[str, Any], spec: dict[str, Any], failures: list[ApiError]
    ) -> None:
        name = f"{rs['metadata']['name']}-{random_suffix()}"
        body = pod_from_template(rs, spec.get("template") or {}, name)
        namespace = rs["metadata"].get("namespace", "")
        if self.plane.create(PODS, namespace, body, refused=failures.append):
            self._record(rs, "SuccessfulCreate", f"Created pod: {name}")

    def _record(self, rs: dict[str, Any], reason: str, message: str) -> None:
        self.plane.events.emit(rs, NORMAL, reason, message, self.component)

    def _status(
        self, rs: dict[str, Any], pods: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], float | None]:
        spec = rs.get("spec") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = float(spec.get("minReadySeconds") or 0)
        clock = self.plane.clock()
        ready = available = 0
        waits: list[float] = []
        for pod in pods:
            since = self.ready_since(pod)
            if since is None:
                continue
            ready += 1
            if clock - since >= min_ready:
                available += 1
            else:
                waits.append(since + min_ready - clock)
        labelled = sum(
            1
            for p in pods
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
        )
        status: dict[str, Any] = {"replicas": len(pods)}
        if labelled:
            status["fullyLabeledReplicas"] = labelled
        if ready:
            status["readyReplicas"] = ready
        if available:
            status["availableReplicas"] = available
        status["observedGeneration"] = int(rs["metadata"].get("generation", 1))
        return status, min(waits) if waits else None
