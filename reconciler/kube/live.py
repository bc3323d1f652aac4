"""One pass's view of the cluster: one list per kind (or none), not one GET per object.

``LiveState`` lists each kind the pass touches once, across all namespaces,
filtered to objects labelled ``app.kubernetes.io/managed-by=reconciler``, and
answers per-object lookups from that. Given the long-running daemon's
``WatchCache`` (``kube.watchcache``), a kind the cache watches is not listed at
all: the pass takes a snapshot of the cache's store (one consistent view, not
one changing under the pass), and a kind it does not watch yet is listed once
and then watched, so a no-op pass of a settled daemon sends no request. The
pass's own writes (``remember``/``forget``) go into the cache too, so the next
pass does not see them as drift before their watch events arrive.

An object that is absent here either does not exist or is not ours; apply then
simply applies it (the API answers 201 or 200), diff and prune read it with a
GET. Apply and prune keep the view current as they write, so a daemon may share
one ``LiveState`` per pass across all instances of a cluster, and the threads
applying them concurrently: each kind is read once, under a lock, whichever
thread needs it first.

The view holds every object the pass manages, so it keeps only what apply,
health and prune read (:func:`slim`): ``managedFields`` shrink to who wrote with
which operation, unless client-side ``kubectl apply`` fields are still to be
taken over (then the whole list is needed to build the take-over patch).

Each object is kept packed (:class:`Packed`: its compact JSON, deflated against
a dictionary shared by its kind, and its ``resourceVersion``) and decoded when
asked for, into a fresh dict each time.
Decoded, a Deployment is several times its JSON size in Python objects, and
most objects of a pass are never looked at whole: the daemon reuses a settled
instance's last verdict on the word of its objects' ``resourceVersion`` alone
(``daemon.memo``, :meth:`LiveState.packed`), so a no-op pass holds
the cluster's objects at a small fraction of their JSON size.
"""

from __future__ import annotations

import functools
import sys
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NewType

import orjson

from reconciler.kube.csaupgrade import client_side_managers
from reconciler.kube.inventory import (
    MANAGED_SELECTOR,
    NAME_PREFIX,
    PER_INSTANCE,
    PER_NAMESPACE,
    SHARED_SUFFIX,
    Inventory,
    inventories_of,
    inventory_name,
    shared_entries,
    shared_ref,
    trusted,
)
from reconciler.kube.inventory_writes import InventoryWrites
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

if TYPE_CHECKING:
    from reconciler.kube.client import KubeClient
    from reconciler.kube.watchcache import Wakeup, WatchCache

JsonObject = dict[str, Any]

# What is kept of each managedFields entry: enough to tell an imperative edit
# (``Update``) from another applier (``apply._edits_only``); ``fieldsV1``, the bulk
# of an object's size, is dropped, and so are entries that then say the same.
_ENTRY_KEYS = ("manager", "operation")


def slim(obj: Mapping[str, Any]) -> JsonObject:
    """``obj`` as the pass keeps it: ``managedFields`` without the owned-field sets.

    A real API server returns every manager's field set with every object
    (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management),
    often as large as the object itself. Matching (``compare``) and health never
    read it; drift reversal needs only each manager's name and operation. The
    exception is an object that client-side ``kubectl apply`` wrote: taking its
    fields over (``csaupgrade.upgrade_patch``) rewrites the whole list, so such an
    object is kept as it is. Nothing else is copied: the rest is shared with ``obj``.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return dict(obj)
    entries = meta.get("managedFields")
    if not isinstance(entries, list) or client_side_managers(obj):
        return dict(obj)
    said = {
        tuple(str(e.get(k, "")) for k in _ENTRY_KEYS) for e in entries if isinstance(e, Mapping)
    }
    return {**obj, "metadata": {**meta, "managedFields": _entries(tuple(sorted(said)))}}


@functools.lru_cache(maxsize=256)
def _entries(said: tuple[tuple[str, ...], ...]) -> list[JsonObject]:
    """One list per distinct set of (manager, operation) pairs, shared by every object
    that has it (thousands of objects share a handful); nothing modifies it."""
    return [dict(zip(_ENTRY_KEYS, pair, strict=True)) for pair in said]


Packed = NewType("Packed", bytes)
"""One live object as the pass keeps it: slimmed, its compact JSON deflated, in one
``bytes`` (:func:`pack`, :func:`unpack`, :func:`version_of`).

