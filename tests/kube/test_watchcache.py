"""WatchCache: the store follows the watch, and the pass's own writes never roll it back.

A watch delivers one object's changes in order, each with the ``resourceVersion``
the write gave it (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions);
versions are compared for equality only, never as numbers.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from reconciler.kube import KubeClient
from reconciler.kube.inventory import MANAGED_SELECTOR, Inventory, inventory_name, to_configmap
from reconciler.kube.live import InventoryCache, LiveState, Packed, unpack, version_of
from reconciler.kube.prune import write_inventory
from reconciler.kube.watchcache import KindWatch, WatchCache, _events
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import SandboxHandle
from tests.kube.conftest import edit_like_kubectl

REF = ObjectRef("v1", "ConfigMap", "default", "settings")
LABEL, VALUE = MANAGED_SELECTOR.split("=")


@pytest.fixture
def client(sandbox: SandboxHandle) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig) as connected:
        yield connected


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60  # a bound for a busy machine, not a figure
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def version(cache: WatchCache, ref: ObjectRef = REF) -> str | None:
    _, packed = cache.current(ref)
    return version_of(packed) if packed is not None else None


def configmap(data: dict[str, str], name: str = REF.name) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": REF.namespace, "labels": {LABEL: VALUE}},
        "data": data,
    }


def test_a_write_answered_after_newer_events_does_not_roll_the_store_back(
    client: KubeClient,
) -> None:
    with WatchCache(client) as cache:
        LiveState(client, "test", cache=cache).get(REF)  # lists ConfigMaps, then watches
        ours = client.apply(configmap({"a": "1"})).body
        until(lambda: version(cache) == ours["metadata"]["resourceVersion"], "our write's event")
        edit_like_kubectl(client, REF, {"data": {"a": "2"}})
        newer = client.get(REF)
        assert newer is not None
        until(lambda: version(cache) == newer["metadata"]["resourceVersion"], "the edit's event")
        cache.wrote(ours)  # a slow pass records its write only now
        assert version(cache) == newer["metadata"]["resourceVersion"]


def test_our_write_stands_until_its_own_event_arrives(client: KubeClient) -> None:
    with WatchCache(client) as cache:
        LiveState(client, "test", cache=cache).get(REF)
        first = client.apply(configmap({"a": "1"})).body
        until(lambda: version(cache) == first["metadata"]["resourceVersion"], "the create event")
        second = client.apply(configmap({"a": "2"})).body
        cache.wrote(second)  # at once: before (or after) its event, the store holds it
        assert version(cache) == second["metadata"]["resourceVersion"]
        client.delete(REF)
        cache.deleted(REF)
        assert version(cache) is None
        # the watch went on: a new object shows up through it
        third = client.apply(configmap({"a": "3"})).body
        until(lambda: version(cache) == third["metadata"]["resourceVersion"], "the re-create")


def written_and_stored(
    client: KubeClient, cache: WatchCache
) -> tuple[dict[str, Any], Packed, KindWatch]:
    """REF written once and its event seen: (the API's answer, the store's packed copy,
    the kind's watch)."""
    LiveState(client, "test", cache=cache).get(REF)
    ours: dict[str, Any] = client.apply(configmap({"a": "1"})).body
    until(lambda: version(cache) == ours["metadata"]["resourceVersion"], "our write's event")
    _, stored = cache.current(REF)
    assert stored is not None
    return ours, stored, cache._kinds[("v1", "ConfigMap", "")]


def test_an_event_of_the_version_the_store_has_keeps_the_stored_copy(client: KubeClient) -> None:
    """Same ``resourceVersion``, same object: the event of our own write is not packed
    again, so the pass that wrote it and the store share one copy."""
    with WatchCache(client) as cache:
        ours, stored, watch = written_and_stored(client, cache)
        watch._apply({"type": "MODIFIED", "object": dict(ours)})
        assert cache.current(REF)[1] is stored
        # another version is another object: packed from the event
        newer = {**ours, "metadata": {**ours["metadata"], "resourceVersion": "999999"}}
        watch._apply({"type": "MODIFIED", "object": {**newer, "data": {"a": "2"}}})
        _, now = cache.current(REF)
        assert now is not None and now is not stored
        assert version_of(now) == "999999" and unpack(now)["data"] == {"a": "2"}


def test_a_list_while_the_watch_relists_keeps_the_stored_copies(client: KubeClient) -> None:
    """A pass that finds a kind's watch out of sync (relisting after a 410) lists the
    kind itself; what did not change since the store saw it stays the store's copy,
    and a relist keeps it too: one copy of each object, not one per list."""
    with WatchCache(client) as cache:
        _, stored, watch = written_and_stored(client, cache)
        with watch.lock:
            watch.synced = False  # as while the watch lists again
        live = LiveState(client, "test", cache=cache)
        assert live.packed(REF) is stored
        watch._relist()
        assert cache.current(REF) == (True, stored)


def test_kinds_that_relist_at_once_list_one_after_the_other(
    client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every watched kind can lose its place at once (410s after a burst of changes);
    each list holds a decoded page of up to 500 objects, so they list one at a time,
    and a process does not keep the high-water mark of all of them side by side."""
    with WatchCache(client) as cache:
        live = LiveState(client, "test", cache=cache)
        live.get(REF)
        live.get(ObjectRef("v1", "Secret", "default", "absent"))
        listing = client.list_snapshot
        lock = threading.Lock()
        now, most = [0], [0]

        def counted(*args: Any, **kwargs: Any) -> Any:
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
            try:
                time.sleep(0.1)
                return listing(*args, **kwargs)
            finally:
                with lock:
                    now[0] -= 1

        monkeypatch.setattr(client, "list_snapshot", counted)
        watches = list(cache._kinds.values())
        assert len(watches) == 2
        threads = [threading.Thread(target=w._relist) for w in watches]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert most == [1]
        assert all(w.synced for w in watches)


def test_a_views_generation_names_the_store_state_it_copies(client: KubeClient) -> None:
    """Two passes' views of a kind with the same generation hold the very same objects:
    a watch event, our own write and a deletion each give the store a new one, and a
    view the pass wrote to, or listed without the cache, has none (``daemon.memo``
    compares objects one by one then)."""
    with WatchCache(client) as cache:
        first = client.apply(configmap({"a": "1"})).body
        LiveState(client, "test", cache=cache).get(REF)  # lists ConfigMaps, then watches
        rv = first["metadata"]["resourceVersion"]
        until(lambda: version(cache) == rv, "the watch to hold the object")

        def view() -> LiveState:
            live = LiveState(client, "test", cache=cache)
            live.get(REF)
            return live

        quiet = view().generation("v1", "ConfigMap")
        assert quiet is not None
        again = view()
        assert again.generation("v1", "ConfigMap") == quiet  # nothing changed between
        assert again.generation("apps/v1", "Deployment") is None  # not read by this view
        assert again.kinds() == {("v1", "ConfigMap")}
        edit_like_kubectl(client, REF, {"data": {"a": "2"}})  # someone else's write
        edited = client.get(REF)
        assert edited is not None
        rv = edited["metadata"]["resourceVersion"]
        until(lambda: version(cache) == rv, "the edit's event")
        after_edit = view().generation("v1", "ConfigMap")
        assert after_edit not in (None, quiet)
        # the pass's own write: its view is no longer a copy of any store state, and the
        # store it wrote to has a new generation for the next view
        writing = view()
        writing.remember(client.apply(configmap({"b": "3"})).body)
        assert writing.generation("v1", "ConfigMap") is None
        after_write = view().generation("v1", "ConfigMap")
        assert after_write not in (None, quiet, after_edit)
        deleting = view()
        assert client.delete(REF)
        deleting.forget(REF)
        assert deleting.generation("v1", "ConfigMap") is None
        gone = view()
        assert gone.get(REF) is None
        assert gone.generation("v1", "ConfigMap") not in (None, quiet, after_edit, after_write)
    listed = LiveState(client, "test")  # no watch cache: every pass lists
    listed.get(REF)
    assert listed.generation("v1", "ConfigMap") is None


def test_a_pass_whose_configmaps_did_not_change_takes_the_last_inventories_as_they_are(
    client: KubeClient,
) -> None:
    """The inventories a pass read are the next pass's when its ConfigMaps are the very
    same (the same generation, cluster and namespaces); an edit of one, the pass's own
    write and other namespaces each make them read again."""
    for name in ("one", "two"):
        inv = Inventory(cluster="test", instance=name, namespace="default", version="1.0.0")
        client.apply(to_configmap(inv))
    cache = InventoryCache()
    with WatchCache(client) as watches:

        def inventories(namespaces: dict[str, str] | None = None) -> dict[str, Inventory]:
            live = LiveState(client, "test", namespaces, inventory_cache=cache, cache=watches)
            return live.inventories()

        listed = inventories()  # lists the ConfigMaps (no generation), then watches them
        first = inventories()
        assert first == listed and first is not listed
        assert {n: i.version for n, i in first.items()} == {"one": "1.0.0", "two": "1.0.0"}
        assert inventories() is first  # nothing changed: the same answer, not made again
        # the namespaces Git names are part of the answer: another mapping, another one
        elsewhere = inventories({"one": "other"})
        assert "one" not in elsewhere and elsewhere is not first
        assert inventories() == first
        # someone edits an inventory: read again, the other one as it was parsed before
        again = inventories()
        ref = ObjectRef("v1", "ConfigMap", "default", inventory_name("two"))
        edit_like_kubectl(client, ref, {"data": {"version": "2.0.0"}})
        edited = client.get(ref)
        assert edited is not None
        rv = edited["metadata"]["resourceVersion"]

        def seen() -> bool:
            _, packed = watches.current(ref)
            return packed is not None and version_of(packed) == rv

        until(seen, "the edit's event")
        after = inventories()
        assert after is not again and after["two"].version == "2.0.0"
        assert after["one"] is again["one"]
        # a pass that writes an inventory changes its own answer, which is not kept
        live = LiveState(client, "test", inventory_cache=cache, cache=watches)
        answer = live.inventories()
        three = Inventory(cluster="test", instance="three", namespace="default", version="1.0.0")
        assert write_inventory(client, live, three, None) is three
        assert cache.answer is None and answer["three"] is three
        latest = inventories()
        assert latest is not answer and set(latest) == {"one", "two", "three"}


class _Chunks:
    """A watch response's body as the stream hands it over: chunks cut anywhere."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks


def test_watch_events_are_read_whole_however_the_chunks_cut_them() -> None:
    """Many events in one chunk (an install's status writes), one event over three
    chunks, blank lines between them, and a last event without its newline."""
    lines = [orjson.dumps({"type": "MODIFIED", "object": {"n": i}}) for i in range(50)]
    body = b"\n".join(lines[:40]) + b"\n\n" + b"\n".join(lines[40:])
    cuts = [0, 7, 8, 900, 901, 1500, len(body) - 3, len(body)]
    assert len(body) > 1503
    chunks = [body[a:b] for a, b in itertools.pairwise(cuts)]
    got = [e["object"]["n"] for e in _events(_Chunks(*chunks))]
    assert got == list(range(50))
    assert [e["object"]["n"] for e in _events(_Chunks(body + b"\n"))] == list(range(50))


OTHER = ObjectRef("v1", "ConfigMap", "default", "other")


def test_a_wakeup_is_set_by_a_change_of_what_it_follows_and_by_nothing_else(
    client: KubeClient,
) -> None:
    """A health wait sleeps until an object it waits for changes: an event for another
    object leaves it asleep, and once the wait ends it is followed no more (an event
    then costs the cache one look at an empty dict)."""
    with WatchCache(client) as cache:
        written_and_stored(client, cache)
        other = client.apply(configmap({"b": "1"}, OTHER.name)).body
        until(lambda: cache.current(OTHER)[1] is not None, "the other ConfigMap's event")
        with cache.wakeup() as wakeup:
            wakeup.follow([REF])
            assert cache._waiting.keys() == {REF}
            edit_like_kubectl(client, OTHER, {"data": {"b": "2"}})
            edited = client.get(OTHER)
            assert edited is not None and edited != other
            newer = edited["metadata"]["resourceVersion"]
            until(lambda: version(cache, OTHER) == newer, "the other's edit")
            assert not wakeup.event.is_set()  # applied, and nobody was woken for it
            edit_like_kubectl(client, REF, {"data": {"a": "2"}})
            assert wakeup.wait(60)  # a bound for a busy machine: woken by the event
            wakeup.follow([OTHER])  # follows only the other now, and is not set any more
            assert cache._waiting.keys() == {OTHER} and not wakeup.event.is_set()
        assert cache._waiting == {} and cache._wakeups == set()


def test_a_watch_that_loses_its_place_wakes_every_wait(
    client: KubeClient, sandbox: SandboxHandle
) -> None:
    """After a 410 the kind is listed again, and the list may hold changes no event
    announced: a wait following any object is woken, and reads it again."""
    with WatchCache(client) as cache:
        written_and_stored(client, cache)
        with cache.wakeup() as wakeup:
            wakeup.follow([REF])
            # a write the watch does not see (no label of ours), then the history goes
            client.apply({**configmap({}), "metadata": {"name": "else", "namespace": "default"}})
            sandbox.compact_history()
            sandbox.close_watches()
            assert wakeup.wait(60)
            until(lambda: cache.relists >= 1 and cache.current(REF)[0], "the relist")


def test_a_cache_that_closes_wakes_its_waits_and_keeps_nothing_current(
    client: KubeClient,
) -> None:
    """The daemon stops while a pass waits: the wait is woken, and from then on it
    reads the objects with GETs, since no watch brings their changes any more."""
    cache = WatchCache(client)
    try:
        written_and_stored(client, cache)
        wakeup = cache.wakeup()
        wakeup.follow([REF])
        assert cache.current(REF)[0] and not wakeup.event.is_set()
    finally:
        cache.close()
    assert wakeup.event.is_set() and cache.current(REF) == (False, None)
    wakeup.close()
