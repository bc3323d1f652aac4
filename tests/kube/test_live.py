"""The pass's live view: slim objects, one list per kind however many threads ask."""

from __future__ import annotations

import dataclasses
import threading
import zlib
from typing import Any

import orjson
import pytest

from reconciler.kube import LiveState
from reconciler.kube import live as live_module
from reconciler.kube.inventory import INSTANCE_LABEL, Inventory, inventory_name, to_configmap
from reconciler.kube.live import (
    InventoryCache,
    dictionary_of,
    list_packed,
    pack,
    slim,
    unpack,
    version_of,
)
from reconciler.kube.prune import write_inventory
from reconciler.kube.watchcache import WatchCache
from reconciler.model.changeset import ObjectRef
from tests.kube.conftest import Backend, configmap, edit_like_kubectl, string_ids

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def entry(manager: str, operation: str, fields: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


def test_slim_keeps_who_wrote_how_and_drops_the_field_sets() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "c",
            "managedFields": [
                entry("reconciler", "Apply", {"f:data": {"f:a": {}}}),
                entry("kubectl-edit", "Update", {"f:data": {"f:b": {}}}),
                entry("kubectl-edit", "Update", {"f:metadata": {}}, subresource="status"),
            ],
        },
        "data": {"a": "1", "b": "2"},
    }
    kept = slim(obj)
    assert kept["metadata"]["managedFields"] == [
        {"manager": "kubectl-edit", "operation": "Update"},
        {"manager": "reconciler", "operation": "Apply"},
    ]
    assert kept["data"] is obj["data"]  # shared, not copied
    again = slim({**obj, "metadata": {**obj["metadata"], "name": "d"}})
    assert again["metadata"]["managedFields"] is kept["metadata"]["managedFields"]
    assert len(obj["metadata"]["managedFields"]) == 3  # the answer itself is left alone


def test_slim_keeps_everything_while_client_side_apply_fields_wait_to_be_taken_over() -> None:
    """The take-over patch rewrites the whole managedFields list (``csaupgrade``)."""
    owns = {"f:metadata": {"f:annotations": {f"f:{LAST_APPLIED}": {}}}, "f:data": {}}
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "c",
            "managedFields": [entry("kubectl-client-side-apply", "Update", owns)],
        },
    }
    assert slim(obj) == obj


def test_the_live_view_holds_slim_objects_that_still_name_an_imperative_editor(
    backend: Backend,
) -> None:
    ns = backend.namespace("slim")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    backend.client.apply(configmap("c", ns, "web"))
    ref = ObjectRef("v1", "ConfigMap", ns, "c")
    edit_like_kubectl(backend.client, ref, {"data": {"a": "2"}})
    live = LiveState(backend.client, backend.cluster)
    held = live.get(ref)
    assert held is not None and held["data"] == {"a": "2"}
    assert all(set(e) == {"manager", "operation"} for e in held["metadata"]["managedFields"])
    assert {"manager": "kubectl-edit", "operation": "Update"} in held["metadata"]["managedFields"]


