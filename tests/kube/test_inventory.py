"""Inventory records: round trips through dicts and ConfigMaps, and bad ConfigMaps."""

from __future__ import annotations

from reconciler.kube.inventory import Inventory, from_configmap, to_configmap
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
    full = Inventory(
        cluster="prod",
        instance="web",
        namespace="web",
        app="podinfo",
        version="6.5.0",
        source_commit="abc",
        objects={
            ObjectRef("apps/v1", "Deployment", "web", "podinfo"): "f1",
            ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader"): "f2",
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
