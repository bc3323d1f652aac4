"""The ``perNamespace`` inventory layout: one ConfigMap per namespace holds its instances'.

What a real API server does that these tests rely on:
- a JSON merge patch changes only the keys it names, and ``null`` removes a key
  (RFC 7386; https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/#use-a-json-merge-patch-to-update-a-deployment),
  applied to the object as the server holds it, so two writers of different keys
  keep each other's;
- a POST of a name that exists is 409 ``AlreadyExists``, and a PATCH of a missing
  object is 404 (https://kubernetes.io/docs/reference/using-api/api-concepts/);
- a delete with a ``resourceVersion`` precondition is refused (409) when the object
  changed since (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reconciler.kube import (
    ApplyOptions,
    InstanceResult,
    InstanceTarget,
    LiveState,
    apply_instance,
    inventory_written,
    read_instance_inventory,
    remove_instance,
)
from reconciler.kube import inventory_writes as writes_module
from reconciler.kube.inventory import (
    PER_INSTANCE,
    PER_NAMESPACE,
    Inventory,
    entry_size,
    entry_text,
    inventories_of,
    inventory_name,
    read_inventories,
    shared_configmap,
    shared_name,
)
from reconciler.kube.live import InventoryCache
from reconciler.kube.prune import write_inventory
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError
from tests.kube.conftest import Backend, configmap, deployment, edit_like_kubectl
from tests.kube.test_apply import actions


def cm_ref(ns: str, name: str) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", ns, name)


def objects_of(instance: str, ns: str) -> list[dict[str, Any]]:
    return [configmap(f"{instance}-cfg", ns, instance), deployment(f"{instance}-app", ns, instance)]


def apply_pass(
    be: Backend,
    ns: str,
    instances: dict[str, list[dict[str, Any]]],
    layout: str = PER_NAMESPACE,
    **opts: Any,
) -> dict[str, InstanceResult]:
    """Apply each instance with one view, as a pass does, then flush the view's writes."""
    live = LiveState(be.client, be.cluster, layout=layout)
    results = {}
    for name, objects in instances.items():
        target = InstanceTarget(be.cluster, name, ns, tuple(objects), "demo", "1.0.0")
        results[name] = apply_instance(be.client, target, ApplyOptions(**opts), live)
    failed = live.flush_inventories()
    return {name: inventory_written(r, failed) for name, r in results.items()}


def inventory_writes(be: Backend, ns: str) -> list[str] | None:
    """The writes of inventory ConfigMaps (both layouts) in ``ns``, in order."""
    writes = be.writes()
    if writes is None:
        return None
    prefix = f"/api/v1/namespaces/{ns}/configmaps"
    return [
        w
        for w in writes
        if w.split(" ", 1)[1].startswith(prefix)
        and (w.endswith(prefix) or "reconciler-inventory-" in w)
    ]


def test_a_pass_writes_a_namespace_s_inventories_with_one_request(backend: Backend) -> None:
    ns = backend.namespace("shared")
    names = ["a", "b", "c", "d"]
    results = apply_pass(backend, ns, {n: objects_of(n, ns) for n in names})
    assert all(r.ok for r in results.values()), [r.message for r in results.values()]
    # one ConfigMap for the four, no ConfigMap of their own
    shared = backend.client.get(cm_ref(ns, shared_name(backend.cluster)))
    assert shared is not None and sorted(shared["data"]) == names
    for name in names:
        assert backend.client.get(cm_ref(ns, inventory_name(name))) is None
    if backend.sandbox is not None:
        assert inventory_writes(backend, ns) == [f"create /api/v1/namespaces/{ns}/configmaps"]
    found = read_inventories(backend.client, backend.cluster)
    assert sorted(found) == names
    assert set(found["c"].objects) == {
        cm_ref(ns, "c-cfg"),
        ObjectRef("apps/v1", "Deployment", ns, "c-app"),
    }
    assert found["c"].namespace == ns and found["c"].version == "1.0.0"
    # ``reconciler get`` finds it too
    assert read_instance_inventory(backend.client, backend.cluster, "c", ns) == found["c"]
    # an unchanged pass writes nothing
    backend.reset_log()
    again = apply_pass(backend, ns, {n: objects_of(n, ns) for n in names})
    assert all(r.ok for r in again.values())
    assert backend.writes() in ([], None)