def test_threads_asking_at_once_cause_one_list(backend: Backend) -> None:
    ns = backend.namespace("once")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    backend.client.apply(configmap("c", ns, "web"))
    live = LiveState(backend.client, backend.cluster)
    start = threading.Barrier(6, timeout=10)
    found: list[Any] = []

    def look() -> None:
        start.wait()
        found.append(live.get(ObjectRef("v1", "ConfigMap", ns, "c")))

    backend.reset_log()
    threads = [threading.Thread(target=look) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(found) == 6 and all(f is not None for f in found)
    log = backend.log()
    if log is not None:
        lists = [e for e in log if e.verb == "list" and e.path.endswith("/configmaps")]
        assert len(lists) == 1


def test_each_get_decodes_a_fresh_copy_and_resource_versions_need_no_decoding(
    backend: Backend,
) -> None:
    """Objects are kept packed: a caller changing what it got changes nothing held."""
    ns = backend.namespace("packed")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    written = backend.client.apply(configmap("c", ns, "web")).body
    ref = ObjectRef("v1", "ConfigMap", ns, "c")
    live = LiveState(backend.client, backend.cluster)
    first = live.get(ref)
    assert first is not None
    first["data"]["a"] = "changed by a caller"
    again = live.get(ref)
    assert again is not None and again["data"] != first["data"]
    packed = live.packed(ref)
    assert packed is not None and version_of(packed) == written["metadata"]["resourceVersion"]
    assert live.packed(ObjectRef("v1", "ConfigMap", ns, "absent")) is None


def test_a_list_again_keeps_what_did_not_change_from_the_previous_one(backend: Backend) -> None:
    """A watch that lost its place (410) lists its kind again: an object with the
    resourceVersion it had is that object, so its packed bytes and reference are
    kept, not a second copy of every object of the kind made beside the first."""
    ns = backend.namespace("relist")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("same", "edited"):
        backend.client.apply(configmap(name, ns, "web"))
    selector = f"{INSTANCE_LABEL}=web"
    before, _ = list_packed(backend.client, "v1", "ConfigMap", selector)
    backend.client.apply(configmap("edited", ns, "web", a="2"))
    after, _ = list_packed(backend.client, "v1", "ConfigMap", selector, previous=before)
    same, edited = (
        ObjectRef("v1", "ConfigMap", ns, "same"),
        ObjectRef("v1", "ConfigMap", ns, "edited"),
    )
    assert after[same] is before[same]
    assert next(r for r in after if r == same) is next(r for r in before if r == same)
    assert after[edited] is not before[edited]
    assert version_of(after[edited]) != version_of(before[edited])
    assert unpack(after[edited])["data"] == {"a": "2"}
    # the list is cluster-wide: on a shared cluster (the real lane runs in parallel) other
    # objects with the label may come and go between the two lists; this test's do not
    assert {r for r in after if r.namespace == ns} == {same, edited}
    assert {r for r in before if r.namespace == ns} == {same, edited}


def test_the_view_lists_in_pages_of_its_own_size(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page is decoded whole before it is packed, so the view's lists use pages
    of ``PACKED_PAGE`` objects, whatever the client's own page size."""
    ns = backend.namespace("pages")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("a", "b", "c"):
        backend.client.apply(configmap(name, ns, "paged"))
    monkeypatch.setattr(live_module, "PACKED_PAGE", 2)
    backend.reset_log()
    found, _ = list_packed(backend.client, "v1", "ConfigMap", f"{INSTANCE_LABEL}=paged")
    assert sorted(r.name for r in found) == ["a", "b", "c"]
    log = backend.log()
    if log is not None:
        lists = [e for e in log if e.verb == "list"]
        assert len(lists) == 2 and all("limit=2" in e.query for e in lists)


def _pages_listed(backend: Backend, ns: str, live: LiveState) -> list[str] | None:
    """The queries of the ConfigMap lists ``live`` sends to read three objects (None on
    a real cluster, which keeps no request log)."""
    backend.reset_log()
    for name in ("a", "b", "c"):
        got = live.get(ObjectRef("v1", "ConfigMap", ns, name))
        assert got is not None and got["metadata"]["name"] == name
    log = backend.log()
    return None if log is None else [e.query for e in log if e.verb == "list"]


def test_a_pass_without_the_watch_cache_lists_a_kind_in_pages_of_its_own_size(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --once`` and the CLI's commands list every kind on every pass: their pages are
    ``ONE_SHOT_PAGE`` objects (a no-op lists a kind of a few thousand objects once), the
    watch cache's stay ``PACKED_PAGE`` (it lists a kind once, then watches it). A real
    API server answers ``limit`` with at most that many items and a ``continue`` token
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    ns = backend.namespace("one-shot")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("a", "b", "c"):
        backend.client.apply(configmap(name, ns, "one-shot"))
    monkeypatch.setattr(live_module, "PACKED_PAGE", 1)
    monkeypatch.setattr(live_module, "ONE_SHOT_PAGE", 2)
    one_shot = _pages_listed(backend, ns, LiveState(backend.client, backend.cluster))
    with WatchCache(backend.client) as cache:
        watched = _pages_listed(
            backend, ns, LiveState(backend.client, backend.cluster, cache=cache)
        )
    if one_shot is not None and watched is not None:
        assert one_shot and all("limit=2" in q for q in one_shot)
        assert len(watched) > len(one_shot) and all("limit=1" in q for q in watched)


def test_an_inventory_is_parsed_again_only_when_its_configmap_changed(backend: Backend) -> None:
    """The daemon's cache of parsed inventories keys on the ConfigMap's resourceVersion,
    which the API server changes on every write
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions)."""
    ns = backend.namespace("inv-cache")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("one", "two"):
        inv = Inventory(cluster=backend.cluster, instance=name, namespace=ns, version="1.0.0")
        backend.client.apply(to_configmap(inv))
    cache = InventoryCache()
    first = LiveState(backend.client, backend.cluster, inventory_cache=cache).inventories()
    assert first["one"].version == first["two"].version == "1.0.0"
    ref = ObjectRef("v1", "ConfigMap", ns, inventory_name("two"))
    edit_like_kubectl(backend.client, ref, {"data": {"version": "2.0.0"}})
    second = LiveState(backend.client, backend.cluster, inventory_cache=cache).inventories()
    assert second["two"].version == "2.0.0"  # read again: it changed
    assert second["one"] is first["one"]  # the same ConfigMap: not parsed again
    # what the last pass read, nothing older: one entry per ConfigMap, at its version
    # now (the cluster may hold other inventories too; a real one may, so only this
    # test's namespace is counted, and no ConfigMap anywhere has two entries)
    mine = sorted((ref.name, version) for ref, version in cache if ref.namespace == ns)
    assert [name for name, _ in mine] == [inventory_name("one"), inventory_name("two")]
    edited = backend.client.get(ref)
    assert edited is not None
    assert dict(mine)[inventory_name("two")] == edited["metadata"]["resourceVersion"]
    assert len({ref for ref, _ in cache}) == len(cache)


def test_the_inventory_a_pass_writes_is_the_one_the_next_pass_reads(backend: Backend) -> None:
    """The pass that writes an inventory hands it to the next pass under the version the
    API server answered: the next pass parses nothing, and the daemon holds one copy."""
    ns = backend.namespace("inv-written")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cache = InventoryCache()
    live = LiveState(backend.client, backend.cluster, inventory_cache=cache)
    assert live.inventories() == {}
    inv = Inventory(
        cluster=backend.cluster,
        instance="web",
        namespace=ns,
        version="1.0.0",
        objects={ObjectRef("v1", "ConfigMap", ns, "web-config"): "f1"},
    )
    assert write_inventory(backend.client, live, inv, None) is inv
    again = LiveState(backend.client, backend.cluster, inventory_cache=cache).inventories()
    assert again["web"] is inv
    # the next pass's apply builds an equal inventory: nothing is written, and the one
    # that stands is the one already held, not a second copy
    equal = dataclasses.replace(inv, objects=dict(inv.objects))
    assert write_inventory(backend.client, live, equal, again["web"]) is inv
    # changed behind the pass's back: the version no longer matches, so it is read again
    ref = ObjectRef("v1", "ConfigMap", ns, inventory_name("web"))
    edit_like_kubectl(backend.client, ref, {"data": {"version": "2.0.0"}})
    third = LiveState(backend.client, backend.cluster, inventory_cache=cache).inventories()
    assert third["web"].version == "2.0.0"


def test_the_view_keeps_no_string_of_a_decoded_list_page(
    backend: Backend, monkeypatch: Any
) -> None:
    """What the view keeps of a listed object is allocated on its own, not a piece of the page.

    CPython frees an arena of small objects only once all of them are freed, so a
    name or ``resourceVersion`` kept from each item would keep the whole decoded
    page resident after it is dropped (``live._copy``): memory that grew with every
    pass that lists. The items are held here, so their strings' ids stay theirs.
    """
    ns = backend.namespace("pages")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("a", "b"):
        backend.client.apply(configmap(name, ns, "web"))
    items: list[dict[str, Any]] = []
    listing = backend.client.list_snapshot  # what the view lists with (``live.list_packed``)

    def spying(*args: Any, keep: Any = None, **kwargs: Any) -> Any:
        def seen(item: dict[str, Any]) -> Any:
            items.append(item)
            return keep(item)

        return listing(*args, keep=seen if keep is not None else None, **kwargs)

    monkeypatch.setattr(backend.client, "list_snapshot", spying)
    live = LiveState(backend.client, backend.cluster)
    refs = [ObjectRef("v1", "ConfigMap", ns, name) for name in ("a", "b")]
    assert all(live.packed(ref) for ref in refs)
    page = {i for item in items for i in string_ids(item)}
    assert len(items) >= 2 and page
    kept = live._objects[("v1", "ConfigMap")]
    held = [key for key in kept if key in refs]  # the values are bytes of their own
    assert len(held) == 2
    for key in held:
        fields = (key.api_version, key.kind, key.namespace, key.name)
        assert not {id(s) for s in fields} & page


def deployment(name: str, image: str, replicas: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "reconciler"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "labels": labels, "resourceVersion": "7"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "web", "image": image, "ports": [{"containerPort": 80}]}
                    ]
                },
            },
        },
        "status": {"replicas": replicas, "readyReplicas": replicas, "observedGeneration": 1},
    }


