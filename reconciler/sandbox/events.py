"""Events, as the controllers, the scheduler and the kubelet of a real cluster record them.

``kubectl describe`` and any tool that explains a failure read the core/v1 Events of
an object (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/,
https://kubernetes.io/docs/tasks/debug/debug-application/debug-running-pod/#example-debugging-pending-pods).
:class:`EventRecorder` writes them as client-go's recorder does: named
``<object>.<unix nanoseconds in hex>``, with ``involvedObject`` (a container's events
carry its ``fieldPath``), ``source`` and ``reportingComponent``, ``count`` 1 and the
two timestamps; an event that repeats one still stored (same object, source, reason
and message) raises its ``count`` and ``lastTimestamp`` instead, as the recorder's
correlator does. The scheduler records through ``events.k8s.io/v1``, which the core
view shows with ``eventTime``, ``action`` and no ``source``.

The reasons and messages are those of Kubernetes 1.30 (``pkg/kubelet/events``,
``pkg/controller``): ``ScalingReplicaSet``, ``SuccessfulCreate``/``SuccessfulDelete``,
``Scheduled``, ``Pulling``/``Pulled``, ``Created``, ``Started``, ``Killing``,
``Failed``/``BackOff``, ``Completed``, ``BackoffLimitExceeded``.

Cheap by design: an event is stored directly (no admission, defaulting or
managed-fields bookkeeping a client write needs), and the recorder keeps at most
:data:`EVENT_LIMIT` of them, deleting the oldest, as the API server's one-hour event
TTL bounds a real cluster's.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.apply import now
from reconciler.sandbox.kinds import EVENTS, NAMESPACES

EVENT_LIMIT = 5000
NORMAL = "Normal"
WARNING = "Warning"
_Key = tuple[str, str, str, str, str, str, str]


def _micro_time() -> str:
    """``metav1.MicroTime`` as it is serialized: RFC 3339 with microseconds."""
    stamp = time.time()
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp))
    return f"{seconds}.{int(stamp % 1 * 1_000_000):06d}Z"


def involved(obj: Mapping[str, Any], field_path: str = "") -> dict[str, Any]:
    """An ``ObjectReference`` to ``obj`` (``field_path``: ``spec.containers{web}``)."""
    meta = obj["metadata"]
    ref = {
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": obj.get("apiVersion", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if field_path:
        ref["fieldPath"] = field_path
    return {k: v for k, v in ref.items() if v}


class EventRecorder:
    """Writes Events into the store; one per sandbox, shared by every controller."""

    def __init__(self, api: SandboxApi, limit: int = EVENT_LIMIT) -> None:
        self.api = api
        self.limit = limit
        self._recent: OrderedDict[_Key, tuple[str, str]] = OrderedDict()  # -> (ns, name)
        self._sequence = itertools.count()

    def emit(
        self,
        obj: Mapping[str, Any],
        type_: str,
        reason: str,
        message: str,
        component: str,
        *,
        host: str = "",
        field_path: str = "",
    ) -> None:
        """Record that ``component`` (on node ``host``) saw ``reason`` about ``obj``."""
        ref = involved(obj, field_path)
        namespace = ref.get("namespace") or "default"
        key = (component, host, ref.get("uid", ""), field_path, type_, reason, message)
        if self._repeat(key):
            return
        stamp = now()
        name = f"{ref['name']}.{time.time_ns() + next(self._sequence):x}"
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
            },
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "source": {"component": component, **({"host": host} if host else {})},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type_,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host,
        }
        self._store(key, event)

    def emit_scheduled(self, pod: Mapping[str, Any], node: str) -> None:
        """The scheduler's ``Scheduled``, recorded through ``events.k8s.io/v1``."""
        meta = pod["metadata"]
        ref = involved(pod)
        namespace = meta.get("namespace", "default")
        message = f"Successfully assigned {namespace}/{meta['name']} to {node}"
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{time.time_ns() + next(self._sequence):x}",
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
            },
            "involvedObject": ref,
            "reason": "Scheduled",
            "message": message,
            "source": {},
            "firstTimestamp": None,
            "lastTimestamp": None,
            "type": NORMAL,
            "eventTime": _micro_time(),
            "action": "Binding",
            "reportingComponent": "default-scheduler",
            "reportingInstance": f"default-scheduler-{node}",
        }
        self._store(("default-scheduler", node, ref.get("uid", ""), "", "", "", message), event)

    def _repeat(self, key: _Key) -> bool:
        """Count a repeat of a stored event on it (the correlator's aggregation)."""
        where = self._recent.get(key)
        if where is None:
            return False
        stored = self.api.store.get(EVENTS, *where)  # a copy: stored objects never change
        if stored is None:
            del self._recent[key]
            return False
        stored["count"] = int(stored.get("count") or 1) + 1
        stored["lastTimestamp"] = now()
        self.api.store.put(EVENTS, stored, handover=True)
        self._recent.move_to_end(key)
        return True

    def _store(self, key: _Key, event: dict[str, Any]) -> None:
        meta = event["metadata"]
        if self.api.store.view_one(NAMESPACES, "", meta["namespace"]) is None:
            return  # the namespace is gone (a pod deleted with it): nowhere to record
        self.api.store.put(EVENTS, event, handover=True)
        self._recent[key] = (meta["namespace"], meta["name"])
        while len(self._recent) > self.limit:
            _, (namespace, name) = self._recent.popitem(last=False)
            self.api.store.remove(EVENTS, namespace, name)