def test_a_change_patches_only_its_key_and_prunes_from_it(backend: Backend) -> None:
    ns = backend.namespace("shared")
    apply_pass(backend, ns, {n: objects_of(n, ns) for n in ("a", "b")})
    before = backend.client.get(cm_ref(ns, shared_name(backend.cluster)))
    assert before is not None
    backend.reset_log()
    # "a" drops its Deployment: pruned, on the word of its key
    changed = apply_pass(
        backend, ns, {"a": [configmap("a-cfg", ns, "a")], "b": objects_of("b", ns)}
    )
    assert changed["a"].ok, changed["a"].message
    assert actions(changed["a"])[f"Deployment/{ns}/a-app"] == "deleted"
    assert backend.client.get(ObjectRef("apps/v1", "Deployment", ns, "a-app")) is None
    name = shared_name(backend.cluster)
    if backend.sandbox is not None:
        assert inventory_writes(backend, ns) == [f"patch /api/v1/namespaces/{ns}/configmaps/{name}"]
    after = backend.client.get(cm_ref(ns, name))
    assert after is not None
    assert after["data"]["b"] == before["data"]["b"]
    assert set(read_inventories(backend.client, backend.cluster)["a"].objects) == {
        cm_ref(ns, "a-cfg")
    }


def test_removing_instances_removes_their_keys_then_the_configmap(backend: Backend) -> None:
    ns = backend.namespace("shared")
    apply_pass(backend, ns, {n: objects_of(n, ns) for n in ("a", "b")})
    ref = cm_ref(ns, shared_name(backend.cluster))
    for gone, left in (("a", ["b"]), ("b", [])):
        live = LiveState(backend.client, backend.cluster, layout=PER_NAMESPACE)
        inventory = live.inventory(gone)
        assert inventory is not None
        changes, reason, message = remove_instance(backend.client, live, inventory)
        assert reason is None, message
        assert live.flush_inventories() == {}
        assert {str(e.action) for e in changes.entries} == {"deleted"}
        assert sorted(read_inventories(backend.client, backend.cluster)) == left
        assert backend.client.get(cm_ref(ns, f"{gone}-cfg")) is None
    # the last key gone, the ConfigMap goes too
    assert backend.client.get(ref) is None


@pytest.mark.parametrize("first", [PER_INSTANCE, PER_NAMESPACE])
def test_switching_layouts_moves_every_inventory_at_the_next_pass(
    backend: Backend, first: str
) -> None:
    ns = backend.namespace("shared")
    instances = {n: objects_of(n, ns) for n in ("a", "b")}
    apply_pass(backend, ns, instances, layout=first)
    before = read_inventories(backend.client, backend.cluster)
    second = PER_INSTANCE if first == PER_NAMESPACE else PER_NAMESPACE
    # nothing of the instances changed: only the cluster's layout did
    moved = apply_pass(backend, ns, instances, layout=second)
    assert all(r.ok for r in moved.values()), [r.message for r in moved.values()]
    assert all(set(actions(r).values()) == {"unchanged"} for r in moved.values())
    shared = backend.client.get(cm_ref(ns, shared_name(backend.cluster)))
    own = [backend.client.get(cm_ref(ns, inventory_name(n))) for n in instances]
    if second == PER_NAMESPACE:
        assert shared is not None and sorted(shared["data"]) == ["a", "b"]
        assert own == [None, None]
    else:
        assert shared is None  # emptied, then deleted
        assert all(cm is not None for cm in own)
    after = read_inventories(backend.client, backend.cluster)
    assert {n: (i.objects, i.version) for n, i in after.items()} == {
        n: (i.objects, i.version) for n, i in before.items()
    }
    # and it stays put: the pass after writes nothing
    backend.reset_log()
    apply_pass(backend, ns, instances, layout=second)
    assert backend.writes() in ([], None)