def test_a_packed_object_unpacks_to_what_was_packed_whatever_its_kind_or_size() -> None:
    inventory = to_configmap(
        Inventory(
            cluster="dev",
            instance="shop",
            namespace="shop",
            objects={ObjectRef("apps/v1", "Deployment", "shop", "web"): "fingerprint"},
            source_commit="c0ffee",
        )
    )
    big = configmap("big", "shop", "shop", **{f"key_{i}": f"value {i} " * 20 for i in range(400)})
    objects = [
        deployment("web", "nginx:1.25", 3),
        deployment("api", "api:2", 1),
        inventory,
        big,
        big,
    ]
    for obj in objects:
        packed = pack(obj)
        assert version_of(packed) == str(obj["metadata"].get("resourceVersion") or "")
        assert unpack(packed) == slim(obj)
    assert len(orjson.dumps(big)) > 16 * 1024  # longer than a dictionary


def test_objects_of_one_kind_pack_to_a_fraction_of_their_json(monkeypatch: Any) -> None:
    """The second Deployment compresses against the first one's JSON: what the live view
    keeps per object is its differences from that, not its whole JSON."""
    monkeypatch.setattr(live_module, "_dictionaries", {})  # as in a process just started
    pack(deployment("first", "nginx:1.25", 3))
    second = deployment("second-one", "registry.example/second:4.1.0", 2)
    packed = pack(second)
    assert len(packed) * 5 < len(orjson.dumps(second))
    # the dictionary is shared by every object of the kind, not copied into each
    assert dictionary_of(packed) is dictionary_of(pack(deployment("third", "x:1", 1)))
    # the reconciler's own inventories do not share a dictionary with an app's ConfigMaps
    inventory = to_configmap(Inventory(cluster="dev", instance="i", namespace="n"))
    app_config = configmap("app-config", "n", "i")
    assert dictionary_of(pack(inventory)) is not dictionary_of(pack(app_config))


