"""The sandbox's object store: objects, the global resourceVersion and watch history.

Like etcd behind a real API server, one counter orders every write; each write
records a watch event in a bounded history so a watch can resume from a
resourceVersion, and one that is too old gets ``410 Gone``
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
As the API server's watch cache does (one cache per resource type, sized by
``--watch-cache-sizes``,
https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/),
each resource keeps a window of its own: at 10,000 instances the pods' and
Events' churn must not push the Deployments' history out, or every watch of a
quiet resource that reconnects gets 410 and relists. Its size follows the watch
cache's too (``staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go``):
it keeps every event younger than 75 s (a bookmark's interval plus a margin, so a
watch that resumes from its last bookmark finds its place), between 100 and
102,400 events; a fixed ``history_limit`` replaces that for tests that need 410.
Only the server's event loop touches the store, so it needs no locks. ``api.py``
is its only writer; ``server.py`` reads it for list and watch.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from time import monotonic
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import clone
from reconciler.sandbox.kinds import Resource as Resource  # the store's key, re-exported
from reconciler.sandbox.owned import controller_uid

ObjKey = tuple[str, str]  # (namespace or "", name)
KeyList = list[ObjKey]

DEFAULT_HISTORY_LIMIT = 0  # 0: each resource's window sized as the watch cache sizes it
# The watch cache's bounds (watch_cache.go): eventFreshDuration, and the capacity's
# lower and upper bounds
FRESH_SECONDS = 75.0
LOWER_BOUND = 100
UPPER_BOUND = 100 * 1024
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
Values = Callable[[dict[str, Any]], Iterable[Hashable]]


class Tally:
    """How many stored objects of one resource hold each value, kept on every write.

    What a real API server keeps in its allocators (Service IPs, node ports) and
    what the scheduler keeps in its cache (pods per node): counting it again from
    every object on each write made creating N objects cost O(N^2).
    """

    def __init__(self, values: Values) -> None:
        self._values = values
        self._counts: dict[Hashable, int] = {}

    def change(self, obj: dict[str, Any] | None, step: int) -> None:
        if obj is None:
            return
        for value in self._values(obj):
            count = self._counts.get(value, 0) + step
            if count > 0:
                self._counts[value] = count
            else:
                self._counts.pop(value, None)

    def count(self, value: Hashable) -> int:
        return self._counts.get(value, 0)

    def held_by_others(self, own: dict[str, Any] | None) -> Taken:
        """The values held by objects other than ``own`` (the stored version of the writer)."""
        mine: dict[Hashable, int] = {}
        for value in self._values(own) if own is not None else ():
            mine[value] = mine.get(value, 0) + 1
        return Taken(self._counts, mine)


class Taken(AbstractSet[Hashable]):
    """A set view: values some other object holds (counts minus the writer's own)."""

    def __init__(self, counts: dict[Hashable, int], own: dict[Hashable, int]) -> None:
        self._counts = counts
        self._own = own

    def __contains__(self, value: object) -> bool:
        try:
            return self._counts.get(value, 0) - self._own.get(value, 0) > 0
        except TypeError:  # unhashable: nobody holds it
            return False

    def __iter__(self) -> Iterator[Hashable]:
        return (v for v in self._counts if v in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Store:
    """Objects by resource and (namespace, name), with a bounded event history."""

    def __init__(
        self, history_limit: int = DEFAULT_HISTORY_LIMIT, clock: Callable[[], float] = monotonic
    ) -> None:
        """``history_limit``: events kept per resource (0: as the watch cache keeps them)."""
        self._objects: dict[Resource, dict[ObjKey, dict[str, Any]]] = {}
        # resource -> namespace -> keys: a namespaced list (what the simulated
        # controllers make on every event) reads its namespace alone, not every object
        # of the kind, so a big cluster does not make each event cost more
        self._by_namespace: dict[Resource, dict[str, set[ObjKey]]] = {}
        self._rv = 1
        # one window per resource, as the watch cache keeps one per resource type
        self._histories: dict[Resource, deque[StoredEvent]] = {}
        self._history_limit = max(0, history_limit)
        self._clock = clock
        # per window: when each of its events was recorded (only when sized by age)
        self._recorded: dict[Resource, deque[float]] = {}
        # per window: the newest resourceVersion no longer in its history
        self._compacted: dict[Resource, int] = {}
        # the open watches of each resource: a write wakes only its own resource's
        self._watchers: dict[Resource, set[Watcher]] = {}
        self._tallies: dict[Resource, list[Tally]] = {}
        # resource -> controller uid -> keys: a controller's own objects (its pods, a
        # Deployment's ReplicaSets) without scanning its namespace on every sync
        self._by_owner: dict[Resource, dict[str, set[ObjKey]]] = {}
        # Called synchronously after every recorded event (GC, CRDs, controllers).
        self.listeners: list[Callable[[StoredEvent], None]] = []

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self._objects.get(resource, {}).get((namespace, name))
        return clone(obj) if obj is not None else None

    def view_one(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """``get`` without the copy: the stored object itself, never to be mutated."""
        return self._objects.get(resource, {}).get((namespace, name))

    def list(self, resource: Resource, namespace: str | None = None) -> ListOfObjects:
        items = self._objects.get(resource, {})
        return [clone(items[k]) for k in self._keys(resource, namespace)]

    def _keys(self, resource: Resource, namespace: str | None) -> KeyList:
        """The keys of ``resource`` in ``namespace`` (None: all), sorted, from the index.

        A scan of every object of the kind per namespaced read made each controller
        sync cost O(objects in the cluster): the sandbox slowed down as it filled up.
        """
        if namespace is None:
            return sorted(self._objects.get(resource, {}))
        return sorted(self._by_namespace.get(resource, {}).get(namespace, ()))

    def view(self, resource: Resource, namespace: str | None = None) -> ListOfObjects:
        """``list`` without the copies: the stored objects themselves, never to be mutated.

        Stored objects are replaced on every write, never changed in place, so a
        reader that copies only what it keeps (a list request returning the few
        objects its selector matches) may scan them as they are.
        """
        items = self._objects.get(resource, {})
        return [items[k] for k in self._keys(resource, namespace)]

    def owned_views(self, resource: Resource, namespace: str, uid: str) -> ListOfObjects:
        """The stored objects in ``namespace`` whose controller is ``uid``, in ``list``
        order, never to be mutated (an index: a controller's sync no longer scans its
        namespace). Only the owner's namespace counts, as for a real controller, which
        lists its own namespace."""
        items = self._objects.get(resource, {})
        keys = sorted(k for k in self._by_owner.get(resource, {}).get(uid, ()) if k[0] == namespace)
        return [items[k] for k in keys]

    def _index_owner(
        self, resource: Resource, key: ObjKey, obj: dict[str, Any] | None, step: int
    ) -> None:
        uid = controller_uid(obj) if obj is not None else None
        if uid is None:
            return
        owners = self._by_owner.setdefault(resource, {})
        if step > 0:
            owners.setdefault(uid, set()).add(key)
            return
        keys = owners.get(uid)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del owners[uid]

    def tally(self, resource: Resource, values: Values) -> Tally:
        """A :class:`Tally` of ``values`` over ``resource``, kept up to date from now on."""
        tally = Tally(values)
        for obj in self._objects.get(resource, {}).values():
            tally.change(obj, +1)
        self._tallies.setdefault(resource, []).append(tally)
        return tally

    def resources(self) -> ResourceList:
        return [r for r, items in self._objects.items() if items]

    def iter_all(self) -> Iterator[tuple[Resource, dict[str, Any]]]:
        """Every stored object (a snapshot, safe to write while iterating)."""
        for resource, items in list(self._objects.items()):
            for obj in list(items.values()):
                yield resource, obj

    def put(
        self,
        resource: Resource,
        obj: dict[str, Any],
        *,
        handover: bool = False,
        share: bool = True,
    ) -> dict[str, Any]:
        """Store a new or changed object, stamping the next resourceVersion.

        ``handover``: ``obj`` is a fresh object nobody else holds (the API built it
        for this write), stored as it is instead of copied first. The stored object
        itself is returned, never to be mutated (every caller only reads or
        serializes it; a copy of each written object was a few percent of the
        sandbox's time); ``share=False`` returns a copy the caller may change.
        """
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        items = self._objects.setdefault(resource, {})
        event_type = "MODIFIED" if key in items else "ADDED"
        self._by_namespace.setdefault(resource, {}).setdefault(key[0], set()).add(key)
        previous = items.get(key)
        self._rv += 1
        self._index_owner(resource, key, previous, -1)
        stored = obj if handover else clone(obj)
        stored["metadata"]["resourceVersion"] = str(self._rv)
        items[key] = stored
        for tally in self._tallies.get(resource, ()):
            tally.change(previous, -1)
            tally.change(stored, +1)
        self._index_owner(resource, key, stored, +1)
        self._record(StoredEvent(self._rv, event_type, resource, key[0], stored, previous))
        return stored if share else clone(stored)

    def remove(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """Delete an object; returns its deleted state (shared: never to be mutated)."""
        items = self._objects.get(resource, {})
        obj = items.pop((namespace, name), None)
        if obj is None:
            return None
        self._by_namespace.get(resource, {}).get(namespace, set()).discard((namespace, name))
        for tally in self._tallies.get(resource, ()):
            tally.change(obj, -1)
        self._index_owner(resource, (namespace, name), obj, -1)
        self._rv += 1
        # stored objects are never changed in place: the deleted state shares all but
        # its metadata with the last stored one (two deep copies per delete were a
        # tenth of the sandbox's time during rollouts); the caller only reads it
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
        self._record(StoredEvent(self._rv, "DELETED", resource, namespace, gone, obj))
        return gone

    def _window(self, resource: Resource) -> deque[StoredEvent]:
        history = self._histories.get(resource)
        if history is None:
            history = self._histories[resource] = deque()
            self._recorded[resource] = deque()
            self._compacted[resource] = 0
        return history

    def _record(self, event: StoredEvent) -> None:
        history = self._window(event.resource)
        history.append(event)
        if self._history_limit:
            if len(history) > self._history_limit:
                self._compacted[event.resource] = history.popleft().rv
        else:
            self._keep_fresh(event.resource, history)
        for watcher in list(self._watchers.get(event.resource, ())):
            if watcher.wants(event):
                watcher.queue.put_nowait(event)
        for listener in list(self.listeners):
            listener(event)

    def _keep_fresh(self, resource: Resource, history: deque[StoredEvent]) -> None:
        """Drop the oldest events beyond the lower bound once older than FRESH_SECONDS
        (or beyond the upper bound): the watch cache's dynamic capacity."""
        recorded = self._recorded[resource]
        now = self._clock()
        recorded.append(now)
        while len(history) > LOWER_BOUND and (
            len(history) > UPPER_BOUND or now - recorded[0] > FRESH_SECONDS
        ):
            recorded.popleft()
            self._compacted[resource] = history.popleft().rv

    def compact(self) -> None:
        """Forget all history (a debug hook: any older resourceVersion now gets 410)."""
        for key, history in self._histories.items():
            if history:
                self._compacted[key] = history[-1].rv
            history.clear()
            self._recorded[key].clear()

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
        history = self._window(resource)
        if rv < self._compacted[resource]:
            raise ApiError(410, "The resourceVersion for the provided list is too old.")
        items = {
            key: obj
            for key, obj in self._objects.get(resource, {}).items()
            if namespace is None or key[0] == namespace
        }
        for event in reversed(history):
            if event.rv <= rv:
                break
            if namespace is not None and event.namespace != namespace:
                continue
            key = (event.namespace, event.obj["metadata"]["name"])
            if event.type == "ADDED" or event.old is None:
                items.pop(key, None)
            else:
                items[key] = event.old
        if not copied:
            return list(items.values())  # as ``view``: for readers that copy what they keep
        return [clone(obj) for obj in items.values()]

    def events_since(self, rv: int, resource: Resource, namespace: str | None) -> EventList:
        """History after ``rv``; raises 410 Gone when some of it was compacted."""
        history = self._window(resource)
        compacted = self._compacted[resource]
        if rv < compacted:
            raise ApiError(
                410, f"too old resource version: {rv} ({compacted + 1})", reason="Expired"
            )
        newer = self._after(history, rv)
        return [e for e in newer if namespace is None or e.namespace == namespace]

    @staticmethod
    def _after(history: deque[StoredEvent], rv: int) -> Iterable[StoredEvent]:
        """The events of ``history`` after ``rv``, found from the newest end: a watch
        resuming near the head (the usual case) does not walk the whole window."""
        newer: list[StoredEvent] = []
        for event in reversed(history):
            if event.rv <= rv:
                break
            newer.append(event)
        newer.reverse()
        return newer

    def subscribe(self, resource: Resource, namespace: str | None) -> Watcher:
        watcher = Watcher(resource, namespace)
        self._watchers.setdefault(resource, set()).add(watcher)
        return watcher

    def close_watches(self) -> None:
        """Tell every open watch stream to end (server shutdown)."""
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher.queue.put_nowait(StoredEvent(self._rv, CLOSE, watcher.resource, "", {}))

    def unsubscribe(self, watcher: Watcher) -> None:
        watchers = self._watchers.get(watcher.resource)
        if watchers is not None:
            watchers.discard(watcher)