Objects of one kind that the reconciler manages look alike (the same keys, the
same labels, the same container spec give or take an image tag), so each is
compressed against a preset dictionary: the JSON of the first object seen of
its kind (:func:`_dictionary`). Deflate then stores mostly back-references
into it: a 1.7 KiB Deployment packs to under 100 bytes, in about 5 µs, and
unpacks in about 1 µs, where plain deflate without a dictionary saves little
on objects this small.

The layout is ``[dictionary number: 2 bytes][resourceVersion length: 2 bytes]
[resourceVersion][deflated JSON]``: one object per live object, where a tuple of
version string, data and dictionary cost about 130 bytes more each (a tuple, a
string and their headers; 4 objects per instance at 10,000 instances, bench/scale.py).
The version is read without inflating anything (:func:`version_of`), as the daemon's
memo compares only versions for every object of every settled instance each pass.
"""

_HEADER = 4


def pack(obj: Mapping[str, Any]) -> Packed:
    """``obj`` slimmed (:func:`slim`) and packed."""
    version = str((obj.get("metadata") or {}).get("resourceVersion") or "").encode()
    if len(version) > 0xFFFF:
        raise ValueError(f"a resourceVersion of {len(version)} bytes")
    text = orjson.dumps(slim(obj))
    number, dictionary = _dictionary(obj, text)
    packer = zlib.compressobj(
        _LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, dictionary
    )
    header = number.to_bytes(2, "big") + len(version).to_bytes(2, "big")
    return Packed(b"".join((header, version, packer.compress(text), packer.flush())))


def unpack(packed: Packed) -> JsonObject:
    """The object :func:`pack` was given, slimmed: a fresh dict on every call."""
    start = _HEADER + int.from_bytes(packed[2:4], "big")
    unpacker = zlib.decompressobj(-zlib.MAX_WBITS, dictionary_of(packed))
    with memoryview(packed) as view:
        text = unpacker.decompress(view[start:]) + unpacker.flush()
    obj: JsonObject = orjson.loads(text)
    return obj


def version_of(packed: Packed) -> str:
    """The packed object's ``resourceVersion`` ("" when it had none)."""
    return packed[_HEADER : _HEADER + int.from_bytes(packed[2:4], "big")].decode()


def dictionary_of(packed: Packed) -> bytes:
    """The preset dictionary ``packed`` was deflated against (shared by its kind)."""
    return _dictionary_list[int.from_bytes(packed[:2], "big")]


# Deflate's fastest level: a better level saves a few bytes per object and costs
# several times the CPU; the dictionary, not the level, is what makes objects small.
_LEVEL = 1
# Deflate's memory for its match tables while compressing (transient, per call):
# 4 (16 KiB) instead of the default 8 (256 KiB), as objects are a few KiB at most.
_MEM_LEVEL = 4
# Deflate looks back 32 KiB at most; half of that is left for the object itself.
_DICTIONARY_BYTES = 16 * 1024
_dictionaries: dict[tuple[str, str, bool, bool], tuple[int, bytes]] = {}
_dictionary_list: list[bytes] = []  # by number, as packed objects name them
_dictionaries_lock = threading.Lock()


