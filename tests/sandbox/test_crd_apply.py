"""Server-side apply on custom resources: lists merge as the CRD schema says.

https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy:
``x-kubernetes-list-type: map`` lists merge item by item, keyed by
``x-kubernetes-list-map-keys``; ``set`` lists merge by value; every other list of a
custom resource is atomic (replaced, and owned, as a whole), whatever its name.
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema
gives the schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import http

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"

ITEM = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "protocol": {"type": "string", "default": "TCP"},
        "port": {"type": "integer"},
        "image": {"type": "string"},
    },
}
SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "backends": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": ITEM,
                },
                "listeners": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": ITEM,
                },
                "tags": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string"},
                },
                # named like a Pod's keyed list, but a CR list without list-type is atomic
                "containers": {"type": "array", "items": ITEM},
            },
        }
    },
}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}
        ],
    },
}


@pytest.fixture
def gadgets(sandbox: SandboxHandle) -> SandboxHandle:
    status, body = http(sandbox, "POST", CRDS, CRD)
    assert status == 201, body
    return sandbox


def apply(
    sandbox: SandboxHandle, manager: str, spec: dict[str, Any], force: bool = False
) -> tuple[int, Any]:
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": spec,
    }
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return http(sandbox, "PATCH", GADGETS + "/g" + query, body, "application/apply-patch+yaml")


def fields_of(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    fields: dict[str, Any] = entry["fieldsV1"]
    return fields


def test_map_list_items_merge_by_key_and_each_manager_owns_its_own(gadgets: SandboxHandle) -> None:
    assert apply(gadgets, "a", {"backends": [{"name": "x", "port": 1}]})[0] == 201
    status, obj = apply(gadgets, "b", {"backends": [{"name": "y", "port": 2}]})
    assert status == 200, obj
    assert obj["spec"]["backends"] == [
        {"name": "x", "port": 1, "protocol": "TCP"},
        {"name": "y", "port": 2, "protocol": "TCP"},
    ]
    assert fields_of(obj, "b") == {
        "f:spec": {"f:backends": {'k:{"name":"y"}': {".": {}, "f:name": {}, "f:port": {}}}}
    }
    # a manager dropping its item removes only that item
    status, obj = apply(gadgets, "b", {})
    assert [b["name"] for b in obj["spec"]["backends"]] == ["x"]


def test_map_list_field_owned_by_another_manager_conflicts(gadgets: SandboxHandle) -> None:
    apply(gadgets, "a", {"backends": [{"name": "x", "port": 1}]})
    status, answer = apply(gadgets, "b", {"backends": [{"name": "x", "port": 9}]})
    assert status == 409
    assert answer["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "a"',
            "field": '.spec.backends[name="x"].port',
        }
    ]
    # the same value is shared, not a conflict
    status, obj = apply(gadgets, "b", {"backends": [{"name": "x", "port": 1, "image": "i"}]})
    assert status == 200 and obj["spec"]["backends"][0]["image"] == "i"


def test_map_list_with_several_keys(gadgets: SandboxHandle) -> None:
    """Items are identified by every map key: ``k:{"name":..,"protocol":..}``, keys sorted."""
    apply(gadgets, "a", {"listeners": [{"name": "web", "protocol": "TCP", "port": 80}]})
    status, obj = apply(
        gadgets, "b", {"listeners": [{"name": "web", "protocol": "UDP", "port": 53}]}
    )
    assert status == 200, obj
    assert [(i["protocol"], i["port"]) for i in obj["spec"]["listeners"]] == [
        ("TCP", 80),
        ("UDP", 53),
    ]
    item = fields_of(obj, "b")["f:spec"]["f:listeners"]
    assert list(item) == ['k:{"name":"web","protocol":"UDP"}']


def test_set_list_members_merge_by_value(gadgets: SandboxHandle) -> None:
    apply(gadgets, "a", {"tags": ["blue", "green"]})
    status, obj = apply(gadgets, "b", {"tags": ["green", "red"]})
    assert status == 200
    assert obj["spec"]["tags"] == ["blue", "green", "red"]
    assert fields_of(obj, "b") == {"f:spec": {"f:tags": {'v:"green"': {}, 'v:"red"': {}}}}
    status, obj = apply(gadgets, "a", {"tags": ["green"]})
    assert obj["spec"]["tags"] == ["green", "red"]


def test_lists_without_list_type_are_atomic(gadgets: SandboxHandle) -> None:
    """A CR's ``containers`` is not keyed by name (that is Pod's schema, not this CRD's)."""
    apply(gadgets, "a", {"containers": [{"name": "app", "image": "one"}]})
    status, answer = apply(gadgets, "b", {"containers": [{"name": "side", "image": "two"}]})
    assert status == 409
    assert answer["details"]["causes"][0]["field"] == ".spec.containers"
    status, obj = apply(gadgets, "b", {"containers": [{"name": "side", "image": "two"}]}, True)
    assert status == 200
    assert obj["spec"]["containers"] == [{"name": "side", "image": "two", "protocol": "TCP"}]
    assert fields_of(obj, "b") == {"f:spec": {"f:containers": {}}}
    assert "a" not in [e["manager"] for e in obj["metadata"]["managedFields"]]