def test_objects_with_a_status_pack_against_one_with_a_status(monkeypatch: Any) -> None:
    """A pass writes a Deployment before its controller reports on it; the watch then
    keeps it with its status. Against the JSON of a Deployment without a status, a Ready
    one packs to about twice what it does against another with a status."""
    monkeypatch.setattr(live_module, "_dictionaries", {})
    new = deployment("first", "nginx:1.25", 3)
    del new["status"]
    pack(new)
    ready = deployment("second-one", "registry.example/second:4.1.0", 2)
    ready["status"] = {
        "observedGeneration": 1,
        "replicas": 2,
        "updatedReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
                "lastUpdateTime": "2026-11-26T10:00:00Z",
                "lastTransitionTime": "2026-11-26T10:00:00Z",
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable",
                "message": 'ReplicaSet "second-one-5d4f" has successfully progressed.',
                "lastUpdateTime": "2026-11-26T10:00:00Z",
                "lastTransitionTime": "2026-11-26T10:00:00Z",
            },
        ],
    }
    assert dictionary_of(pack(ready)) is not dictionary_of(pack(new))
    third = orjson.loads(orjson.dumps(ready).replace(b"second-one", b"third"))
    packed = pack(third)
    assert unpack(packed) == slim(third)
    assert dictionary_of(packed) is dictionary_of(pack(ready))
    # what it would pack to against the Deployment without a status
    packer = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS, 4, 0, dictionary_of(pack(new)))
    against_new = len(packer.compress(orjson.dumps(slim(third))) + packer.flush())
    assert len(packed) * 2 < against_new


def test_a_packed_object_carries_its_resource_version_whatever_its_length() -> None:
    """The version is read from the packed bytes without inflating them; resourceVersions
    are opaque strings (https://kubernetes.io/docs/reference/using-api/api-concepts/
    #resource-versions), so any length a header can say is kept, and one beyond it is a
    clear error rather than a corrupted object."""
    for version in ("", "7", "x" * 300, "ü" * 1000):
        obj = configmap("c", "n", "i")
        obj["metadata"]["resourceVersion"] = version
        packed = pack(obj)
        assert version_of(packed) == version
        assert unpack(packed)["metadata"].get("resourceVersion", "") == version
    obj["metadata"]["resourceVersion"] = "9" * 70_000
    with pytest.raises(ValueError, match="resourceVersion of 70000 bytes"):
        pack(obj)
