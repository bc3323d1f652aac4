"""Simulated workload controllers: Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, Pods.

A real cluster's controllers move workloads to ready; here, a short delay after a
workload changes, its ``status`` is written as the real controller would once the
pods were up (observedGeneration, replica counts, conditions, StatefulSet
revisions), so health checks and batch rollouts can be tested without pods. See
https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#deployment-status
and the StatefulSet partitioned rolling update.

A workload fails (never ready; a Job gets ``Failed``; a Deployment's Progressing
turns ``ProgressDeadlineExceeded``) when it or its pod template carries the
annotation ``sandbox.reconciler.dev/fail`` (``"true"``, ``CrashLoopBackOff`` or
``ImagePullBackOff``; see ``pods.py`` for what a pod shows), or when a container image
matches one of the server's ``fail_images`` glob patterns. The status computation
is pure (:func:`desired_status`); :class:`Controllers` schedules and writes it.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from reconciler.sandbox import pods
from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.store import Resource, StoredEvent
from reconciler.sandbox.workload_status import (
    daemonset_status,
    deployment_status,
    job_status,
    replicaset_status,
    statefulset_status,
)

FAIL_ANNOTATION = pods.FAIL_ANNOTATION
CONTROLLER_MANAGER = "kube-controller-manager"
DEFAULT_DELAY = 0.2
_FAIL_MARKS = {"true", pods.CRASH_LOOP.lower(), pods.IMAGE_PULL.lower()}

WORKLOADS: frozenset[Resource] = frozenset(
    {
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
        ("batch", "jobs"),
        ("", "pods"),
    }
)


def _fail_marked(meta: Any) -> bool:
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return str((annotations or {}).get(FAIL_ANNOTATION, "")).lower() in _FAIL_MARKS


def template_fails(template: Mapping[str, Any], fail_images: Sequence[str]) -> bool:
    """Whether pods from ``template`` (a pod template or a Pod) would never get ready."""
    if _fail_marked(template.get("metadata")):
        return True
    spec = template.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    images = [str(c.get("image", "")) for c in containers if isinstance(c, Mapping)]
    return any(fnmatchcase(image, pattern) for image in images for pattern in fail_images)


def revision_of(obj: Mapping[str, Any]) -> str:
    template = (obj.get("spec") or {}).get("template") or {}
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return f"{obj['metadata']['name']}-{digest[:10]}"


def desired_status(
    resource: Resource,
    obj: Mapping[str, Any],
    fail_images: Sequence[str],
    ordinals: list[tuple[str, bool]],
) -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    """The status a controller would report, and the StatefulSet pods' (revision, fails)."""
    spec = obj.get("spec") or {}
    template = obj if resource == ("", "pods") else spec.get("template") or {}
    fails = _fail_marked(obj.get("metadata")) or template_fails(template, fail_images)
    old = obj.get("status") or {}
    generation = int(obj["metadata"].get("generation", 1))
    if resource == ("apps", "statefulsets"):
        return statefulset_status(obj, generation, revision_of(obj), fails, ordinals)
    if resource == ("apps", "deployments"):
        return deployment_status(spec, generation, fails, old), []
    if resource == ("apps", "daemonsets"):
        return daemonset_status(generation, fails), []
    if resource == ("apps", "replicasets"):
        return replicaset_status(spec, generation, fails), []
    if resource == ("batch", "jobs"):
        return job_status(spec, fails, old), []
    return pods.pod_status(obj, pods.pod_failure(obj, fail_images), old), []


class Controllers:
    """Watches the store and, ``delay`` seconds after a workload changes, writes its status."""

    def __init__(self, api: SandboxApi, *, delay: float, fail_images: Sequence[str]) -> None:
        self.api = api
        self.delay = delay
        self.fail_images = tuple(fail_images)
        self._pending: dict[tuple[Resource, str, str], asyncio.TimerHandle] = {}
        self._ordinals: dict[str, list[tuple[str, bool]]] = {}
        api.store.listeners.append(self._on_event)

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource not in WORKLOADS:
            return
        meta = event.obj["metadata"]
        key = (event.resource, event.namespace, meta["name"])
        if event.type == "DELETED":
            self._ordinals.pop(meta.get("uid", ""), None)
            handle = self._pending.pop(key, None)
            if handle is not None:
                handle.cancel()
            return
        if key in self._pending or self._settled(event.resource, event.obj):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pending[key] = loop.call_later(self.delay, self._reconcile, key)

    def _settled(self, resource: Resource, obj: Mapping[str, Any]) -> bool:
        ordinals = self._ordinals.get(obj["metadata"].get("uid", ""), [])
        status, _ = desired_status(resource, obj, self.fail_images, ordinals)
        return status == (obj.get("status") or {})

    def _reconcile(self, key: tuple[Resource, str, str]) -> None:
        self._pending.pop(key, None)
        resource, namespace, name = key
        kind = self.api.kinds.by_resource(*resource)
        obj = self.api.store.get(resource, namespace, name)
        if kind is None or obj is None:
            return
        uid = obj["metadata"].get("uid", "")
        status, ordinals = desired_status(
            resource, obj, self.fail_images, self._ordinals.get(uid, [])
        )
        if ordinals:
            self._ordinals[uid] = ordinals
        if status == (obj.get("status") or {}):
            return
        body = copy.deepcopy(obj)
        body["status"] = status
        try:
            self.api.commit(kind, obj, body, WriteOptions(CONTROLLER_MANAGER), "status")
        except ApiError:
            # The object changed or vanished meanwhile; its own event reschedules us.
            return
