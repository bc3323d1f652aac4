"""Kubernetes Events for what the daemon did, so ``kubectl describe`` and ``get events`` show it.

The daemon records Warning events on failures (``ApplyFailed``,
``HealthCheckFailed``, ``CatalogInvalid``, ...) and Normal events on progress,
against an instance's inventory ConfigMap or its main workload, through one
:class:`EventRecorder` per process. Events are best effort, as in client-go's
``record`` package: a failure to write one is logged and swallowed, never raised
into the reconcile pass.

Repeats are deduplicated like client-go's ``EventCorrelator``: the same object,
type, reason and message within ``dedupe_window`` seconds patches the existing
Event's ``count`` and ``lastTimestamp`` instead of creating a new one, so a
failure that persists for hours is one Event with a growing count.

``annotations`` (the daemon's ``reconciler.dev/pass``: the pass that recorded
it) are set on a new Event and on every bump, so the annotation names the last
pass that saw it; they are not part of the dedupe key, or a failure repeated by
every pass would be a new Event each time.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from reconciler.kube.client import MERGE_PATCH, KubeClient
from reconciler.kube.discovery import segment
from reconciler.kube.errors import ClusterUnreachable, NotFoundError
from reconciler.model.changeset import ObjectRef

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
EVENT_TYPES = ("Normal", "Warning")
MAX_MESSAGE = 1024  # events.k8s.io's limit for a note; long messages are cut to fit
MAX_REASON = 128
MAX_NAME = 253
CACHE_SIZE = 4096  # client-go's maxLruCacheEntries
DEFAULT_WINDOW = 600.0  # seconds; client-go aggregates within ten minutes
# Events about cluster-scoped objects live in "default", as the API server requires.
CLUSTER_SCOPED_EVENT_NAMESPACE = "default"


@dataclass(frozen=True)
class Involved:
    """The object an Event is about (``involvedObject``)."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any] | ObjectRef | Involved) -> Involved:
        """From an ``ObjectRef``, a full object, or a flat mapping of the same fields."""
        if isinstance(obj, Involved):
            return obj
        if isinstance(obj, ObjectRef):
            return cls(obj.api_version, obj.kind, obj.name, obj.namespace)
        meta = obj.get("metadata")
        fields = meta if isinstance(meta, Mapping) else obj
        return cls(
            api_version=str(obj.get("apiVersion") or ""),
            kind=str(obj.get("kind") or ""),
            name=str(fields.get("name") or ""),
            namespace=str(fields.get("namespace") or ""),
            uid=str(fields.get("uid") or ""),
        )

    def to_dict(self) -> dict[str, str]:
        data = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            data["namespace"] = self.namespace
        if self.uid:
            data["uid"] = self.uid
        return data

    @property
    def event_namespace(self) -> str:
        return self.namespace or CLUSTER_SCOPED_EVENT_NAMESPACE

    def __str__(self) -> str:
        return str(ObjectRef(self.api_version, self.kind, self.namespace, self.name))


@dataclass(frozen=True)
class _Seen:
    """A recorded Event we may bump instead of repeating."""

    namespace: str
    name: str
    count: int
    last_seen: float


_Key = tuple[Involved, str, str, str]


_Answer = TypeVar("_Answer")


