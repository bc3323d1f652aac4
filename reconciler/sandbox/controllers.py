"""The simulated control plane: a work queue that runs each controller after a delay.

A real cluster's controllers watch the API and reconcile each changed object, and the
objects that own it, again and again until the world matches the spec; each sync may
ask to be run again later (a pod becoming available after ``minReadySeconds``, a
rollout's progress deadline, a Job's ``activeDeadlineSeconds``). :class:`Controllers`
does the same off the request path: the store's listener only hands each event to
the work queue (``workqueue.py``), whose worker task queues the object's own
controller and its owner's (through the ControllerRef), ``controller_delay`` later,
with one pending run per object, and runs them between requests. The controllers are
the Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, ReplicationController,
Endpoints/EndpointSlice (``endpoints.py``), ResourceQuota (``quota.py``) and disruption
(PodDisruptionBudget) controllers, the kubelet (``kubelet.py``), the persistent-volume
controller (``provisioning.py``), the CRD naming and establishing controllers
(``establishing.py``) and, given a range of addresses, a cloud's load balancers
(``loadbalancers.py``); each writes through
:class:`~reconciler.sandbox.controlplane.ControlPlane`.

Failure injection: the annotation ``sandbox.reconciler.dev/fail`` (``"true"``,
``CrashLoopBackOff`` or ``ImagePullBackOff``) on a pod template, on a pod or on the
workload itself, or a container image matching one of the server's ``fail_images``
globs, gives pods that never become Ready (a Job's pods fail); see ``pods.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from copy import deepcopy
from typing import Any, Protocol

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.controlplane import ControlPlane, Deleter
from reconciler.sandbox.cronjobs import CronJobController
from reconciler.sandbox.daemonsets import DaemonSetController
from reconciler.sandbox.deployments import DeploymentController
from reconciler.sandbox.disruption import DisruptionController
from reconciler.sandbox.endpoints import EndpointsController
from reconciler.sandbox.establishing import Establishing
from reconciler.sandbox.jobs import JobController
from reconciler.sandbox.kinds import (
    CLAIMS,
    CRDS,
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    PDBS,
    PODS,
    QUOTAS,
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    SERVICES,
    STATEFULSETS,
    VOLUMES,
)
from reconciler.sandbox.kubelet import Kubelet, create_nodes
from reconciler.sandbox.loadbalancers import LoadBalancers
from reconciler.sandbox.provisioning import ClaimBinder, VolumeController
from reconciler.sandbox.quota import QuotaController
from reconciler.sandbox.replicasets import ReplicaSetController
from reconciler.sandbox.statefulsets import StatefulSetController
from reconciler.sandbox.store import Resource, StoredEvent
from reconciler.sandbox.timing import DEFAULT_DELAY, Timing
from reconciler.sandbox.workqueue import WorkQueue

__all__ = ["DEFAULT_DELAY", "Controllers"]

log = logging.getLogger(__name__)
Key = tuple[Resource, str, str]
_OWNER_KINDS: dict[tuple[str, str], Resource] = {
    ("apps/v1", "ReplicaSet"): REPLICASETS,
    ("apps/v1", "Deployment"): DEPLOYMENTS,
    ("apps/v1", "StatefulSet"): STATEFULSETS,
    ("apps/v1", "DaemonSet"): DAEMONSETS,
    ("batch/v1", "Job"): JOBS,
    ("batch/v1", "CronJob"): CRONJOBS,
    ("v1", "ReplicationController"): REPLICATIONCONTROLLERS,
}

_READ_ONLY = frozenset({PODS, DEPLOYMENTS, REPLICASETS, PDBS})
_BUDGETED = frozenset({PODS, DEPLOYMENTS, REPLICASETS, STATEFULSETS})


class Controller(Protocol):
    def reconcile(self, obj: dict[str, Any]) -> float | None: ...


class Watcher(Protocol):
    """A controller that also syncs objects a change of another kind concerns."""

    def affected(self, event: StoredEvent) -> list[Key]: ...


class Controllers:
    """Runs every simulated controller; one pending sync per object, coalesced."""

    def __init__(
        self,
        api: SandboxApi,
        *,
        timing: Timing,
        fail_images: Sequence[str],
        delete: Deleter,
    ) -> None:
        self.api = api
        self.timing = timing
        self.plane = ControlPlane(api, timing, tuple(fail_images), delete)
        self.kubelet = Kubelet(self.plane)
        self.deployments = DeploymentController(self.plane)
        self.jobs = JobController(self.plane)
        self.cronjobs = CronJobController(self.plane)
        ready = self.kubelet.ready_since
        self.queue: WorkQueue[StoredEvent, Key] = WorkQueue(self._on_event, self._run)
        endpoints, quotas = EndpointsController(self.plane), QuotaController(self.plane)
        # A resource may have several controllers (a Service's Endpoints and its
        # cloud load balancer); each runs on every sync of the object.
        self.handlers: dict[Resource, list[Controller]] = {
            PODS: [self.kubelet],
            REPLICASETS: [ReplicaSetController(self.plane, ready)],
            REPLICATIONCONTROLLERS: [
                ReplicaSetController(
                    self.plane, ready, REPLICATIONCONTROLLERS, "replication-controller"
                )
            ],
            DEPLOYMENTS: [self.deployments],
            STATEFULSETS: [StatefulSetController(self.plane, ready)],
            DAEMONSETS: [DaemonSetController(self.plane, ready)],
            JOBS: [self.jobs],
            CRONJOBS: [self.cronjobs],
            PDBS: [DisruptionController(self.plane)],
            CLAIMS: [ClaimBinder(self.plane, self.queue.add_after)],
            VOLUMES: [VolumeController(self.plane)],
            CRDS: [Establishing(self.plane)],
            SERVICES: [endpoints],
            QUOTAS: [quotas],
        }
        if timing.load_balancer_ips is not None:
            balancers = LoadBalancers(self.plane, timing.load_balancer_ips)
            self.handlers[SERVICES].append(balancers)
        self.watchers: list[Watcher] = [endpoints, quotas]
        api.store.listeners.append(self.queue.submit)
        create_nodes(self.plane)

    @property
    def delay(self) -> float:
        return self.timing.controller_delay

    def start(self) -> None:
        """Run on the running loop: a server built there runs already; one copied from a
        paused template (``testing.py``) goes on with what its template had pending."""
        self.queue.start()

    async def stop(self) -> None:
        """Stop running controllers (the server shuts down)."""
        await self.queue.stop()

    def _on_event(self, event: StoredEvent) -> None:
        """Queue what ``event`` concerns (on the worker, never in the write's request)."""
        meta = event.obj["metadata"]
        if event.type == "DELETED" and event.resource in self.handlers:
            uid = str(meta.get("uid", ""))
            if event.resource == PODS:
                self.kubelet.removed(event.old or event.obj)
            self.kubelet.forget(uid)
            self.deployments.forget(uid)
            self.jobs.forget(uid)
            self.cronjobs.forget(uid)
            self.queue.forget((event.resource, event.namespace, meta["name"]))
        elif event.resource in self.handlers:
            self.queue.add_after((event.resource, event.namespace, meta["name"]), self.delay)
        for ref in meta.get("ownerReferences") or []:
            owner = _OWNER_KINDS.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
            if ref.get("controller") and owner is not None:
                self.queue.add_after((owner, event.namespace, str(ref.get("name"))), self.delay)
        if event.resource in _BUDGETED and event.namespace:
            # a budget counts its pods and their controllers' scale
            for pdb in self.api.store.view(PDBS, event.namespace):
                self.queue.add_after((PDBS, event.namespace, pdb["metadata"]["name"]), self.delay)
        if event.resource == NODES:
            # a node (un)cordoned or added: the scheduler tries its pending pods again
            for pod in self.api.store.view(PODS):
                if not (pod.get("spec") or {}).get("nodeName"):
                    key = (PODS, pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
                    self.queue.add_after(key, self.delay)
            for ds in self.api.store.view(DAEMONSETS):
                key = (DAEMONSETS, ds["metadata"].get("namespace", ""), ds["metadata"]["name"])
                self.queue.add_after(key, self.delay)
        for watcher in self.watchers:
            for key in watcher.affected(event):
                self.queue.add_after(key, self.delay)

    def _run(self, key: Key) -> float | None:
        """Reconcile ``key``'s object; when to run it again (None: when an event asks)."""
        resource, namespace, name = key
        # The kubelet and the Deployment and ReplicaSet controllers only read their
        # object (their writes build new bodies): they get the stored object, not a
        # copy; the other workload controllers get copies they may edit.
        read = self.api.store.view_one if resource in _READ_ONLY else self.api.store.get
        obj = read(resource, namespace, name)
        handlers = self.handlers.get(resource)
        if obj is None or not handlers:
            return None
        try:
            return _reconcile_all(handlers, obj)
        except Exception:  # a sandbox bug: say so, and try again rather than stall
            log.exception(
                "sandbox: the %s controller failed on %s/%s", resource[1], namespace, name
            )
            return 1.0


def _reconcile_all(handlers: Sequence[Controller], obj: dict[str, Any]) -> float | None:
    """Run each of a resource's controllers on ``obj``; the soonest any asks to run again.

    Each controller reads the object itself in a real cluster, so each but the last
    gets its own copy: one controller's edits never show in what the next one sees.
    """
    again = [
        handler.reconcile(obj if i == len(handlers) - 1 else deepcopy(obj))
        for i, handler in enumerate(handlers)
    ]
    return min((d for d in again if d is not None), default=None)
