"""The handle every simulated controller gets: reads, writes and the clock.

Controllers write through the same API machinery clients use (validation, field
managers, resourceVersions, watch events), so what they do is visible exactly as
on a real cluster: ``kubectl get rs,pods -w`` shows a rollout move. Each write names
its real field manager (``kube-controller-manager``, ``kube-scheduler``, ``kubelet``).
A write that loses a race (409, or the object vanished) is dropped: the store event
of whoever won schedules the controller again, as a real informer resync would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.events import EventRecorder
from reconciler.sandbox.gc import DeleteOptions
from reconciler.sandbox.kinds import (
    PODS,
    Kind,
)
from reconciler.sandbox.owned import CONTROLLER_MANAGER
from reconciler.sandbox.store import ListOfObjects, Resource
from reconciler.sandbox.timing import Timing

log = logging.getLogger(__name__)


Names = list[str]
Deleter = Callable[[Kind, str, str, DeleteOptions], Any]  # ``gc.Lifecycle.delete``


@dataclass
class ControlPlane:
    """What a controller may do; ``delete`` goes through the garbage collector."""

    api: SandboxApi
    timing: Timing
    fail_images: Sequence[str]
    delete_object: Deleter
    clock: Callable[[], float] = time.monotonic
    manager: str = CONTROLLER_MANAGER
    _kinds: dict[Resource, Kind] = field(default_factory=dict)
    events: EventRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.events = EventRecorder(self.api)

    def kind(self, resource: Resource) -> Kind:
        found = self._kinds.get(resource) or self.api.kinds.by_resource(*resource)
        assert found is not None, resource
        self._kinds[resource] = found
        return found

    def list(self, resource: Resource, namespace: str | None) -> list[dict[str, Any]]:
        return self.api.store.list(resource, namespace)

    def names(self, resource: Resource, namespace: str | None) -> Names:
        """The names of ``resource``'s objects (nodes for the scheduler), without copies."""
        return [o["metadata"]["name"] for o in self.api.store.view(resource, namespace)]

    def owned(self, resource: Resource, owner: dict[str, Any]) -> ListOfObjects:
        """The objects of ``resource`` that ``owner`` controls (in its namespace), as
        stored: read them, never change them.

        The controllers only read what they own (writes build new bodies, which
        ``update`` and ``write_status`` copy), and copying every pod of every
        workload on each sync was the sandbox's biggest cost during rollouts.
        """
        meta = owner["metadata"]
        return self.api.store.owned_views(resource, meta.get("namespace", ""), str(meta["uid"]))

    def pods_of(self, owner: dict[str, Any]) -> ListOfObjects:
        """The pods ``owner`` controls, as stored: read them, never change them."""
        return self.owned(PODS, owner)

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        return self.api.store.get(resource, namespace, name)

    def create(
        self,
        resource: Resource,
        namespace: str,
        body: dict[str, Any],
        manager: str = "",
        *,
        refused: Callable[[ApiError], None] | None = None,
    ) -> dict[str, Any] | None:
        """Create ``body``; None when refused (``refused`` then hears why: admission's
        403s are worth a controller's ``FailedCreate`` event)."""
        try:
            return self.api.create(
                self.kind(resource), namespace, body, WriteOptions(manager or self.manager)
            )
        except ApiError as e:
            log.debug("sandbox controller: create %s refused: %s", resource, e.message)
            if refused is not None:
                refused(e)
            return None

    def update(
        self, resource: Resource, old: dict[str, Any], body: dict[str, Any], manager: str = ""
    ) -> bool:
        """Write the main resource (``spec``/``metadata``); False when the write lost a race."""
        # shallow: ``commit`` copies the body it stores
        meta = {**body["metadata"], "resourceVersion": old["metadata"]["resourceVersion"]}
        body = {**body, "metadata": meta}
        try:
            self.api.commit(self.kind(resource), old, body, WriteOptions(manager or self.manager))
        except ApiError as e:
            log.debug("sandbox controller: update %s refused: %s", resource, e.message)
            return False
        return True

    def write_status(
        self,
        resource: Resource,
        old: dict[str, Any],
        status: dict[str, Any],
        manager: str = "",
        *,
        annotations: dict[str, str] | None = None,
    ) -> bool:
        """Write ``status`` through the status subresource; ``annotations`` (when given)
        go with it, as the Deployment controller's ``UpdateStatus`` carries its revision
        annotation (never a generation bump). False when nothing changed or it lost a race.
        """
        if status == (old.get("status") or {}) and annotations is None:
            return False
        body = {**old, "status": status}  # shallow: ``commit`` copies what it stores
        if annotations is not None:
            body["metadata"] = {**old["metadata"], "annotations": annotations}
        try:
            self.api.commit(
                self.kind(resource), old, body, WriteOptions(manager or self.manager), "status"
            )
        except ApiError as e:
            log.debug("sandbox controller: status of %s refused: %s", resource, e.message)
            return False
        return True

    def bind(self, pod: dict[str, Any], node: str) -> dict[str, Any] | None:
        """The scheduler's ``pods/binding`` of ``pod`` to ``node``: the bound pod as
        stored (only read), or None when the binding was refused."""
        try:
            return self.api.bind(self.kind(PODS), pod, node)
        except ApiError as e:
            log.debug("sandbox scheduler: binding refused: %s", e.message)
            return None

    def delete(self, resource: Resource, obj: dict[str, Any], *, grace: int | None = None) -> None:
        """Delete ``obj`` (that very object: its uid is a precondition, so a namesake
        created meanwhile is left alone); ``grace`` is the DELETE's gracePeriodSeconds."""
        meta = obj["metadata"]
        options = DeleteOptions(preconditions={"uid": meta.get("uid")}, grace_period=grace)
        try:
            self.delete_object(
                self.kind(resource), meta.get("namespace", ""), meta["name"], options
            )
        except ApiError as e:
            log.debug("sandbox controller: delete %s refused: %s", meta["name"], e.message)
