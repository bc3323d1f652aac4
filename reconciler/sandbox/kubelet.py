"""Simulated nodes, scheduler and kubelet: pods get bound, start, become Ready, end.

A real pod is bound to a node by the scheduler (``spec.nodeName``), then the node's
kubelet pulls images, starts containers and reports status until the pod is Running
and Ready, or, for a Job's pod, until its containers exit
(https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/). Here ``--nodes``
Nodes exist from the start (``node-1``...), the scheduler picks the node with the
fewest pods, and each stage waits for the delays of :class:`~reconciler.sandbox.timing.Timing`.
The status of each stage is computed by the pure :func:`reconciler.sandbox.pods.pod_status_at`.

A pod marked for deletion (``termination.py``) is stopped as a kubelet stops it
(https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/): a ``Killing``
Event for each running container, the pod reported not Ready, then, once its grace
period (scaled by ``Timing.pod_grace_scale``) is over, its containers terminated and
the pod deleted for good with a grace period of 0. A pod with nothing running goes
without waiting; finalizers still hold the object after that.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.apply import now
from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.events import NORMAL, WARNING
from reconciler.sandbox.kinds import NODES, PODS
from reconciler.sandbox.owned import alive
from reconciler.sandbox.pods import (
    CRASH_LOOP,
    IMAGE_PULL,
    PodTimes,
    images_of,
    is_ready,
    killed_status,
    pod_failure,
    pod_status_at,
    running_containers,
    stopping_status,
)
from reconciler.sandbox.store import Tally

MIRROR = "kubernetes.io/config.mirror"
Event = tuple[str, str, str]  # type, reason, message
KUBELET = "kubelet"


def node_names(count: int) -> list[str]:
    return [f"node-{i}" for i in range(1, count + 1)]


def node_body(name: str) -> dict[str, Any]:
    """A Ready worker node, with the labels and capacity ``kubectl get nodes`` shows."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {"podCIDR": f"10.244.{name.rsplit('-', 1)[-1]}.0/24"},
    }


def node_status(name: str) -> dict[str, Any]:
    stamp = now()
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        ],
        "addresses": [
            {"type": "InternalIP", "address": "172.18.0.2"},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": {
            "kubeletVersion": "v1.31.0-sandbox",
            "containerRuntimeVersion": "sandbox://1.0",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "osImage": "reconciler sandbox",
            "kernelVersion": "",
            "kubeProxyVersion": "",
            "machineID": name,
            "systemUUID": name,
            "bootID": name,
        },
    }


def create_nodes(plane: ControlPlane) -> None:
    for name in node_names(plane.timing.nodes):
        if plane.get(NODES, "", name) is None:
            created = plane.create(NODES, "", node_body(name), manager=KUBELET)
            if created is not None:
                stored = plane.get(NODES, "", name)
                if stored is not None:
                    plane.write_status(NODES, stored, node_status(name), manager=KUBELET)


def _started(container: dict[str, Any]) -> list[Event]:
    """Pulling the image (``Always``) or finding it, then creating and starting it."""
    image, name = container.get("image", ""), container.get("name", "")
    if container.get("imagePullPolicy") == "Always":
        pulled = f'Successfully pulled image "{image}" in 10ms (10ms including waiting)'
        pulls = [(NORMAL, "Pulling", f'Pulling image "{image}"'), (NORMAL, "Pulled", pulled)]
    else:
        pulls = [(NORMAL, "Pulled", f'Container image "{image}" already present on machine')]
    return [
        *pulls,
        (NORMAL, "Created", f"Created container {name}"),
        (NORMAL, "Started", f"Started container {name}"),
    ]