def _dictionary(obj: Mapping[str, Any], text: bytes) -> tuple[int, bytes]:
    """The preset dictionary for objects like ``obj`` and its number: the first such
    object's JSON.

    One per API version and kind, with the reconciler's own bookkeeping ConfigMaps
    (inventories, whose names start with ``NAME_PREFIX``) apart from an app's
    ConfigMaps, and objects with a ``status`` apart from those without: a pass
    writes objects before their controllers report on them, and the watch then
    keeps them with their status, which a dictionary without one cannot match
    (a Ready Deployment packed to ~360 bytes against the JSON of a new one, ~150
    against one with a status). The first object stays the dictionary for the life
    of the process: any JSON of the same kind shares its keys and most of its
    structure with it, and packed objects name it by number.
    """
    meta = obj.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    key = (
        str(obj.get("apiVersion") or ""),
        str(obj.get("kind") or ""),
        name.startswith(NAME_PREFIX),
        bool(obj.get("status")),
    )
    found = _dictionaries.get(key)
    if found is None:
        with _dictionaries_lock:
            found = _dictionaries.get(key)
            if found is None:
                if len(_dictionary_list) > 0xFFFF:
                    raise ValueError("more kinds of objects than packed objects can name")
                found = (len(_dictionary_list), bytes(text[:_DICTIONARY_BYTES]))
                _dictionary_list.append(found[1])
                _dictionaries[key] = found
    return found


def _copy(text: str) -> str:
    """A new string equal to ``text``, allocated now (``str(text)`` would be ``text`` itself).

    What the view keeps of a listed object must not be a piece of the decoded page:
    CPython's small-object allocator returns an arena to the system only once all of
    its objects are freed, so one kept name or ``resourceVersion`` per item pins every
    arena of the page (a 500-object page of Deployments decodes to tens of MiB), and
    the process keeps that much more after every pass that lists. Measured with
    bench/scale.py's setup at 1,000 instances: the second pass's lists left 20 KiB per
    instance resident, 12 with the kept strings copied.
    """
    return text.encode().decode()


def own_ref(ref: ObjectRef) -> ObjectRef:
    """``ref`` made of strings of its own (:func:`_copy`); the few distinct API versions,
    kinds and namespaces are interned, so thousands of objects share one of each."""
    return ObjectRef(
        sys.intern(_copy(ref.api_version)),
        sys.intern(_copy(ref.kind)),
        sys.intern(_copy(ref.namespace)),
        _copy(ref.name),
    )


_NOTHING: JsonObject = {}  # what the list keeps of each item: the pass packs it itself


def list_packed(
    client: KubeClient,
    api_version: str,
    kind: str,
    selector: str,
    previous: Mapping[ObjectRef, Packed] | None = None,
    namespace: str = "",
    page_size: int | None = None,
) -> tuple[dict[ObjectRef, Packed], str]:
    """A kind's objects matching ``selector`` (in ``namespace``; "" all), packed as each
    page arrives (the decoded page is dropped at once), and the list's
    ``resourceVersion`` (where a watch starts); in pages of ``page_size`` objects
    (default ``PACKED_PAGE``, the watch cache's).

    ``previous`` (the watch cache's store, listing again after a ``410``): an object
    whose ``resourceVersion`` is the one it had there is that object (the API server
    changes the version on every write), so its packed bytes and reference are kept,
    not made again. A relist then costs memory and CPU for the objects that changed:
    a store built anew beside the old one was a second copy of every object of the
    kind, while passes still held the old one.
    """
    objects: dict[ObjectRef, Packed] = {}
    stored = previous or {}
    known = {ref: ref for ref in stored}  # the stored key itself, for its strings

    def keep(item: JsonObject) -> JsonObject:
        ref = ObjectRef.of(item)
        had = known.get(ref)
        if had is not None:
            old = stored[had]
            version = str((item.get("metadata") or {}).get("resourceVersion") or "")
            if version and version_of(old) == version:
                objects[had] = old
                return _NOTHING
        objects[own_ref(ref)] = pack(item)
        return _NOTHING

    _, version = client.list_snapshot(
        api_version,
        kind,
        namespace=namespace,
        label_selector=selector,
        keep=keep,
        restart=objects.clear,
        page_size=page_size or PACKED_PAGE,
    )
    return objects, version


