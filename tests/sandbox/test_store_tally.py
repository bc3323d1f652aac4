"""The store's tallies: what the sandbox keeps as a real API server keeps its allocators.

A real API server allocates Service IPs and node ports from bitmaps it updates on each
Service write, and the scheduler counts pods per node in its cache; the sandbox keeps
the same counts in :class:`~reconciler.sandbox.store.Tally` (before, each write counted
them again from every object, so creating N objects cost O(N^2)).
https://kubernetes.io/docs/reference/networking/virtual-ips/#ip-address-allocation
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import clone, to_json
from reconciler.sandbox.store import Store

SERVICES = ("", "services")


def _svc(name: str, ip: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterIPs": [ip]}}


def _ips(obj: dict[str, Any]) -> list[str]:
    return list(obj["spec"].get("clusterIPs") or [])


def test_a_tally_follows_creates_updates_and_deletes() -> None:
    store = Store()
    store.put(SERVICES, _svc("old", "10.0.0.9"))
    tally = store.tally(SERVICES, _ips)  # counts what was stored before it existed
    assert tally.count("10.0.0.9") == 1
    store.put(SERVICES, _svc("a", "10.0.0.1"))
    store.put(SERVICES, _svc("b", "10.0.0.1", namespace="other"))
    assert tally.count("10.0.0.1") == 2
    store.put(SERVICES, _svc("a", "10.0.0.2"))  # an update moves a's value
    assert (tally.count("10.0.0.1"), tally.count("10.0.0.2")) == (1, 1)
    store.remove(SERVICES, "other", "b")
    store.remove(SERVICES, "ns", "old")
    assert (tally.count("10.0.0.1"), tally.count("10.0.0.9")) == (0, 0)
    assert set(tally.held_by_others(None)) == {"10.0.0.2"}


def test_held_by_others_leaves_out_the_writer_itself() -> None:
    """An update may keep its own IP; another Service's IP is taken."""
    store = Store()
    tally = store.tally(SERVICES, _ips)
    a = store.put(SERVICES, _svc("a", "10.0.0.1"))
    store.put(SERVICES, _svc("b", "10.0.0.2"))
    taken = tally.held_by_others(a)
    assert "10.0.0.1" not in taken and "10.0.0.2" in taken
    assert len(taken) == 1 and ["not", "hashable"] not in taken


def test_service_ip_conflicts_are_found_from_the_tally() -> None:
    """Through the API: a second Service asking for a taken IP is refused (422), the same
    Service written again with its own IP is not, and a deleted Service's IP is free again."""
    api = SandboxApi()
    kind = api.kinds.by_resource(*SERVICES)
    assert kind is not None

    def body(name: str) -> dict[str, Any]:
        spec = {"clusterIP": "10.96.0.50", "ports": [{"port": 80}], "selector": {"a": "b"}}
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}

    opts = WriteOptions("me")
    first = api.create(kind, "default", body("a"), opts)
    assert first["spec"]["clusterIP"] == "10.96.0.50"
    with pytest.raises(ApiError) as refused:
        api.create(kind, "default", body("b"), opts)
    assert refused.value.code == 422 and "already allocated" in refused.value.message
    first["metadata"]["labels"] = {"changed": "yes"}
    again = api.replace(kind, "default", "a", first, opts)
    assert again["spec"]["clusterIP"] == "10.96.0.50"
    assert again["metadata"]["labels"] == {"changed": "yes"}
    api.store.remove(SERVICES, "default", "a")
    assert api.create(kind, "default", body("b"), opts)["spec"]["clusterIP"] == "10.96.0.50"


def test_to_json_is_compact_and_falls_back_for_what_orjson_refuses() -> None:
    """The sandbox answers compact JSON; a value orjson cannot encode (an integer past
    64 bits, which a test may store) still encodes, through the standard encoder."""
    assert to_json({"a": [1, "é", None]}) == '{"a":[1,"é",null]}'.encode()
    huge = {"n": 2**70}
    assert json.loads(to_json(huge)) == huge


def test_clone_is_a_deep_copy() -> None:
    original = {"spec": {"containers": [{"name": "a"}]}}
    copied = clone(original)
    copied["spec"]["containers"][0]["name"] = "b"
    assert original == {"spec": {"containers": [{"name": "a"}]}}


def test_the_owner_index_follows_writes_and_stays_in_the_owners_namespace() -> None:
    """A controller reads its own objects from an index (a real controller's informer
    indexes by owner): creates, an ownerReference moved, deletes; objects in another
    namespace pointing at the same uid are not its own."""
    pods = ("", "pods")

    def pod(name: str, uid: str, namespace: str = "ns") -> dict[str, Any]:
        refs = [{"uid": uid, "controller": True}, {"uid": "other", "controller": False}]
        return {"metadata": {"name": name, "namespace": namespace, "ownerReferences": refs}}

    store = Store()
    store.put(pods, pod("b", "rs1"))
    store.put(pods, pod("a", "rs1"))
    store.put(pods, pod("c", "rs2"))
    store.put(pods, pod("x", "rs1", namespace="elsewhere"))
    store.put(pods, {"metadata": {"name": "free", "namespace": "ns"}})

    def names(uid: str) -> list[str]:
        return [o["metadata"]["name"] for o in store.owned_views(pods, "ns", uid)]

    assert names("rs1") == ["a", "b"] and names("rs2") == ["c"] and names("other") == []
    store.put(pods, pod("a", "rs2"))  # adopted by another controller
    assert names("rs1") == ["b"] and names("rs2") == ["a", "c"]
    store.remove(pods, "ns", "c")
    assert names("rs2") == ["a"]