def container_events(
    pod: dict[str, Any], container: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> list[Event]:
    """What the kubelet records when a container goes from state ``before`` to ``after``
    (``pkg/kubelet/events``: Pulling, Pulled, Created, Started, Failed, BackOff)."""
    ran = "running" in before or "terminated" in before
    waiting = (after.get("waiting") or {}).get("reason")
    was_waiting = (before.get("waiting") or {}).get("reason")
    if ("running" in after or "terminated" in after) and not ran:
        return _started(container)
    if waiting == IMAGE_PULL and was_waiting != IMAGE_PULL:
        image = container.get("image", "")
        why = (
            "rpc error: code = NotFound desc = failed to pull and unpack image "
            f'"{image}": not found'
        )
        return [
            (NORMAL, "Pulling", f'Pulling image "{image}"'),
            (WARNING, "Failed", f'Failed to pull image "{image}": {why}'),
            (WARNING, "Failed", "Error: ErrImagePull"),
            (NORMAL, "BackOff", f'Back-off pulling image "{image}"'),
            (WARNING, "Failed", "Error: ImagePullBackOff"),
        ]
    if waiting == CRASH_LOOP and was_waiting != CRASH_LOOP:
        meta = pod["metadata"]
        name = container.get("name", "")
        where = f"{meta['name']}_{meta.get('namespace', '')}({meta.get('uid', '')})"
        backoff = (
            WARNING,
            "BackOff",
            f"Back-off restarting failed container {name} in pod {where}",
        )
        return [*([] if ran else _started(container)), backoff]
    return []


def _node_of_live_pod(pod: dict[str, Any]) -> list[str]:
    """The node a workload pod counts against; the control plane's mirror pods count for
    nothing (a real control-plane node is tainted against workloads anyway)."""
    node = (pod.get("spec") or {}).get("nodeName")
    mirror = MIRROR in ((pod.get("metadata") or {}).get("annotations") or {})
    return [node] if node and alive(pod) and not mirror else []


class Kubelet:
    """Binds unscheduled pods, then moves each through its lifecycle over time."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._bound: dict[str, float] = {}  # pod uid -> clock when its kubelet first saw it
        self._ready: dict[str, float] = {}  # pod uid -> clock when it became Ready
        # pod uid -> (clock when its kubelet began to stop it, whether anything ran)
        self._stopping: dict[str, tuple[float, bool]] = {}
        self._pods_per_node: Tally | None = None

    def _load(self) -> Tally:
        """Live pods per node, kept by the store on every pod write (the scheduler's cache).

        Counting every pod of the cluster on each binding made scheduling quadratic.
        """
        if self._pods_per_node is None:
            self._pods_per_node = self.plane.api.store.tally(PODS, _node_of_live_pod)
        return self._pods_per_node

    def forget(self, uid: str) -> None:
        self._bound.pop(uid, None)
        self._ready.pop(uid, None)
        self._stopping.pop(uid, None)

    def ready_since(self, pod: dict[str, Any]) -> float | None:
        """When the pod became Ready (clock), None when it is not Ready."""
        if not is_ready(pod):
            return None
        return self._ready.get(pod["metadata"]["uid"], float("-inf"))

    def reconcile(self, pod: dict[str, Any]) -> float | None:
        if not alive(pod):
            return self._terminate(pod)
        spec = pod.get("spec") or {}
        if not spec.get("nodeName"):
            self._bind(pod)
            return None  # the binding's own event brings the pod back
        uid = pod["metadata"]["uid"]
        clock = self.plane.clock()
        born = self._bound.setdefault(uid, clock)
        times = PodTimes(
            self.plane.timing.start,
            self.plane.timing.ready_delay(images_of(pod)),
            self.plane.timing.run,
        )
        failure = pod_failure(pod, self.plane.fail_images)
        old = pod.get("status") or {}
        status, wait = pod_status_at(pod, clock - born, times, failure, old)
        if status != old and self.plane.write_status(PODS, pod, status, manager=KUBELET):
            self._record(pod, old, status)
        if is_ready({"status": status}):
            self._ready.setdefault(uid, clock)
        else:
            self._ready.pop(uid, None)
        return wait

    def _terminate(self, pod: dict[str, Any]) -> float | None:
        """Stop a pod being deleted; the seconds until its grace period ends, if it runs."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if not spec.get("nodeName") or grace is None:
            return None  # no kubelet runs it: the API server alone decides
        uid = meta["uid"]
        self._ready.pop(uid, None)
        clock = self.plane.clock()
        if uid not in self._stopping:
            self._stopping[uid] = (clock, self._kill(pod))
        began, ran = self._stopping[uid]
        old = pod.get("status") or {}
        left = began + self.plane.timing.grace(float(grace)) - clock if ran else 0.0
        if left > 0:
            self.plane.write_status(PODS, pod, stopping_status(old), manager=KUBELET)
            return left
        if ran:
            self.plane.write_status(PODS, pod, killed_status(old), manager=KUBELET)
        if grace:
            self.plane.delete(PODS, pod, grace=0)
        return None

    def removed(self, pod: dict[str, Any]) -> None:
        """A pod gone from the API: one deleted with no grace period is killed now."""
        uid = str(pod["metadata"].get("uid", ""))
        if uid not in self._stopping and (pod.get("spec") or {}).get("nodeName"):
            self._kill(pod)
        self.forget(uid)

    def _kill(self, pod: dict[str, Any]) -> bool:
        """``Killing`` for each running container; whether any was running."""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        running = running_containers(pod)
        for name in running:
            self.plane.events.emit(
                {**pod, "kind": "Pod", "apiVersion": "v1"},
                NORMAL,
                "Killing",
                f"Stopping container {name}",
                KUBELET,
                host=node,
                field_path=f"spec.containers{{{name}}}",
            )
        return bool(running)

    def _record(self, pod: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
        """The events of each container whose state changed with this status."""
        spec = pod["spec"]
        containers = {c.get("name"): c for c in spec.get("containers") or []}
        before = {c.get("name"): c.get("state") or {} for c in old.get("containerStatuses") or []}
        for status in new.get("containerStatuses") or []:
            name = status.get("name", "")
            for type_, reason, message in container_events(
                pod, containers.get(name) or {}, before.get(name) or {}, status.get("state") or {}
            ):
                self.plane.events.emit(
                    pod,
                    type_,
                    reason,
                    message,
                    KUBELET,
                    host=spec.get("nodeName") or "",
                    field_path=f"spec.containers{{{name}}}",
                )

    def _bind(self, pod: dict[str, Any]) -> None:
        """The scheduler's choice: the node with the fewest live pods (ties by name),
        never a cordoned one (``spec.unschedulable``, what ``kubectl drain`` sets first:
        https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/)."""
        nodes = [
            n["metadata"]["name"]
            for n in self.plane.api.store.view(NODES)
            if not (n.get("spec") or {}).get("unschedulable")
        ]
        if not nodes:
            return  # unschedulable: stays Pending, as on a cluster without nodes
        load = self._load()
        node = min(sorted(nodes), key=load.count)
        bound = self.plane.bind(pod, node)
        if bound is not None:
            self.plane.events.emit_scheduled(bound, node)
