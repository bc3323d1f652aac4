"""The sandbox's object store: objects, the global resourceVersion and watch history.

Like etcd behind a real API server, one counter orders every write; each write
records a watch event in a bounded history so a watch can resume from a
resourceVersion, and one that is too old gets ``410 Gone``
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
Only the server's event loop touches the store, so it needs no locks. ``api.py``
is its only writer; ``server.py`` reads it for list and watch.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reconciler.sandbox.apierrors import ApiError

Resource = tuple[str, str]  # (group, plural)
ObjKey = tuple[str, str]  # (namespace or "", name)

DEFAULT_HISTORY_LIMIT = 1000
CLOSE = "CLOSE"  # an internal event type that ends a watch stream, never sent
ListOfObjects = list[dict[str, Any]]
ResourceList = list[Resource]


@dataclass(frozen=True)
class StoredEvent:
    """One change, as a watch reports it; ``obj`` is never mutated after recording."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: Resource
    namespace: str
    obj: dict[str, Any]
    # The object before a MODIFIED or DELETED change: selector watches need it to
    # report an object that starts (ADDED) or stops (DELETED) matching, and a list
    # at an older resourceVersion rolls the change back with it.
    old: dict[str, Any] | None = None


@dataclass(eq=False)
class Watcher:
    """A live subscription: events for one resource (and maybe one namespace)."""

    resource: Resource
    namespace: str | None
    queue: asyncio.Queue[StoredEvent] = field(default_factory=asyncio.Queue)

    def wants(self, event: StoredEvent) -> bool:
        if event.resource != self.resource:
            return False
        return self.namespace is None or event.namespace == self.namespace


EventList = list[StoredEvent]