# Objects per page of the lists the watch cache keeps packed (a long-running daemon).
# Each page is decoded whole before its items are packed: 500 Deployments with their
# managedFields and status decode to ~10 MiB of Python objects, and the process keeps
# the high-water mark of its largest page; 100 cost a fifth of that for a request
# every 100 objects instead of 500 (a 10,000-object kind: 100 lists of 5-10 ms), paid
# once per kind: after its first list a kind is watched, not listed.
PACKED_PAGE = 100
# Objects per page of a pass without the watch cache (``run --once``, the CLI's
# commands), which lists every kind it reads on every pass and then exits: a kind of up
# to 5,000 objects is one list, not 50 (kubectl pages by 500, ``--chunk-size``;
# client-go's informers list with ``resourceVersion=0``, which the API server answers
# from its cache in one response whatever the limit). The price is one page decoded at
# once, a high-water mark the process keeps until it exits: 5,000 Deployments as the
# sandbox returns them are 13 KiB each decoded (measured with ``tracemalloc``), 64 MiB;
# 5,000 ConfigMaps 15 MiB.
ONE_SHOT_PAGE = 5_000


Generations = tuple[int, ...] | None  # ``LiveState.generation``


@dataclass(frozen=True, slots=True)
class _Answer:
    """A pass's ``LiveState.inventories`` and what it was made from."""

    generation: tuple[int, ...]  # of the ConfigMaps it read (``LiveState.generation``)
    cluster: str
    namespaces: Mapping[str, str]
    layout: str
    inventories: dict[str, Inventory]
    homes: dict[str, tuple[ObjectRef, ...]]


class InventoryCache(dict[tuple[ObjectRef, str], tuple[Inventory, ...]]):
    """Inventories read by an earlier pass, by their ConfigMap and its resourceVersion
    (an instance's own ConfigMap holds one, a shared one those of its namespace).

    ``answer``: the last pass's whole answer, with the generation of the ConfigMaps it
    was read from. A pass whose ConfigMaps are at that generation (the very objects:
    ``LiveState.generation``), for the same cluster and namespaces, has the same
    inventories and takes that answer as it is: nothing is looked up or checked per
    ConfigMap (the no-op pass of a quiet cluster). A pass that changes its inventories
    (``record_inventory``, ``drop_inventory``) drops it first: the dict is its own.
    """

    __slots__ = ("answer", "texts")

    def __init__(self) -> None:
        super().__init__()
        self.answer: _Answer | None = None
        # each shared ConfigMap's inventories by their entry text (``shared_entries``),
        # with the resourceVersion they were read at
        self.texts: dict[ObjectRef, tuple[str, dict[str, Inventory]]] = {}