class _Severities(Generic[_Answer]):
    """``warning`` and ``normal``: ``record`` with the Event's type filled in."""

    def record(
        self,
        involved: Mapping[str, Any] | ObjectRef | Involved,
        reason: str,
        message: str,
        type: EventType = "Normal",
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> _Answer:
        raise NotImplementedError

    def warning(
        self,
        involved: Mapping[str, Any] | ObjectRef,
        reason: str,
        message: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> _Answer:
        return self.record(involved, reason, message, "Warning", annotations=annotations)

    def normal(
        self,
        involved: Mapping[str, Any] | ObjectRef,
        reason: str,
        message: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> _Answer:
        return self.record(involved, reason, message, "Normal", annotations=annotations)


class EventRecorder(_Severities["dict[str, Any] | None"]):
    """Writes ``v1`` Events for one component; safe to share between threads."""

    def __init__(
        self,
        client: KubeClient,
        component: str = "reconciler",
        host: str | None = None,
        *,
        dedupe_window: float = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host if host is not None else socket.gethostname()
        self.dedupe_window = dedupe_window
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._last_stamp = 0

    def record(
        self,
        involved: Mapping[str, Any] | ObjectRef | Involved,
        reason: str,
        message: str,
        type: EventType = "Normal",
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """Create or bump an Event; returns the Event as written, None when it was not.

        Never raises: Events are best effort and must not fail a reconcile pass.
        """
        try:
            target = Involved.of(involved)
            return self.send(_Queued(target, reason, message, type, dict(annotations or {})))
        except Exception as e:  # best effort by contract: log, never fail the caller
            log.warning("event %s not recorded: %s", reason, e)
            return None

    def send(self, event: _Queued) -> dict[str, Any] | None:
        """As :meth:`record`, but an API server that cannot be reached raises
        ``ClusterUnreachable``: the Events queued behind this one would fail the same
        way, one by one, each after its retries (``EventQueue`` drops them at once)."""
        target, reason, type = event.target, event.reason, event.type
        try:
            problem = _invalid(target, reason, type)
            if problem:
                log.warning("event %s on %s not recorded: %s", reason, target, problem)
                return None
            message = _cut(event.message)
            return self._record(target, reason[:MAX_REASON], message, type, event.annotations)
        except ClusterUnreachable:
            raise
        except Exception as e:  # best effort by contract: log, never fail the caller
            log.warning("event %s not recorded: %s", reason, e)
            return None

    # -- create or bump -------------------------------------------------------------

    def _record(
        self,
        target: Involved,
        reason: str,
        message: str,
        type: EventType,
        annotations: dict[str, str],
    ) -> dict[str, Any] | None:
        key: _Key = (target, type, reason, message)
        now = self._clock()
        seen = self._recent(key, now)
        event: dict[str, Any] | None = None
        if seen is not None:
            event = self._bump(seen, now, annotations)
        if event is None:
            event = self._create(target, reason, message, type, now, annotations)
        meta = event.get("metadata") or {}
        count = int(event.get("count") or 1)
        self._remember(key, _Seen(target.event_namespace, str(meta.get("name")), count, now))
        return event

    def _recent(self, key: _Key, now: float) -> _Seen | None:
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or now - seen.last_seen > self.dedupe_window:
                return None
            self._seen.move_to_end(key)
            return seen

    def _remember(self, key: _Key, seen: _Seen) -> None:
        with self._lock:
            self._seen[key] = seen
            self._seen.move_to_end(key)
            while len(self._seen) > CACHE_SIZE:
                self._seen.popitem(last=False)

    def _bump(self, seen: _Seen, now: float, annotations: dict[str, str]) -> dict[str, Any] | None:
        """Patch the count of an Event we wrote; None when it has expired from the server."""
        patch: dict[str, Any] = {"count": seen.count + 1, "lastTimestamp": _timestamp(now)}
        if annotations:
            patch["metadata"] = {"annotations": annotations}
        path = f"/api/v1/namespaces/{segment(seen.namespace)}/events/{segment(seen.name)}"
        try:
            answer = self.client.request(
                "PATCH",
                path,
                subject=f"Event/{seen.namespace}/{seen.name}",
                verb="patch",
                body=patch,
                content_type=MERGE_PATCH,
            )
        except NotFoundError:  # the API server's TTL (1 h by default) removed it
            return None
        return answer.body

    def _event_name(self, name: str, now: float) -> str:
        """``<object>.<hex nanoseconds>`` as client-go names them, unique even on a coarse clock."""
        with self._lock:
            self._last_stamp = max(int(now * 1e9), self._last_stamp + 1)
            suffix = f".{self._last_stamp:x}"
        return name[: MAX_NAME - len(suffix)] + suffix

    def _create(
        self,
        target: Involved,
        reason: str,
        message: str,
        type: EventType,
        now: float,
        annotations: dict[str, str],
    ) -> dict[str, Any]:
        namespace = target.event_namespace
        stamp = _timestamp(now)
        metadata: dict[str, Any] = {
            "name": self._event_name(target.name, now),
            "namespace": namespace,
        }
        if annotations:
            metadata["annotations"] = annotations
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": target.to_dict(),
            "reason": reason,
            "message": message,
            "type": type,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        answer = self.client.request(
            "POST",
            f"/api/v1/namespaces/{segment(namespace)}/events",
            subject=f"Event/{namespace} ({reason} on {target})",
            verb="create",
            body=body,
        )
        return answer.body


def _invalid(target: Involved, reason: str, type: str) -> str:
    """Why an Event cannot be recorded ("" when it can)."""
    if not (target.api_version and target.kind and target.name):
        return "the involved object needs apiVersion, kind and name"
    if not reason:
        return "an Event needs a reason"
    if type not in EVENT_TYPES:
        return f"type must be Normal or Warning, not {type!r}"
    return ""


def _cut(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def _timestamp(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


MAX_PENDING = 10_000  # Events waiting to be sent; past it new ones are dropped (and counted)
SENDERS = 4  # lanes sending at once; every request still waits for the client's budget


class EventQueue(_Severities[None]):
    """Events sent in the background, so a pass never waits on them.

    A pass that installs a thousand instances records a thousand Events; written one
    after another on the pass's thread they took a third of the pass. Here a record
    is queued and returns at once. Up to ``senders`` threads send them, each request
    through the client's ``RequestBudget`` (``--max-requests-in-flight``), so Events
    never take more of the API server than the daemon's other requests may.

    The same object, type and reason always go to the same lane, so repeats of one
    Event are sent in order and the recorder's dedupe still bumps instead of creating
    twice. A lane's thread ends when its lane is empty: an idle daemon holds none.

    Bounded: at most ``limit`` Events wait; past it a new one is dropped, counted in
    ``dropped`` and logged once per overflow (best effort, as every Event is).
    ``flush`` waits until everything queued has been sent (shutdown, ``run --once``).

    When the API server cannot be reached (its retries used up), the Events waiting
    behind the one that failed would each fail the same way after retries of their
    own: they are dropped at once, and one line names the cluster and how many, not a
    line per Event. The same holds for ``discard`` (a flush that timed out) and
    ``close`` (the daemon stops; nothing is sent or logged after it).
    """

    def __init__(
        self,
        recorder: EventRecorder,
        *,
        senders: int = SENDERS,
        limit: int = MAX_PENDING,
        cluster: str = "",
    ) -> None:
        if senders < 1 or limit < 1:
            raise ValueError("an event queue needs at least one sender and room for one Event")
        self.recorder = recorder
        self.limit = limit
        self.cluster = cluster or recorder.client.host  # who the log lines are about
        self.dropped = 0
        self._lanes: list[deque[_Queued]] = [deque() for _ in range(senders)]
        self._sending = [False] * senders
        self._pending = 0
        self._overflowing = False
        self._unreachable = False  # an outage was reported; until an Event goes through
        self._closed = False
        self._cond = threading.Condition()

    @property
    def pending(self) -> int:
        """Events queued or being sent."""
        with self._cond:
            return self._pending

    def record(
        self,
        involved: Mapping[str, Any] | ObjectRef | Involved,
        reason: str,
        message: str,
        type: EventType = "Normal",
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an Event; never blocks on the API server and never raises."""
        try:
            target = Involved.of(involved)
        except Exception as e:  # best effort by contract, like EventRecorder.record
            log.warning("event %s not recorded: %s", reason, e)
            return
        item = _Queued(target, reason, message, type, dict(annotations or {}))
        with self._cond:
            if self._closed:
                self.dropped += 1
                return
            if self._pending >= self.limit:
                self.dropped += 1
                if not self._overflowing:
                    self._overflowing = True
                    log.warning(
                        "%d Events are waiting to be sent; dropping new ones until they are",
                        self._pending,
                    )
                return
            self._overflowing = False
            lane = hash((target, type, reason)) % len(self._lanes)
            self._lanes[lane].append(item)
            self._pending += 1
            if self._sending[lane]:
                return
            self._sending[lane] = True
        threading.Thread(
            target=self._send, args=(lane,), name=f"reconciler-events-{lane}", daemon=True
        ).start()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued Event was sent (or given up); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    def discard(self, why: str) -> int:
        """Drop every Event still waiting (not those being sent); one line says how many."""
        with self._cond:
            count = self._drop_waiting()
            closed = self._closed
        if count and not closed:
            log.warning("cluster %s: %d Events dropped: %s", self.cluster, count, why)
        return count

    def close(self, why: str = "the daemon is stopping") -> int:
        """Drop what waits (one line says how many) and refuse new Events: the daemon
        stops. An Event being sent may still go; if it fails, nothing is logged."""
        count = self.discard(why)
        with self._cond:
            self._closed = True
        return count

    def _drop_waiting(self) -> int:
        """Empty every lane; the caller holds ``_cond``."""
        count = sum(len(lane) for lane in self._lanes)
        for lane in self._lanes:
            lane.clear()
        self.dropped += count
        self._pending -= count
        if self._pending == 0:
            self._cond.notify_all()
        return count

    def _send(self, lane: int) -> None:
        queue = self._lanes[lane]
        while True:
            with self._cond:
                if not queue:
                    self._sending[lane] = False
                    return
                item = queue.popleft()
            try:
                self.recorder.send(item)
            except ClusterUnreachable as e:
                self._lost(e)
            except Exception as e:  # send() logs its own failures; this guards the counter
                log.warning("event %s not recorded: %s", item.reason, e)
            else:
                with self._cond:
                    self._unreachable = False
            finally:
                with self._cond:
                    self._pending -= 1
                    if self._pending == 0:
                        self._cond.notify_all()

    def _lost(self, error: ClusterUnreachable) -> None:
        """The API server is out of reach: this Event and every one waiting are dropped,
        in one line per outage (the pass that recorded them reports the outage too)."""
        with self._cond:
            count = self._drop_waiting() + 1
            self.dropped += 1
            quiet = self._unreachable or self._closed
            self._unreachable = True
        if not quiet:
            log.warning(
                "cluster %s: %d Events dropped: the API server cannot be reached (%s)",
                self.cluster,
                count,
                self.recorder.client.host,
            )


@dataclass(frozen=True, slots=True)
class _Queued:
    """An Event to write (``EventRecorder.send``), as recorded or queued."""

    target: Involved
    reason: str
    message: str
    type: EventType
    annotations: dict[str, str]
