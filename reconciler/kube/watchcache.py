"""The daemon's live objects kept current by watches: list once, then watch.

A pass of the long-running daemon used to list every kind it touches, every
pass (``live.LiveState``): at 5,000 instances most of a no-op pass was the API
server serving those list pages. ``WatchCache`` does what client-go's informers
(and controller-runtime's cache, Argo CD's cluster cache) do: the first list of
a kind (the one ``LiveState`` makes anyway) seeds a store, and a thread per kind
then WATCHes from that list's ``resourceVersion`` with the same label selector
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes),
applying ADDED / MODIFIED / DELETED to the store, slimmed and packed as a list's
items are (``live.Packed``). A later pass takes a snapshot of the store instead
of listing: it sees one consistent view, not one that changes under it.

The watch asks for BOOKMARK events (``allowWatchBookmarks=true``): they carry no
object, only how far the stream has got, so a re-watch resumes from a recent
version even when none of our objects changed for a long time
(https://kubernetes.io/docs/reference/using-api/api-concepts/#watch-bookmarks).
It asks the server to end the stream after ``timeout_seconds`` and then watches
again from the last version seen: nothing is lost in between, since a watch from
a version replays every change after it. A version the server no longer has
history for answers ``410 Gone`` (an ERROR event with a 410 ``Status``, or a
410 answer): the kind is listed again
(https://kubernetes.io/docs/reference/using-api/api-concepts/#410-gone-responses).
A cluster whose limits name its namespaces (``LiveState``'s ``scope``) is watched
per namespace: one store and thread per kind and namespace, so the daemon needs read
access only there. A connection that fails is retried with capped backoff; until a watch is
established again the kind is not *synced*, and ``LiveState`` lists it as it
always did, so the daemon is never worse off than without the cache.

The pass's own writes (``LiveState.remember``/``forget``, as the API answered
them) go into the store at once, so the next pass does not take our write for
drift before its watch event arrives. Until that event arrives, the events for
that object still in the stream are older than our write (a watch delivers one
object's changes in order), so they are skipped; the write's own event (the
same ``resourceVersion``, compared for equality only: versions are opaque,
https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions)
or a deletion ends the wait. A write whose event the store has already applied
(the store holds that version, or it is among the last events applied: a watch
can be faster than the pass that wrote) changes nothing. A relist forgets what
it waited for.

A pass waiting for objects to become healthy (``daemon.passes.check_health``)
follows them with a ``Wakeup``: the watch thread that applies an event for one
of them sets it, so the wait ends when the object changes rather than at the
next tick of a timer. A watch that loses its place (a 410 and its relist, a
failed connection) wakes every follower, since the relist may hold changes no
event announced, and a kind that is not synced is polled again.

Watches do not count against the request budget: they run on a connection pool
of their own (``KubeClient.streaming``), as kube-apiserver exempts long-running
requests from its in-flight limits. ``close`` ends every stream and thread.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson
import urllib3
from kubernetes.client.exceptions import ApiException

from reconciler.kube.client import KubeClient, equality_selector, has_labels
from reconciler.kube.errors import api_error
from reconciler.kube.inventory import MANAGED_SELECTOR
from reconciler.kube.live import Packed, list_packed, own_ref, pack, version_of
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (apiVersion, kind)
Scoped = tuple[str, str, str]  # (apiVersion, kind, namespace); "" for all namespaces
Objects = dict[ObjectRef, Packed]
Snapshot = tuple[Objects, int]  # a copy of a store, and its generation then

# Every change of any store takes the next number (its generation), unique in the
# process: two snapshots with the same generation are copies of one state of one
# store, the very same packed objects (a pass that finds its kinds at the
# generations the last pass saw knows that nothing of them changed, ``daemon.memo``).
_GENERATIONS = itertools.count(1)

# How long one watch request lasts before the server ends it and we watch again;
# client-go's reflectors pick 5-10 minutes for the same reason (a stream that
# lives forever never notices a silently dead connection).
WATCH_TIMEOUT = 300
RETRY_BASE = 0.5  # seconds before the first re-watch after a failure; doubled each time
RETRY_CAP = 30.0
_RECENT = 4096  # (object, version) of the last events applied per kind (see ``wrote``)
_READ_SLACK = 30.0  # the server ends the stream at its timeout; silence beyond this is a fault

# Why a watch was restarted (the label of ``reconciler_watch_restarts_total``).
EXPIRED = "expired"  # 410: the version is too old; the kind is listed again
FAILED = "failed"  # the connection or the request failed; re-watched with backoff
ENDED = "ended"  # the server ended the stream (its timeout); re-watched at once

_OURS_DELETED = ""  # pending marker: we deleted it, its DELETED event is on its way


_FAULTS = (KubeError, ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


class _Expired(Exception):
    """The server has no history back to our version (410)."""


class KindWatch:
    """One kind's store (in one namespace, or all), the version it is current to, and the
    thread keeping it so."""

    def __init__(
        self, cache: WatchCache, key: Key, objects: Objects, version: str, namespace: str = ""
    ) -> None:
        self.cache = cache
        self.key = key
        self.namespace = namespace
        self.objects = objects
        self.generation = next(_GENERATIONS)  # taken again by every change of ``objects``
        self.version = version  # "" (or a 410): list again before watching
        self.synced = bool(version)
        # ref -> the resourceVersion of our write whose event has not arrived yet
        # (``_OURS_DELETED`` for our delete)
        self.pending: dict[ObjectRef, str] = {}
        # the last events applied, oldest first: a write answered after its own event
        # arrived must not be taken for one still to come. Kept as the hash of
        # (object, version): an int instead of a tuple and a version string, a third of
        # the memory for 4,096 events per kind. Two pairs sharing a 64-bit hash would
        # only make ``wrote`` leave our write to its own event, as for a newer store.
        self.recent: dict[int, None] = {}
        self.lock = threading.Lock()
        self.stream: Any = None  # the open watch response (``close`` shuts it down)
        self.thread = threading.Thread(
            target=self._run,
            name=f"watch-{key[1]}.{key[0]}" + (f"-{namespace}" if namespace else ""),
            daemon=True,
        )

    # -- read by passes -------------------------------------------------------------

    def snapshot(self) -> Snapshot | None:
        with self.lock:
            return (dict(self.objects), self.generation) if self.synced else None

    def stored(self) -> Objects:
        """A copy of the store, synced or not (what a list of the kind may keep of it)."""
        with self.lock:
            return dict(self.objects)

    def current(self, ref: ObjectRef) -> tuple[bool, Packed | None]:
        with self.lock:
            return self.synced, self.objects.get(ref)

    def wrote(self, ref: ObjectRef, packed: Packed | None) -> None:
        """Our write as answered (None: our delete); its watch event overwrites it later."""
        with self.lock:
            if packed is None:
                if self.objects.pop(ref, None) is not None:  # else its DELETED came already
                    self.pending[ref] = _OURS_DELETED
                    self.generation = next(_GENERATIONS)
                return
            had = self.objects.get(ref)
            version = version_of(packed)
            if had is not None and version_of(had) == version:
                return  # the store has this version (listed, or its event came)
            if hash((ref, version)) in self.recent:
                return  # its event came, and maybe later ones: the store is newer
            self.objects[ref] = packed
            self.pending[ref] = version
            self.generation = next(_GENERATIONS)

    # -- the thread -------------------------------------------------------------------

    def _run(self) -> None:
        delay = RETRY_BASE
        stop = self.cache.stopping
        while not stop.is_set():
            try:
                if not self.version:
                    self._relist()
                self._watch()
            except _Expired:
                self._restart(EXPIRED, "resourceVersion too old; listing again")
                with self.lock:
                    self.version = ""
                    self.synced = False
                self.cache.wake_all()  # read again: polled (a GET) until the relist ends
                continue
            except _FAULTS as e:
                if stop.is_set():
                    break
                with self.lock:
                    self.synced = False
                self.cache.wake_all()
                self._restart(FAILED, f"{type(e).__name__}: {e}; retrying in {delay:.1f}s")
                stop.wait(delay)
                delay = min(delay * 2, RETRY_CAP)
                continue
            finally:
                self.stream = None
            delay = RETRY_BASE
            if not stop.is_set():
                self._restart(ENDED, "the server ended the watch; watching again")

    def _restart(self, reason: str, why: str) -> None:
        log.debug("watch of %s (%s): %s", self.key[1], self.key[0], why)
        self.cache.count_restart(reason)

    def _relist(self) -> None:
        """List the kind afresh (after a 410): the store becomes the list."""
        with self.cache.listing:
            previous = self.stored()  # what is unchanged is kept, not packed again
            fresh, version = list_packed(
                self.cache.client,
                *self.key,
                self.cache.selector,
                previous=previous,
                namespace=self.namespace,
            )
            del previous
        with self.lock:
            self.objects = fresh
            self.generation = next(_GENERATIONS)
            self.pending.clear()
            self.recent.clear()
            self.version = version
            self.synced = True
        self.cache.count_relist()
        self.cache.wake_all()  # the list may hold changes no event announced

    def _watch(self) -> None:
        """One watch request from ``version``, until the server ends it; raises on faults."""
        api_version, kind = self.key
        streaming = self.cache.streaming
        path = streaming.resource(api_version, kind).path(self.namespace)
        timeout = self.cache.timeout_seconds
        query = [
            ("watch", "true"),
            ("labelSelector", self.cache.selector),
            ("resourceVersion", self.version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        resp = streaming.open_stream(path, query, read_timeout=timeout + _READ_SLACK)
        self.stream = resp
        if self.cache.stopping.is_set():  # ``close`` may have missed this stream
            resp.close()
            return
        try:
            status = int(resp.status)
            if status != 200:
                body = resp.read() or b""
                if status == 410:
                    raise _Expired()
                raise api_error(f"{kind} ({api_version})", "watch", status, resp.reason or "", body)
            with self.lock:
                self.synced = True  # resumed from our version: nothing was missed
            for event in _events(resp):
                self._apply(event)
        except BaseException:
            resp.close()  # unread data stays on a connection: it is never reused
            raise
        resp.release_conn()

    def _packed(self, ref: ObjectRef, obj: Mapping[str, Any], version: str) -> Packed:
        """``obj`` packed, or the store's copy when that is the same version of it.

        The API server changes an object's ``resourceVersion`` on every write and
        never otherwise, so an event with the version the store has (the event of
        our own write, which ``wrote`` stored as the API answered it) is the object
        the store holds: its copy is kept, shared with the pass that wrote it, not
        packed again (at a first install, a second copy of every object the pass
        writes until the pass ends, and the CPU of packing it).
        """
        had = self.objects.get(ref)  # unlocked: a stale answer only costs a new copy
        if had is not None and version and version_of(had) == version:
            return had
        return pack(obj)

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = str(event.get("type", ""))
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"a watch event without an object: {kind}")
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Expired()
            raise api_error(
                f"{self.key[1]} ({self.key[0]})",
                "watch",
                int(code) if isinstance(code, int) else 500,
                str(obj.get("reason", "")),
                orjson.dumps(obj),
            )
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "BOOKMARK":
            with self.lock:
                self.version = version or self.version
            return
        obj.setdefault("apiVersion", self.key[0])
        obj.setdefault("kind", self.key[1])
        ref = own_ref(ObjectRef.of(obj))  # kept by the store: nothing of the decoded event
        packed = self._packed(ref, obj, version) if kind in ("ADDED", "MODIFIED") else None
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise ValueError(f"unknown watch event type {kind!r}")
        with self.lock:
            self.version = version or self.version
            self.recent[hash((ref, version))] = None
            if len(self.recent) > _RECENT:
                del self.recent[next(iter(self.recent))]
            mine = self.pending.get(ref)
            if mine is not None:
                # our write's own event, or a deletion, ends the wait; anything before
                # it in the stream is older than what we wrote
                if packed is None or mine == version_of(packed):
                    del self.pending[ref]
                else:
                    return
            if packed is None:
                self.objects.pop(ref, None)
            else:
                self.objects[ref] = packed
            self.generation = next(_GENERATIONS)
        self.cache.changed(ref)


def _events(resp: Any) -> Iterator[dict[str, Any]]:
    """The newline-delimited JSON events of a watch response, as they arrive.

    A chunk holds many events at an install (every status write of every new
    Deployment): each line is cut from the chunk where it stands, and only the
    unfinished last one is kept for the next chunk. Cutting each line off the front
    of what remains copied the rest of the chunk once per event.
    """
    rest = b""
    for chunk in resp.stream(64 * 1024, decode_content=True):
        data = rest + chunk if rest else chunk
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            line = data[start:end]
            start = end + 1
            if line.strip():
                event = orjson.loads(line)
                if isinstance(event, dict):
                    yield event
        rest = data[start:]
    if rest.strip():
        event = orjson.loads(rest)
        if isinstance(event, dict):
            yield event


class Wakeup:
    """One wait's interest in some objects: set when the cache changes one of them.

    ``follow`` the objects before reading them, then ``wait``: an event applied after
    ``follow`` sets it, one applied before is in what the read sees, so no change is
    slept through. A watch losing its place sets every wakeup (``WatchCache.wake_all``).
    Used by one thread (the pass's); ``close`` lets its objects go.
    """

    def __init__(self, cache: WatchCache) -> None:
        self._cache = cache
        self.event = threading.Event()
        self.refs: frozenset[ObjectRef] = frozenset()

    def follow(self, refs: Iterable[ObjectRef]) -> None:
        """Be woken by changes of ``refs`` from now on (only: the ones followed before
        are let go), and forget what woke it so far: read the objects after this."""
        self._cache._follow(self, frozenset(refs))
        self.event.clear()

    def wait(self, timeout: float) -> bool:
        """Until a followed object changes, a watch loses its place, or ``timeout``
        seconds pass; True when woken."""
        return self.event.wait(timeout)

    def close(self) -> None:
        self._cache._follow(self, None)

    def __enter__(self) -> Wakeup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WatchCache:
    """Live objects of the kinds the daemon touches, kept current by watches.

    One per daemon (cluster), kept across passes, ``close``\\ d when it stops.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        selector: str = MANAGED_SELECTOR,
        timeout_seconds: int = WATCH_TIMEOUT,
        on_restart: Callable[[str], None] | None = None,
        on_change: Callable[[ObjectRef], None] | None = None,
    ) -> None:
        self.client = client  # lists (after a 410) go through the pass's budget
        self.streaming = client.streaming()
        self.selector = selector
        labels = equality_selector(selector)
        if labels is None:  # ``wrote`` must tell whether a written object still matches
            raise ValueError(f"a watch cache needs an equality selector, not {selector!r}")
        self._labels = labels
        self.timeout_seconds = timeout_seconds
        self.stopping = threading.Event()
        self._on_restart = on_restart
        self._on_change = on_change
        self._kinds: dict[Scoped, KindWatch] = {}
        self._lock = threading.Lock()
        # held while a kind is listed (a watch relisting, a pass listing an unsynced
        # kind): one list at a time. A list holds one decoded page (``live.PACKED_PAGE``
        # objects); every watched kind losing its place at once (410s after a burst of
        # changes) listed them all side by side, and the process kept that high-water
        # mark (a relist of every kind at 5,000 instances: +4.6 KiB per instance of RSS
        # with pages of 500 side by side, +3.6 one at a time, +0.7 in pages of 100).
        self.listing = threading.Lock()
        self._counts_lock = threading.Lock()
        self.restarts: dict[str, int] = {}  # reason -> how many (tests, metrics)
        self.relists = 0
        # ref -> the wakeups following it (``wakeup``): keyed as the stores are, so an
        # event costs one look-up here, and none while nobody waits (the dict is empty)
        self._waiting: dict[ObjectRef, list[Wakeup]] = {}
        self._wakeups: set[Wakeup] = set()
        self._waiting_lock = threading.Lock()

    def snapshot(self, api_version: str, kind: str, namespace: str = "") -> Snapshot | None:
        """A copy of the kind's store (in ``namespace``; "" all) and its generation, or
        None when it is not watched or not synced."""
        watch = self._kinds.get((api_version, kind, namespace))
        return watch.snapshot() if watch is not None else None

    def stored(self, api_version: str, kind: str, namespace: str = "") -> Objects | None:
        """A copy of the kind's store even while it is not synced (a watch relisting
        after a 410): a pass listing the kind meanwhile keeps what did not change
        (``live.list_packed``'s ``previous``); None when the kind is not watched."""
        watch = self._kinds.get((api_version, kind, namespace))
        return watch.stored() if watch is not None else None

    def _watches_of(self, ref: ObjectRef) -> list[KindWatch]:
        """The watches whose store may hold ``ref``: its namespace's, and the kind's
        across all namespaces (both, after the limits of a cluster changed)."""
        found = [self._kinds.get((ref.api_version, ref.kind, ref.namespace))]
        if ref.namespace:
            found.append(self._kinds.get((ref.api_version, ref.kind, "")))
        return [w for w in found if w is not None]

    def current(self, ref: ObjectRef) -> tuple[bool, Packed | None]:
        """(whether the kind is watched and synced, the object as the store has it now).

        A closing cache keeps nothing current: a health wait polls from then on."""
        watches = self._watches_of(ref)
        if not watches or self.stopping.is_set():
            return False, None
        return watches[0].current(ref)

    def watched(self, api_version: str, kind: str, namespace: str = "") -> bool:
        return (api_version, kind, namespace) in self._kinds

    def seed(
        self, api_version: str, kind: str, objects: Objects, version: str, namespace: str = ""
    ) -> None:
        """Start watching a kind (in ``namespace``; "" all) from a list of it (its items
        and ``resourceVersion``).

        A kind already watched keeps its store: its thread relists by itself when it
        has to. Without a version (a server that gave none) nothing is watched.
        """
        key = (api_version, kind, namespace)
        if not version or self.stopping.is_set():
            return
        with self._lock:
            if key in self._kinds or self.stopping.is_set():
                return
            watch = KindWatch(self, (api_version, kind), dict(objects), version, namespace)
            self._kinds[key] = watch
        where = f" in {namespace}" if namespace else ""
        log.debug("watching %s (%s)%s from resourceVersion %s", kind, api_version, where, version)
        watch.thread.start()

    def wrote(self, obj: Mapping[str, Any], packed: Packed | None = None) -> None:
        """The pass wrote ``obj`` (as answered): the store has it before its event does.

        An object that no longer carries our label leaves the watch (its event is a
        DELETED), so it leaves the store as well.
        """
        ref = own_ref(ObjectRef.of(obj))
        watches = self._watches_of(ref)
        if not watches:
            return
        ours = has_labels(obj, self._labels)
        if ours and packed is None:
            packed = pack(obj)
        for watch in watches:
            watch.wrote(ref, packed if ours else None)

    def deleted(self, ref: ObjectRef) -> None:
        for watch in self._watches_of(ref):
            watch.wrote(ref, None)

    def count_restart(self, reason: str) -> None:
        with self._counts_lock:
            self.restarts[reason] = self.restarts.get(reason, 0) + 1
        if self._on_restart is not None:
            self._on_restart(reason)

    def count_relist(self) -> None:
        with self._counts_lock:
            self.relists += 1

    def changed(self, ref: ObjectRef) -> None:
        """A watch applied an event for ``ref`` to its store (called after the store's
        lock is released): wakes whoever follows it."""
        if self._on_change is not None:  # first: whoever is woken finds it counted
            self._on_change(ref)
        # unlocked: a wakeup that follows ``ref`` only after this look reads the store
        # after the event was applied, so it has nothing to be woken for
        if self._waiting:
            with self._waiting_lock:
                for wakeup in self._waiting.get(ref, ()):
                    wakeup.event.set()

    def wakeup(self) -> Wakeup:
        """A wakeup following nothing yet (``Wakeup.follow``); close it after the wait."""
        return Wakeup(self)

    def wake_all(self) -> None:
        """Wake every wakeup: a watch lost its place (what it saw since may be in a
        relist and not in events), or the cache closes."""
        with self._waiting_lock:
            for wakeup in self._wakeups:
                wakeup.event.set()

    def _follow(self, wakeup: Wakeup, refs: frozenset[ObjectRef] | None) -> None:
        """``wakeup`` follows ``refs`` from now on (None: nothing, it is closed)."""
        now = refs or frozenset()
        with self._waiting_lock:
            for ref in wakeup.refs - now:
                followers = self._waiting[ref]
                followers.remove(wakeup)
                if not followers:
                    del self._waiting[ref]
            for ref in now - wakeup.refs:
                self._waiting.setdefault(ref, []).append(wakeup)
            wakeup.refs = now
            if refs is None:
                self._wakeups.discard(wakeup)
            else:
                self._wakeups.add(wakeup)

    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return [w.thread for w in self._kinds.values()]

    def close(self, timeout: float = 10.0) -> None:
        """End every watch and wait for its thread; the cache is not used after this."""
        self.stopping.set()
        self.wake_all()  # a wait ends: its objects are polled from now on (``current``)
        with self._lock:
            watches = list(self._kinds.values())
        for watch in watches:
            stream = watch.stream
            if stream is not None:
                # unblocks the thread's read at once; a stream that ended meanwhile has
                # released its connection, and urllib3 then refuses with ValueError
                with contextlib.suppress(OSError, AttributeError, ValueError):
                    stream.shutdown()
        for watch in watches:
            if watch.thread.is_alive():
                watch.thread.join(timeout)
        self.streaming.close()

    def __enter__(self) -> WatchCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