class LiveState:
    """Lazily filled, per-pass cache of our live objects, namespaces and inventories."""

    def __init__(
        self,
        client: KubeClient,
        cluster: str,
        namespaces: Mapping[str, str] | None = None,
        inventory_cache: InventoryCache | None = None,
        cache: WatchCache | None = None,
        scope: tuple[str, ...] | None = None,
        layout: str = PER_INSTANCE,
    ) -> None:
        """``namespaces`` (instance -> namespace in Git) says where each inventory must be.

        ``layout`` (``cluster.yaml`` ``inventory``): where inventories are written, each
        instance's own ConfigMap or its key of the namespace's shared one. Both are
        read; an instance found in both (a switch cut short) is taken from this one.

        ``scope`` (``Limits.listed_namespaces``): list namespaced kinds in these
        namespaces only, one list (and, with ``cache``, one watch) each; None lists
        each kind across all namespaces. Objects elsewhere are then absent from the
        view, as objects that are not ours are: the limits refuse them anyway.

        ``cache`` (the daemon's, kept across passes): kinds it watches are read from
        it instead of listed, and kinds it does not watch yet start being watched.

        ``inventory_cache`` (the daemon's, kept across passes): an inventory whose
        ConfigMap has the same ``resourceVersion`` as when a pass read it is the same
        inventory, so it is not parsed again; the cache is left holding this pass's.
        """
        self._inventory_cache = inventory_cache
        self.cache = cache
        self.client = client
        self.cluster = cluster
        self.expected_namespaces: Mapping[str, str] = namespaces or {}
        self.scope = scope
        self._objects: dict[tuple[str, str], dict[ObjectRef, Packed]] = {}
        # which states of the watch cache's stores each kind's view copies (see
        # ``generation``); None when it was listed, or the pass changed it since
        self._generations: dict[tuple[str, str], tuple[int, ...] | None] = {}
        self._namespaces: set[str] | None = None
        self._seen_namespaces: set[str] = set()  # namespaces holding a listed object
        self._inventories: dict[str, Inventory] | None = None
        # the ConfigMaps each instance's inventory was read from (one, but for a
        # switch of layouts cut short): where a write must go, and what it replaces
        self._homes: dict[str, tuple[ObjectRef, ...]] = {}
        self.layout = layout
        # the shared layout's writes, sent one per namespace by ``flush_inventories``
        self.writes = InventoryWrites(self)
        # held while a kind (or the namespaces) is listed: one list per kind, however
        # many threads ask at once; re-entrant, as ``inventories`` lists through ``get``
        self._lock = threading.RLock()

    def get(self, ref: ObjectRef) -> JsonObject | None:
        """Our live object for ``ref`` (listing its kind on first use), else None.

        A fresh dict on every call: the caller may keep or change it.
        """
        packed = self._bucket(ref).get(ref)
        return unpack(packed) if packed is not None else None

    def packed(self, ref: ObjectRef) -> Packed | None:
        """Our live object for ``ref`` as the view keeps it (listing its kind on first
        use), else None: what the daemon's memo holds on to, shared with the view, and
        whose ``resourceVersion`` it compares without decoding it (:func:`version_of`)."""
        return self._bucket(ref).get(ref)

    def kind_of(self, ref: ObjectRef) -> Mapping[ObjectRef, Packed]:
        """Every live object of ``ref``'s kind as the view keeps it (listing it on first
        use), read only: for a caller that looks up many objects of a few kinds (the
        daemon's memo, four per settled instance), one call per kind."""
        return self._bucket(ref)

    def _bucket(self, ref: ObjectRef) -> dict[ObjectRef, Packed]:
        key = (ref.api_version, ref.kind)
        bucket = self._objects.get(key)
        if bucket is None:
            with self._lock:
                bucket = self._objects.get(key)
                if bucket is None:
                    bucket, generations = self._read(ref.api_version, ref.kind)
                    self._seen_namespaces.update(r.namespace for r in bucket)
                    self._objects[key] = bucket
                    self._generations[key] = generations
        return bucket

    def generation(self, api_version: str, kind: str) -> tuple[int, ...] | None:
        """Which states of the watch cache's stores the pass's view of the kind copies
        (one per namespace of the ``scope``), or None: not read yet, listed rather than
        copied, or changed by the pass's own writes since (``remember``, ``forget``).

        Two views of a kind with the same generation hold the very same objects:
        every change of a store takes a new one (``watchcache._GENERATIONS``).
        """
        return self._generations.get((api_version, kind))

    def kinds(self) -> frozenset[tuple[str, str]]:
        """The (apiVersion, kind) of every kind the pass has read."""
        return frozenset(self._objects)

    def _read(self, api_version: str, kind: str) -> tuple[dict[ObjectRef, Packed], Generations]:
        """The kind, across all namespaces or per namespace of the ``scope``."""
        if self.scope is None or not self.client.resource(api_version, kind).namespaced:
            bucket, generation = self._read_in(api_version, kind, "")
            return bucket, None if generation is None else (generation,)
        merged: dict[ObjectRef, Packed] = {}
        generations: list[int] | None = []
        for namespace in self.scope:
            bucket, generation = self._read_in(api_version, kind, namespace)
            merged.update(bucket)
            if generations is not None and generation is not None:
                generations.append(generation)
            else:
                generations = None
        return merged, None if generations is None else tuple(generations)

    def _read_in(
        self, api_version: str, kind: str, namespace: str
    ) -> tuple[dict[ObjectRef, Packed], int | None]:
        """The kind in ``namespace`` ("" all) from the watch cache when it is synced
        (with the store's generation), else one (paged) list (None)."""
        cache = self.cache
        if cache is None:
            return list_packed(
                self.client,
                api_version,
                kind,
                MANAGED_SELECTOR,
                namespace=namespace,
                page_size=ONE_SHOT_PAGE,
            )[0], None
        snapshot = cache.snapshot(api_version, kind, namespace)
        if snapshot is not None:
            return snapshot
        with cache.listing:  # one list at a time, the watches' relists included
            snapshot = cache.snapshot(api_version, kind, namespace)  # a relist just ended?
            if snapshot is not None:
                return snapshot
            previous = cache.stored(api_version, kind, namespace)  # watched, but relisting
            bucket, version = list_packed(
                self.client,
                api_version,
                kind,
                MANAGED_SELECTOR,
                previous=previous,
                namespace=namespace,
            )
            del previous
        cache.seed(api_version, kind, bucket, version, namespace)  # watched from this list on
        return bucket, None

    def current(self, ref: ObjectRef) -> tuple[bool, JsonObject | None]:
        """(whether the watch cache keeps ``ref``'s kind current, the object as it is now).

        Not the pass's snapshot: what the watch saw since, for health polling.
        """
        if self.cache is None:
            return False, None
        synced, packed = self.cache.current(ref)
        return synced, unpack(packed) if packed is not None else None

    def wakeup(self) -> Wakeup | None:
        """A wakeup set when the watch cache changes an object it follows (a health wait
        sleeps until then, ``watchcache.Wakeup``); None without the cache."""
        return self.cache.wakeup() if self.cache is not None else None

    def fetch(self, ref: ObjectRef) -> JsonObject | None:
        """The object whatever its labels: from the cache, else one GET."""
        return self.get(ref) or self.client.get(ref)

    def remember(self, obj: Mapping[str, Any]) -> None:
        """Record an object the pass just wrote (as the API returned it)."""
        ref = ObjectRef.of(obj)
        packed = None  # packed once, and only when the view or the watch cache keeps it
        with self._lock:
            key = (ref.api_version, ref.kind)
            bucket = self._objects.get(key)
            if bucket is not None:
                packed = bucket[ref] = pack(obj)
                self._generations[key] = None  # no longer a copy of a store's state
            if ref.kind == "Namespace" and self._namespaces is not None:
                self._namespaces.add(ref.name)
        if self.cache is not None:
            self.cache.wrote(obj, packed)

    def forget(self, ref: ObjectRef) -> None:
        with self._lock:
            key = (ref.api_version, ref.kind)
            bucket = self._objects.get(key)
            if bucket is not None:
                bucket.pop(ref, None)
                self._generations[key] = None
        if self.cache is not None:
            self.cache.deleted(ref)

    def namespace_exists(self, name: str) -> bool:
        """True if ``name`` exists; a listed object living in it proves so without a request."""
        if name in self._seen_namespaces:
            return True
        return name in self.namespaces()

    def prefetch(self, refs: Iterable[ObjectRef]) -> None:
        """List the kinds of ``refs`` now; kinds the server does not serve yet are skipped."""
        for ref in refs:
            try:
                self.get(ref)
            except KubeError:
                continue

    def namespaces(self) -> set[str]:
        """Every namespace in the cluster (ours or not): one unfiltered list."""
        with self._lock:
            if self._namespaces is None:
                self._namespaces = {
                    _copy(str((ns.get("metadata") or {}).get("name", "")))
                    for ns in self.client.list("v1", "Namespace")
                }
            return self._namespaces

    def inventories(self) -> dict[str, Inventory]:
        """The cluster's inventories by instance name: one list request per pass."""
        with self._lock:
            if self._inventories is None:
                # inventories carry our managed-by label: reuse the ConfigMap list
                bucket = self._bucket(ObjectRef("v1", "ConfigMap", "", ""))
                cache = self._inventory_cache
                generation = self.generation("v1", "ConfigMap")
                answer = cache.answer if cache is not None else None
                if (
                    answer is not None
                    and generation is not None
                    and answer.generation == generation
                    and answer.cluster == self.cluster
                    and answer.namespaces == self.expected_namespaces
                    and answer.layout == self.layout
                ):
                    self._inventories = answer.inventories
                    self._homes = answer.homes
                    return answer.inventories
                if cache is not None:
                    cache.answer = None  # let the last pass's go before this one's is made
                read: dict[tuple[ObjectRef, str], tuple[Inventory, ...]] = {}
                for ref, packed in bucket.items():
                    if not ref.name.startswith(NAME_PREFIX):
                        continue  # an inventory is trusted only under its own name
                    version = version_of(packed)
                    key = (ref, version)
                    if cache is not None and version and key in cache:
                        read[key] = cache[key]
                    elif cache is not None and ref.name.endswith(SHARED_SUFFIX):
                        read[key] = self._read_shared(cache, ref, version, unpack(packed))
                    else:
                        read[key] = inventories_of(unpack(packed))
                found, homes = self._trusted(read)
                if cache is not None:
                    cache.clear()
                    cache.update(read)
                    cache.texts = {
                        ref: texts
                        for ref, texts in cache.texts.items()
                        if (ref, texts[0]) in read  # the version this pass read
                    }
                    if generation is not None:
                        cache.answer = _Answer(
                            generation,
                            self.cluster,
                            self.expected_namespaces,
                            self.layout,
                            found,
                            homes,
                        )
                self._inventories = found
                self._homes = homes
            return self._inventories

    @staticmethod
    def _read_shared(
        cache: InventoryCache, ref: ObjectRef, version: str, cm: Mapping[str, Any]
    ) -> tuple[Inventory, ...]:
        """A shared ConfigMap's inventories, each key whose text is as the cache last
        saw it being that very inventory (``shared_entries``); the cache then holds its
        texts at ``version``."""
        texts = cache.texts.get(ref)
        found = shared_entries(cm, texts[1] if texts is not None else None)
        data = cm.get("data") or {}
        cache.texts[ref] = (version, {str(data[inv.instance]): inv for inv in found})
        return found

    def _trusted(
        self, read: Mapping[tuple[ObjectRef, str], tuple[Inventory, ...]]
    ) -> tuple[dict[str, Inventory], dict[str, tuple[ObjectRef, ...]]]:
        """The trusted inventories (``inventory.trusted``) and the ConfigMaps holding each.

        An instance held in both layouts in one namespace (a switch cut short between
        writing its new place and deleting its old one) is taken from ``layout``'s.
        """
        shared = self.layout == PER_NAMESPACE
        pairs = sorted(
            ((ref, inv) for (ref, _), invs in read.items() for inv in invs),
            key=lambda pair: pair[0].name.endswith(SHARED_SUFFIX) == shared,
        )
        found = trusted((inv for _, inv in pairs), self.cluster, self.expected_namespaces)
        homes: dict[str, tuple[ObjectRef, ...]] = {}
        for ref, inv in pairs:
            kept = found.get(inv.instance)
            if kept is not None and kept.namespace == inv.namespace and inv.cluster == self.cluster:
                homes[inv.instance] = (*homes.get(inv.instance, ()), ref)
        return found, homes

    def inventory_homes(self, instance: str) -> tuple[ObjectRef, ...]:
        """The ConfigMaps ``instance``'s inventory is in now (none before its first)."""
        self.inventories()
        return self._homes.get(instance, ())

    def inventory_ref(self, instance: str, namespace: str) -> ObjectRef:
        """The ConfigMap holding ``instance``'s inventory: its own, or the shared one."""
        homes = self.inventory_homes(instance)
        if homes:
            return homes[-1]
        if self.layout == PER_NAMESPACE:
            return shared_ref(self.cluster, namespace)
        return ObjectRef("v1", "ConfigMap", namespace, inventory_name(instance))

    def flush_inventories(self) -> dict[str, str]:
        """Send the shared layout's staged inventory writes; instance -> error for those
        that failed (``InventoryWrites.flush``). Whoever made the view calls it once its
        applies and removals are done."""
        return self.writes.flush()

    def deployed_versions(self, instances: Iterable[str]) -> dict[str, str]:
        """Instance name -> deployed version, as ``read_deployed_versions`` (no extra request)."""
        wanted = set(instances)
        return {n: i.version for n, i in self.inventories().items() if n in wanted and i.version}

    def deployed_releases(self, instances: Iterable[str]) -> dict[str, str]:
        """Instance name -> deployed version and image builds (a ``release_key``)."""
        wanted = set(instances)
        return {n: i.release for n, i in self.inventories().items() if n in wanted and i.version}

    def inventory(self, instance: str) -> Inventory | None:
        return self.inventories().get(instance)

    def record_inventory(
        self,
        inv: Inventory,
        resource_version: str = "",
        home: ObjectRef | None = None,
    ) -> None:
        """``inv`` is the instance's inventory now; the pass wrote it as its ConfigMap,
        which the API server answered with ``resource_version``.

        The next pass would parse that ConfigMap back into an equal ``Inventory``
        (``to_configmap`` and ``from_configmap`` round-trip); the cache across passes
        gets ``inv`` itself under that version instead, so the next pass parses
        nothing and the daemon holds one copy of it where the memo of settled
        instances (``daemon.memo``, which keeps this pass's result) holds it too.
        """
        with self._lock:
            inventories = self.inventories()
            if self._inventory_cache is not None:
                self._inventory_cache.answer = None  # ``inventories`` is changed: no answer
            inventories[inv.instance] = inv
            ref = home or ObjectRef("v1", "ConfigMap", inv.namespace, inventory_name(inv.instance))
            self._homes[inv.instance] = (ref,)
            if self._inventory_cache is not None and resource_version:
                self._inventory_cache[(ref, resource_version)] = (inv,)

    def record_shared(self, cm: Mapping[str, Any], mine: Mapping[str, Inventory]) -> None:
        """A shared inventory ConfigMap as a flush left it: the next pass takes its
        entries from the cache instead of parsing them, the ones this pass wrote as
        the very objects it holds (``mine``: entry text -> inventory), as
        ``record_inventory`` does."""
        if self._inventory_cache is None:
            return
        meta = cm.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        if not version:
            return
        ref = ObjectRef("v1", "ConfigMap", str(meta.get("namespace", "")), str(meta.get("name")))
        with self._lock:
            cache = self._inventory_cache
            last = cache.texts.get(ref)
            # the keys it wrote, as the very inventories, and the others as last read
            cache.texts[ref] = (version, {**(last[1] if last else {}), **mine})
            entries = self._read_shared(cache, ref, version, cm)
            cache.answer = None
            cache[(ref, version)] = entries

    def drop_inventory(self, instance: str) -> None:
        with self._lock:
            inventories = self.inventories()
            if self._inventory_cache is not None:
                self._inventory_cache.answer = None
            inventories.pop(instance, None)
            self._homes.pop(instance, None)