class Store:
    """Objects by resource and (namespace, name), with a bounded event history."""

    def __init__(self, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self._objects: dict[Resource, dict[ObjKey, dict[str, Any]]] = {}
        # resource -> namespace -> keys: a namespaced list (what the simulated
        # controllers make on every event) reads its namespace alone, not every object
        # of the kind, so a big cluster does not make each event cost more
        self._by_namespace: dict[Resource, dict[str, set[ObjKey]]] = {}
        self._rv = 1
        self._history: deque[StoredEvent] = deque()
        self._history_limit = max(1, history_limit)
        self._compacted_rv = 0  # the newest resourceVersion no longer in history
        self._watchers: set[Watcher] = set()
        # Called synchronously after every recorded event (GC, CRDs, controllers).
        self.listeners: list[Callable[[StoredEvent], None]] = []

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self._objects.get(resource, {}).get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, resource: Resource, namespace: str | None = None) -> ListOfObjects:
        items = self._objects.get(resource, {})
        if namespace is None:
            keys = sorted(items)
        else:
            keys = sorted(self._by_namespace.get(resource, {}).get(namespace, ()))
        return [copy.deepcopy(items[k]) for k in keys]

    def view(self, resource: Resource, namespace: str | None = None) -> ListOfObjects:
        """``list`` without the copies: the stored objects themselves, never to be mutated.

        Stored objects are replaced on every write, never changed in place, so a
        reader that copies only what it keeps (a list request returning the few
        objects its selector matches) may scan them as they are.
        """
        items = self._objects.get(resource, {})
        keys = sorted(k for k in items if namespace is None or k[0] == namespace)
        return [items[k] for k in keys]

    def select(
        self, resource: Resource, namespace: str, wanted: Callable[[dict[str, Any]], bool]
    ) -> ListOfObjects:
        """Copies of the objects in ``namespace`` that ``wanted`` accepts, in ``list`` order.

        ``wanted`` reads the stored objects in place, so a controller that needs
        only its own pods copies those alone: copying every pod of the namespace
        first (``list``) made each sync O(pods) deep copies, and a sandbox with
        thousands of pods spent its time copying objects it then dropped.
        """
        items = self._objects.get(resource, {})
        keys = sorted(k for k, obj in items.items() if k[0] == namespace and wanted(obj))
        return [copy.deepcopy(items[k]) for k in keys]

    def count_by(self, resource: Resource, key: Callable[[dict[str, Any]], Any]) -> dict[Any, int]:
        """How many stored objects give each value of ``key`` (read in place, no copies)."""
        counts: dict[Any, int] = {}
        for obj in self._objects.get(resource, {}).values():
            value = key(obj)
            counts[value] = counts.get(value, 0) + 1
        return counts

    def resources(self) -> ResourceList:
        return [r for r, items in self._objects.items() if items]

    def iter_all(self) -> Iterator[tuple[Resource, dict[str, Any]]]:
        """Every stored object (a snapshot, safe to write while iterating)."""
        for resource, items in list(self._objects.items()):
            for obj in list(items.values()):
                yield resource, obj

    def put(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new or changed object, stamping the next resourceVersion."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        items = self._objects.setdefault(resource, {})
        event_type = "MODIFIED" if key in items else "ADDED"
        self._by_namespace.setdefault(resource, {}).setdefault(key[0], set()).add(key)
        previous = items.get(key)
        self._rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._rv)
        items[key] = stored
        self._record(StoredEvent(self._rv, event_type, resource, key[0], stored, previous))
        return copy.deepcopy(stored)

    def remove(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        items = self._objects.get(resource, {})
        obj = items.pop((namespace, name), None)
        if obj is None:
            return None
        self._by_namespace.get(resource, {}).get(namespace, set()).discard((namespace, name))
        self._rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._record(StoredEvent(self._rv, "DELETED", resource, namespace, gone, obj))
        return copy.deepcopy(gone)

    def _record(self, event: StoredEvent) -> None:
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self._compacted_rv = self._history.popleft().rv
        for watcher in list(self._watchers):
            if watcher.wants(event):
                watcher.queue.put_nowait(event)
        for listener in list(self.listeners):
            listener(event)

    def compact(self) -> None:
        """Forget all history (a debug hook: any older resourceVersion now gets 410)."""
        if self._history:
            self._compacted_rv = self._history[-1].rv
        self._history.clear()

    @property
    def compacted_resource_version(self) -> int:
        """The newest resourceVersion whose change is no longer in history (0: none)."""
        return self._compacted_rv

    def snapshot(
        self, resource: Resource, namespace: str | None, rv: int, *, copied: bool = True
    ) -> ListOfObjects:
        """The objects of ``resource`` as they were at resourceVersion ``rv``.

        Like etcd's MVCC reads behind a real server's paginated and ``Exact`` lists:
        the current objects with every later change rolled back. Raises 410 Gone
        when the history needed for that was compacted, and 504 (as the API server
        does for a revision etcd does not have yet) for a future ``rv``.
        """
        if rv > self._rv:
            raise ApiError(
                504,
                f"Timeout: Too large resource version: {rv}, current: {self._rv}",
                reason="Timeout",
                causes=[
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
            )
        if rv < self._compacted_rv:
            raise ApiError(410, "The resourceVersion for the provided list is too old.")
        items = {
            key: obj
            for key, obj in self._objects.get(resource, {}).items()
            if namespace is None or key[0] == namespace
        }
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if event.resource != resource or (
                namespace is not None and event.namespace != namespace
            ):
                continue
            key = (event.namespace, event.obj["metadata"]["name"])
            if event.type == "ADDED" or event.old is None:
                items.pop(key, None)
            else:
                items[key] = event.old
        if not copied:
            return list(items.values())  # as ``view``: for readers that copy what they keep
        return [copy.deepcopy(obj) for obj in items.values()]

    def events_since(self, rv: int, resource: Resource, namespace: str | None) -> EventList:
        """History after ``rv``; raises 410 Gone when some of it was compacted."""
        if rv < self._compacted_rv:
            raise ApiError(
                410,
                f"too old resource version: {rv} ({self._compacted_rv + 1})",
                reason="Expired",
            )
        probe = Watcher(resource, namespace, asyncio.Queue())
        return [e for e in self._history if e.rv > rv and probe.wants(e)]

    def subscribe(self, resource: Resource, namespace: str | None) -> Watcher:
        watcher = Watcher(resource, namespace)
        self._watchers.add(watcher)
        return watcher

    def close_watches(self) -> None:
        """Tell every open watch stream to end (server shutdown)."""
        for watcher in list(self._watchers):
            watcher.queue.put_nowait(StoredEvent(self._rv, CLOSE, watcher.resource, "", {}))

    def unsubscribe(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
