"""Inventory records: round trips through dicts and ConfigMaps, and bad ConfigMaps."""

from __future__ import annotations

import gc
import json
from dataclasses import replace
from typing import Any

from reconciler.kube.inventory import Inventory, _objects_text, from_configmap, to_configmap
from reconciler.model.changeset import ObjectRef

INV = Inventory(
    cluster="prod",
    instance="web",
    namespace="web",
    app="podinfo",
    version="6.5.0",
    source_commit="abc",
    objects={
        ObjectRef("apps/v1", "Deployment", "web", "podinfo"): "f1",
        ObjectRef("v1", "ConfigMap", "web", "cfg"): "f2",
    },
)


def test_dict_round_trip() -> None:
    assert Inventory.from_dict(INV.to_dict()) == INV
    assert INV.to_dict()["checksum"] == INV.checksum


def test_configmap_round_trip_and_labels() -> None:
    cm = to_configmap(INV)
    assert cm["metadata"]["name"] == "reconciler-inventory-web"
    assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "reconciler"
    assert all(isinstance(v, str) for v in cm["data"].values())
    assert from_configmap(cm) == INV
    assert INV.same_as(from_configmap(cm))


def test_every_field_round_trips_through_the_configmap() -> None:
    """``LiveState.record_inventory`` lets the next pass use the inventory a pass wrote
    instead of parsing its ConfigMap back: the two must be equal, field by field."""
    full = replace(
        INV,
        objects={
            **INV.objects,
            ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader"): "f3",
        },
        writer="https://git.example/catalog.git (main)",
        images={"podinfo": "6.5.0-b2@sha256:" + "a" * 64},
    )
    assert from_configmap(to_configmap(full)) == full


def test_checksum_follows_objects() -> None:
    other = Inventory(
        "prod", "web", "web", objects={**INV.objects, ObjectRef("v1", "Secret", "web", "s"): "x"}
    )
    assert other.checksum != INV.checksum
    assert not other.same_as(INV)
    assert not INV.same_as(None)


def test_foreign_or_broken_configmaps_are_ignored() -> None:
    cm = to_configmap(INV)
    del cm["metadata"]["labels"]["reconciler.dev/inventory"]
    assert from_configmap(cm) is None
    broken = to_configmap(INV)
    broken["data"]["objects"] = "{not json"
    assert from_configmap(broken) is None
    broken["data"]["objects"] = '{"a": 1}'
    assert from_configmap(broken) is None


def test_the_objects_text_is_what_json_dumps_with_indent_writes() -> None:
    """Inventories already in clusters were written with ``json.dumps(indent=1)``: the
    hand-built text must be the same, byte for byte, whatever the names hold."""
    cases: list[list[dict[str, str]]] = [
        [],
        [{}],
        INV._object_list(),
        [{"name": 'quote " backslash \\ tab \t', "kind": "Ünïcode ☃", "z": "", "a": "\n"}],
    ]
    for objects in cases:
        assert _objects_text(objects) == json.dumps(objects, indent=1, sort_keys=True)
    odd: list[Any] = [{"name": 1}]  # not a map of strings: left to json.dumps
    assert _objects_text(odd) == json.dumps(odd, indent=1, sort_keys=True)


def test_writing_an_inventory_leaves_no_garbage_for_the_cycle_collector() -> None:
    """The daemon holds the cyclic collector off during a pass: what each inventory's
    encoding leaves in reference cycles stays allocated until the pass ends."""
    gc.collect()
    gc.disable()
    try:
        for _ in range(200):
            to_configmap(INV)
        found = gc.collect()
    finally:
        gc.enable()
    assert found < 200  # json.dumps(indent=1) leaves about 20 objects per call
