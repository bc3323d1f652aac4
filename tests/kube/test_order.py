"""Kind order for apply and its reverse for prune."""

from __future__ import annotations

from reconciler.kube.order import apply_order, kind_rank, prune_order
from reconciler.model.changeset import ObjectRef


def obj(kind: str, name: str = "x", namespace: str = "ns") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}


def test_crds_and_namespaces_come_first_custom_kinds_last() -> None:
    objects = [
        obj("Widget"),
        obj("Deployment"),
        obj("Namespace"),
        obj("ConfigMap"),
        obj("CustomResourceDefinition"),
        obj("Service"),
    ]
    kinds = [o["kind"] for o in apply_order(objects)]
    assert kinds == [
        "CustomResourceDefinition",
        "Namespace",
        "ConfigMap",
        "Service",
        "Deployment",
        "Widget",
    ]


def test_same_kind_sorted_by_namespace_and_name() -> None:
    objects = [obj("ConfigMap", "b"), obj("ConfigMap", "a", "z"), obj("ConfigMap", "a")]
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in apply_order(objects)] == [
        ("ns", "a"),
        ("ns", "b"),
        ("z", "a"),
    ]


def test_prune_order_is_reverse() -> None:
    refs = [ObjectRef("v1", k, "ns", "x") for k in ("Namespace", "Deployment", "ConfigMap")]
    assert [r.kind for r in prune_order(refs)] == ["Deployment", "ConfigMap", "Namespace"]
    assert kind_rank("Unknown") > kind_rank("ValidatingWebhookConfiguration")