def test_an_inventory_found_in_both_places_is_taken_from_the_layout_s(backend: Backend) -> None:
    """A switch cut short between writing the new place and deleting the old one."""
    ns = backend.namespace("shared")
    apply_pass(backend, ns, {"a": objects_of("a", ns)}, layout=PER_INSTANCE)
    old = read_inventories(backend.client, backend.cluster)["a"]
    newer = dataclasses.replace(old, version="2.0.0")
    backend.client.request(
        "POST",
        backend.client.resource("v1", "ConfigMap").path(ns),
        subject="shared",
        verb="create",
        body=shared_configmap(backend.cluster, ns, {"a": entry_text(newer)}),
    )
    per_instance = LiveState(backend.client, backend.cluster, layout=PER_INSTANCE)
    per_namespace = LiveState(backend.client, backend.cluster, layout=PER_NAMESPACE)
    a_instance, a_namespace = per_instance.inventory("a"), per_namespace.inventory("a")
    assert a_instance is not None and a_instance.version == "1.0.0"
    assert a_namespace is not None and a_namespace.version == "2.0.0"
    # the next write under perNamespace leaves one copy, in the shared ConfigMap
    apply_pass(backend, ns, {"a": objects_of("a", ns)}, layout=PER_NAMESPACE)
    assert backend.client.get(cm_ref(ns, inventory_name("a"))) is None
    assert read_inventories(backend.client, backend.cluster)["a"].version == "1.0.0"


def test_entries_are_trusted_only_under_their_own_key_and_cluster(backend: Backend) -> None:
    ns = backend.namespace("shared")
    apply_pass(backend, ns, {"a": objects_of("a", ns)})
    real = read_inventories(backend.client, backend.cluster)["a"]
    forged = {
        # a key claiming another instance's entry
        "b": entry_text(real),
        # another cluster's entry under this cluster's ConfigMap
        "c": json.dumps({**real.to_dict(), "instance": "c", "cluster": "elsewhere"}),
        "d": "not json",
        "e": json.dumps({"instance": "e", "cluster": backend.cluster, "objects": "nope"}),
    }
    ref = cm_ref(ns, shared_name(backend.cluster))
    backend.client.request(
        "PATCH",
        backend.client.object_path(ref),
        subject=str(ref),
        verb="patch",
        body={"data": forged},
        content_type="application/merge-patch+json",
    )
    assert sorted(read_inventories(backend.client, backend.cluster)) == ["a"]
    live = LiveState(backend.client, backend.cluster, layout=PER_NAMESPACE)
    assert sorted(live.inventories()) == ["a"]
    # a shared ConfigMap is read only under its cluster's name
    cm = backend.client.get(ref)
    assert cm is not None
    cm["metadata"]["name"] = shared_name("other")
    assert inventories_of(cm) == ()
    # and an instance whose namespace Git names is trusted only there
    elsewhere = backend.namespace("elsewhere")
    apply_pass(backend, elsewhere, {"z": objects_of("z", elsewhere)})
    found = read_inventories(backend.client, backend.cluster, {"z": ns})
    assert "z" not in found


