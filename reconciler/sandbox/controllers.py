"""The simulated control plane: a work queue that runs each controller after a delay.

A real cluster's controllers watch the API and reconcile each changed object, and the
objects that own it, again and again until the world matches the spec; each sync may
ask to be run again later (a pod becoming available after ``minReadySeconds``, a
rollout's progress deadline, a Job's ``activeDeadlineSeconds``). :class:`Controllers`
does the same on the sandbox's event loop: a store event queues the object's own
controller and its owner's (through the ControllerRef), ``controller_delay`` later,
with one pending run per object. The controllers are the Deployment, ReplicaSet,
StatefulSet, DaemonSet, Job, CronJob, ReplicationController, Endpoints/EndpointSlice
(``endpoints.py``) and ResourceQuota (``quota.py``) controllers and the kubelet; each
writes through :class:`~reconciler.sandbox.controlplane.ControlPlane`.

Failure injection: the annotation ``sandbox.reconciler.dev/fail`` (``"true"``,
``CrashLoopBackOff`` or ``ImagePullBackOff``) on a pod template, on a pod or on the
workload itself, or a container image matching one of the server's ``fail_images``
globs, gives pods that never become Ready (a Job's pods fail); see ``pods.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.controlplane import (
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    PODS,
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    SERVICES,
    STATEFULSETS,
    ControlPlane,
)
from reconciler.sandbox.cronjobs import CronJobController
from reconciler.sandbox.daemonsets import DaemonSetController
from reconciler.sandbox.deployments import DeploymentController
from reconciler.sandbox.endpoints import EndpointsController
from reconciler.sandbox.events import PodKillings
from reconciler.sandbox.jobs import JobController
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.kubelet import Kubelet, create_nodes
from reconciler.sandbox.quota import QUOTAS, QuotaController
from reconciler.sandbox.replicasets import ReplicaSetController
from reconciler.sandbox.statefulsets import StatefulSetController
from reconciler.sandbox.store import Resource, StoredEvent
from reconciler.sandbox.timing import DEFAULT_DELAY, Timing

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

_READ_ONLY = frozenset({PODS, DEPLOYMENTS, REPLICASETS})


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
        delete: Callable[[Kind, str, str], Any],
    ) -> None:
        self.api = api
        self.timing = timing
        self.plane = ControlPlane(api, timing, tuple(fail_images), delete)
        self.kubelet = Kubelet(self.plane)
        self.deployments = DeploymentController(self.plane)
        self.jobs = JobController(self.plane)
        self.cronjobs = CronJobController(self.plane)
        ready = self.kubelet.ready_since
        self.handlers: dict[Resource, Controller] = {
            PODS: self.kubelet,
            REPLICASETS: ReplicaSetController(self.plane, ready),
            REPLICATIONCONTROLLERS: ReplicaSetController(
                self.plane, ready, REPLICATIONCONTROLLERS, "replication-controller"
            ),
            DEPLOYMENTS: self.deployments,
            STATEFULSETS: StatefulSetController(self.plane, ready),
            DAEMONSETS: DaemonSetController(self.plane, ready),
            JOBS: self.jobs,
            CRONJOBS: self.cronjobs,
        }
        endpoints, quotas = EndpointsController(self.plane), QuotaController(self.plane)
        self.handlers.update({SERVICES: endpoints, QUOTAS: quotas})
        self.watchers: list[Watcher] = [endpoints, quotas]
        self._pending: dict[Key, asyncio.TimerHandle] = {}
        api.store.listeners.append(self._on_event)
        PodKillings(self.plane.events)
        create_nodes(self.plane)

    @property
    def delay(self) -> float:
        return self.timing.controller_delay

    def _on_event(self, event: StoredEvent) -> None:
        meta = event.obj["metadata"]
        if event.type == "DELETED" and event.resource in self.handlers:
            uid = str(meta.get("uid", ""))
            self.kubelet.forget(uid)
            self.deployments.forget(uid)
            self.jobs.forget(uid)
            self.cronjobs.forget(uid)
            handle = self._pending.pop((event.resource, event.namespace, meta["name"]), None)
            if handle is not None:
                handle.cancel()
        elif event.resource in self.handlers:
            self._enqueue((event.resource, event.namespace, meta["name"]), self.delay)
        for ref in meta.get("ownerReferences") or []:
            owner = _OWNER_KINDS.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
            if ref.get("controller") and owner is not None:
                self._enqueue((owner, event.namespace, str(ref.get("name"))), self.delay)
        if event.resource == NODES:
            for ds in self.api.store.list(DAEMONSETS):
                key = (DAEMONSETS, ds["metadata"].get("namespace", ""), ds["metadata"]["name"])
                self._enqueue(key, self.delay)
        for watcher in self.watchers:
            for key in watcher.affected(event):
                self._enqueue(key, self.delay)

    def _enqueue(self, key: Key, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a unit test of the API alone): nothing is simulated
        when = loop.time() + delay
        pending = self._pending.get(key)
        if pending is not None:
            if pending.when() <= when:
                return
            pending.cancel()
        self._pending[key] = loop.call_at(when, self._run, key)

    def _run(self, key: Key) -> None:
        self._pending.pop(key, None)
        resource, namespace, name = key
        # The kubelet and the Deployment and ReplicaSet controllers only read their
        # object (their writes build new bodies): they get the stored object, not a
        # copy; the other workload controllers get copies they may edit.
        read = self.api.store.view_one if resource in _READ_ONLY else self.api.store.get
        obj = read(resource, namespace, name)
        handler = self.handlers.get(resource)
        if obj is None or handler is None:
            return
        try:
            again = handler.reconcile(obj)
        except Exception:  # a sandbox bug: say so, and try again rather than stall
            log.exception(
                "sandbox: the %s controller failed on %s/%s", resource[1], namespace, name
            )
            again = 1.0
        if again is not None:
            self._enqueue(key, max(again, 0.001))