def test_an_inventory_that_does_not_fit_gets_its_own_configmap(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = backend.namespace("shared")
    # what one instance's key takes: two objects, each with a 16-digit fingerprint
    probe = Inventory(
        cluster=backend.cluster,
        instance="a",
        namespace=ns,
        app="demo",
        version="1.0.0",
        objects={ObjectRef.of(o): "0" * 16 for o in objects_of("a", ns)},
    )
    one = entry_size("a", entry_text(probe))
    monkeypatch.setattr(writes_module, "SHARED_BYTES", one + one // 2)
    results = apply_pass(backend, ns, {n: objects_of(n, ns) for n in ("a", "b")})
    assert all(r.ok for r in results.values())
    shared = backend.client.get(cm_ref(ns, shared_name(backend.cluster)))
    assert shared is not None and sorted(shared["data"]) == ["a"]
    assert backend.client.get(cm_ref(ns, inventory_name("b"))) is not None
    assert sorted(read_inventories(backend.client, backend.cluster)) == ["a", "b"]
    # it stays where it fits: the next pass writes nothing
    backend.reset_log()
    apply_pass(backend, ns, {n: objects_of(n, ns) for n in ("a", "b")})
    assert backend.writes() in ([], None)


def test_a_refused_flush_fails_the_instances_it_carried(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = backend.namespace("shared")
    real = backend.client.request

    def refuse(method: str, path: str, **kw: Any) -> Any:
        if kw.get("verb") in ("create inventories", "write inventories"):
            raise KubeError(f"{kw['subject']}: {kw['verb']} failed (Forbidden): no")
        return real(method, path, **kw)

    monkeypatch.setattr(backend.client, "request", refuse)
    results = apply_pass(backend, ns, {n: objects_of(n, ns) for n in ("a", "b")})
    for result in results.values():
        assert result.reason == "ApplyFailed"
        assert "inventory not written" in result.message
        assert shared_name(backend.cluster) in result.message
    # the objects were applied; the next pass adopts them and writes the inventories
    monkeypatch.setattr(backend.client, "request", real)
    again = apply_pass(backend, ns, {n: objects_of(n, ns) for n in ("a", "b")})
    assert all(r.ok for r in again.values()), [r.message for r in again.values()]
    assert sorted(read_inventories(backend.client, backend.cluster)) == ["a", "b"]


def test_two_writers_of_one_namespace_keep_each_other_s_keys(backend: Backend) -> None:
    """The replicas of ``--shards``: each writes its own instances' keys, at once."""
    ns = backend.namespace("shared")
    one = LiveState(backend.client, backend.cluster, layout=PER_NAMESPACE)
    two = LiveState(backend.client, backend.cluster, layout=PER_NAMESPACE)
    for live, name in ((one, "a"), (two, "b")):
        target = InstanceTarget(backend.cluster, name, ns, tuple(objects_of(name, ns)), "demo", "1")
        assert apply_instance(backend.client, target, ApplyOptions(), live).ok
    # both saw no shared ConfigMap: the second one's create is a 409, then a patch
    assert one.flush_inventories() == {}
    assert two.flush_inventories() == {}
    assert sorted(read_inventories(backend.client, backend.cluster)) == ["a", "b"]


def test_the_inventories_a_flush_writes_are_the_ones_the_next_pass_reads(
    backend: Backend,
) -> None:
    """As with an instance's own ConfigMap (tests/kube/test_live.py): the next pass takes
    the written inventories from the daemon's cache, the very objects, parsing nothing."""
    ns = backend.namespace("shared")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cache = InventoryCache()
    live = LiveState(backend.client, backend.cluster, inventory_cache=cache, layout=PER_NAMESPACE)
    written = {
        name: Inventory(
            cluster=backend.cluster,
            instance=name,
            namespace=ns,
            version="1.0.0",
            objects={ObjectRef("v1", "ConfigMap", ns, f"{name}-config"): "f1"},
        )
        for name in ("web", "api")
    }
    for inv in written.values():
        assert write_inventory(backend.client, live, inv, None) is inv
    assert live.flush_inventories() == {}
    again = LiveState(
        backend.client, backend.cluster, inventory_cache=cache, layout=PER_NAMESPACE
    ).inventories()
    assert again["web"] is written["web"] and again["api"] is written["api"]
    # changed behind the pass's back: read again
    ref = cm_ref(ns, shared_name(backend.cluster))
    edited = json.dumps({**written["web"].to_dict(), "version": "2.0.0"})
    edit_like_kubectl(backend.client, ref, {"data": {"web": edited}})
    third = LiveState(
        backend.client, backend.cluster, inventory_cache=cache, layout=PER_NAMESPACE
    ).inventories()
    assert third["web"].version == "2.0.0" and third["api"] == written["api"]
