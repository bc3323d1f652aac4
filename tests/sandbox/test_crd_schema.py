"""Custom resources against their CRD's structural schema: validation, defaulting, pruning.

https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
(#validation, #defaulting, #defaulting-and-nullable, #field-pruning,
#specifying-a-structural-schema). Messages are kube-openapi's, as a real
kube-apiserver words them (field, ``Invalid value: ...``, detail).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"

SPEC: dict[str, Any] = {
    "type": "object",
    "required": ["owner"],
    "properties": {
        "owner": {"type": "string", "maxLength": 5},
        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2},
        "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0.5},
        "count": {"type": "integer", "format": "int32"},
        "tags": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": 3,
            "x-kubernetes-list-type": "set",
        },
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "port": {"type": "integer", "default": 80},
                },
            },
        },
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "port": {"x-kubernetes-int-or-string": True},
        "nested": {
            "type": "object",
            "properties": {"level": {"type": "string", "default": "info"}},
        },
        "note": {"type": "string", "nullable": True},
        "enabled": {"type": "boolean", "default": True},
        "comment": {"type": "string"},
    },
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": SPEC,
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def crd(schema: dict[str, Any] | None = None, **version: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "v1", "served": True, "storage": True, **version}
    if schema is not None:
        entry["schema"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [entry],
        },
    }


def widget(object_name: str = "w1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": object_name},
        "spec": {"owner": "ann", **spec},
    }


@pytest.fixture
def widgets(sandbox: SandboxHandle) -> SandboxHandle:
    """The CRD, once Established: the controller's status write comes after a delay (as a
    real server's does), and a test that PUTs the CRD must not race it into a 409."""
    status, body = http(sandbox, "POST", CRDS, crd(SCHEMA, subresources={"status": {}}))
    assert status == 201, body
    eventually(lambda: _established(sandbox))
    return sandbox


def _established(sandbox: SandboxHandle) -> bool:
    _, got = http(sandbox, "GET", CRDS + "/widgets.example.com")
    conditions = got.get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


# --- validation ----------------------------------------------------------------------------


def test_wrong_type_is_422_worded_as_the_real_server(widgets: SandboxHandle) -> None:
    """#validation: a type mismatch names the field, the JSON type found and the one wanted."""
    status, body = http(widgets, "POST", WIDGETS, widget(replicas="string"))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'Widget.example.com "w1" is invalid: spec.replicas: Invalid value: "string": '
        'spec.replicas in body must be of type integer: "string"'
    )
    assert body["details"] == {
        "name": "w1",
        "group": "example.com",
        "kind": "Widget",
        "causes": [
            {
                "reason": "FieldValueTypeInvalid",
                "message": 'Invalid value: "string": spec.replicas in body must be of type '
                'integer: "string"',
                "field": "spec.replicas",
            }
        ],
    }
    assert http(widgets, "GET", WIDGETS + "/w1")[0] == 404


@pytest.mark.parametrize(
    ("spec", "field", "reason", "message"),
    [
        ({"owner": None}, "spec.owner", "FieldValueRequired", "Required value"),
        (
            {"color": "pink"},
            "spec.color",
            "FieldValueNotSupported",
            'Unsupported value: "pink": supported values: "red", "blue"',
        ),
        (
            {"replicas": -1},
            "spec.replicas",
            "FieldValueInvalid",
            "Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        ),
        (
            {"replicas": 11},
            "spec.replicas",
            "FieldValueInvalid",
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        ),
        (
            {"ratio": 0.5},
            "spec.ratio",
            "FieldValueInvalid",
            "Invalid value: 0.5: spec.ratio in body should be greater than 0.5",
        ),
        (
            {"name": "Abc"},
            "spec.name",
            "FieldValueInvalid",
            "Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'",
        ),
        (
            {"name": "a"},
            "spec.name",
            "FieldValueInvalid",
            'Invalid value: "a": spec.name in body should be at least 2 chars long',
        ),
        (
            {"owner": "someone"},
            "spec.owner",
            "FieldValueTooLong",
            "Too long: may not be longer than 5",
        ),
        (
            {"tags": ["a", "b", "c", "d"]},
            "spec.tags",
            "FieldValueTooMany",
            "Too many: 4: must have at most 3 items",
        ),
        (
            {"tags": []},
            "spec.tags",
            "FieldValueInvalid",
            "Invalid value: 0: spec.tags in body should have at least 1 items",
        ),
        (
            {"tags": ["a", "a"]},
            "spec.tags[1]",
            "FieldValueDuplicate",
            'Duplicate value: "a"',
        ),
        (
            {"ports": [{"name": "a"}, {"name": "a", "port": 1}]},
            "spec.ports[1]",
            "FieldValueDuplicate",
            'Duplicate value: map[string]interface {}{"name":"a"}',
        ),
        (
            {"labels": {"tier": 1}},
            "spec.labels.tier",
            "FieldValueTypeInvalid",
            'Invalid value: "integer": spec.labels.tier in body must be of type string: "integer"',
        ),
        (
            {"ports": [{"name": 7}]},
            "spec.ports[0].name",
            "FieldValueTypeInvalid",
            'Invalid value: "integer": spec.ports[0].name in body must be of type string: '
            '"integer"',
        ),
        (
            {"port": True},
            "spec.port",
            "FieldValueTypeInvalid",
            'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
        ),
        (
            {"count": 2**31},
            "<nil>",
            "FieldValueInvalid",
            'Invalid value: "": Checked value must be of type integer with format int32 in '
            "spec.count",
        ),
        (
            {"count": 1.5},
            "spec.count",
            "FieldValueTypeInvalid",
            'Invalid value: "float64": spec.count in body must be of type int32: "float64"',
        ),
        (
            {"note": 3},
            "spec.note",
            "FieldValueTypeInvalid",
            'Invalid value: "integer": spec.note in body must be of type string: "integer"',
        ),
    ],
)
def test_each_schema_rule_is_a_422_cause(
    widgets: SandboxHandle, spec: dict[str, Any], field: str, reason: str, message: str
) -> None:
    """#validation: required, enum, minimum/maximum, pattern, lengths, items, list types, formats.

    A ``null`` in a non-nullable field without default is dropped first (#defaulting-and-
    nullable), so a required one is then missing.
    """
    body = widget(**spec)
    status, answer = http(widgets, "POST", WIDGETS, body)
    assert status == 422, answer
    assert {"reason": reason, "message": message, "field": field} in answer["details"]["causes"]
    assert answer["message"].startswith('Widget.example.com "w1" is invalid: ')


def test_every_violation_is_listed_in_one_422(widgets: SandboxHandle) -> None:
    """All schema errors come back at once, as ``[a, b, ...]`` in the message."""
    body = widget(replicas=20, color="pink")
    del body["spec"]["owner"]
    status, answer = http(widgets, "POST", WIDGETS, body)
    assert status == 422
    fields = sorted(c["field"] for c in answer["details"]["causes"])
    assert fields == ["spec.color", "spec.owner", "spec.replicas"]
    assert answer["message"].startswith('Widget.example.com "w1" is invalid: [')


def test_valid_values_pass(widgets: SandboxHandle) -> None:
    """Boundary values, integral floats for integers and int-or-string both ways are valid."""
    body = widget(
        replicas=10.0,
        ratio=0.75,
        count=2**31 - 1,
        name="ab",
        port="http",
        tags=["a", "b", "c"],
        note=None,
    )
    status, answer = http(widgets, "POST", WIDGETS, body)
    assert status == 201, answer
    assert answer["spec"]["note"] is None  # nullable: kept
    status, answer = http(widgets, "POST", WIDGETS, widget("w2", port=8080))
    assert status == 201, answer


def test_updates_and_patches_are_validated(widgets: SandboxHandle) -> None:
    """A PUT or merge patch breaking the schema is refused and changes nothing."""
    status, created = http(widgets, "POST", WIDGETS, widget())
    assert status == 201
    bad = copy.deepcopy(created)
    bad["spec"]["replicas"] = "many"
    status, answer = http(widgets, "PUT", WIDGETS + "/w1", bad)
    assert status == 422 and answer["details"]["causes"][0]["field"] == "spec.replicas"
    status, answer = http(
        widgets,
        "PATCH",
        WIDGETS + "/w1",
        {"spec": {"color": "green"}},
        "application/merge-patch+json",
    )
    assert status == 422 and answer["details"]["causes"][0]["field"] == "spec.color"
    status, answer = http(widgets, "GET", WIDGETS + "/w1")
    assert answer["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_status_writes_are_validated(widgets: SandboxHandle) -> None:
    """/status writes are checked against the same schema."""
    http(widgets, "POST", WIDGETS, widget())
    status, answer = http(
        widgets,
        "PATCH",
        WIDGETS + "/w1/status",
        {"status": {"phase": 3}},
        "application/merge-patch+json",
    )
    assert status == 422 and answer["details"]["causes"][0]["field"] == "status.phase"


# --- defaulting -----------------------------------------------------------------------------


def test_defaults_are_applied_on_create(widgets: SandboxHandle) -> None:
    """#defaulting: missing fields get defaults where the parent exists; nulls as documented."""
    body = widget(nested={}, ports=[{"name": "web"}], enabled=None, comment=None, note=None)
    status, created = http(widgets, "POST", WIDGETS, body)
    assert status == 201, created
    spec = created["spec"]
    assert spec["replicas"] == 1 and spec["color"] == "red"
    assert spec["nested"] == {"level": "info"}
    assert spec["ports"] == [{"name": "web", "port": 80}]
    assert spec["enabled"] is True  # null in a non-nullable field with a default: defaulted
    assert "comment" not in spec  # null, non-nullable, no default: dropped
    assert spec["note"] is None  # nullable: kept
    assert "status" not in created  # the status subresource starts empty


def test_defaults_only_below_existing_parents(widgets: SandboxHandle) -> None:
    """A default of spec.nested.level does not create spec.nested."""
    status, created = http(widgets, "POST", WIDGETS, widget())
    assert status == 201 and "nested" not in created["spec"]


def test_defaults_are_applied_on_update(widgets: SandboxHandle) -> None:
    """A PUT that leaves a defaulted field out gets the default again."""
    status, created = http(widgets, "POST", WIDGETS, widget(replicas=3))
    body = copy.deepcopy(created)
    del body["spec"]["replicas"]
    status, updated = http(widgets, "PUT", WIDGETS + "/w1", body)
    assert status == 200 and updated["spec"]["replicas"] == 1


def test_defaults_and_pruning_are_applied_on_read(widgets: SandboxHandle) -> None:
    """#defaulting: "when reading from etcd": objects stored before a schema change get it."""
    http(widgets, "POST", WIDGETS, widget())
    _, stored = http(widgets, "GET", CRDS + "/widgets.example.com")
    changed = copy.deepcopy(SCHEMA)
    changed["properties"]["spec"]["properties"]["size"] = {"type": "string", "default": "M"}
    del changed["properties"]["spec"]["properties"]["color"]
    stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = changed
    status, answer = http(widgets, "PUT", CRDS + "/widgets.example.com", stored)
    assert status == 200, answer
    _, got = http(widgets, "GET", WIDGETS + "/w1")
    assert got["spec"]["size"] == "M" and "color" not in got["spec"]
    _, listed = http(widgets, "GET", WIDGETS)
    assert listed["items"][0]["spec"]["size"] == "M"


# --- pruning --------------------------------------------------------------------------------


def test_unknown_fields_are_pruned(widgets: SandboxHandle) -> None:
    """#field-pruning: unknown fields are dropped, except below preserve-unknown-fields."""
    body = widget(bogus=1, free={"anything": {"goes": [1, 2]}}, nested={"extra": True})
    body["extra"] = "top-level"
    body["metadata"]["labels"] = {"app": "w"}
    status, created = http(widgets, "POST", WIDGETS, body)
    assert status == 201, created
    assert "bogus" not in created["spec"] and "extra" not in created
    assert created["spec"]["free"] == {"anything": {"goes": [1, 2]}}
    assert created["spec"]["nested"] == {"level": "info"}
    assert created["metadata"]["labels"] == {"app": "w"}


def test_preserve_unknown_fields_at_the_root_keeps_everything(sandbox: SandboxHandle) -> None:
    """``x-kubernetes-preserve-unknown-fields: true`` at the root switches pruning off."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert http(sandbox, "POST", CRDS, crd(schema))[0] == 201
    body = {**widget(anything={"x": 1}), "other": [1]}
    status, created = http(sandbox, "POST", WIDGETS, body)
    assert status == 201 and created["other"] == [1] and created["spec"]["anything"] == {"x": 1}


# --- structural schemas ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "field", "message"),
    [
        (
            None,
            "spec.versions[0].schema.openAPIV3Schema",
            "Required value: schemas are required",
        ),
        (
            {"properties": {"spec": {"type": "object"}}},
            "spec.versions[0].schema.openAPIV3Schema.type",
            "Required value: must not be empty at the root",
        ),
        (
            {"type": "array", "items": {"type": "string"}},
            "spec.versions[0].schema.openAPIV3Schema.type",
            'Invalid value: "array": must be object at the root',
        ),
        (
            {"type": "object", "properties": {"spec": {"properties": {}}}},
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type",
            "Required value: must not be empty for specified object fields",
        ),
        (
            {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}},
            "spec.versions[0].schema.openAPIV3Schema.properties[tags].items.type",
            "Required value: must not be empty for specified array items",
        ),
        (
            {"type": "object", "properties": {"tags": {"type": "array"}}},
            "spec.versions[0].schema.openAPIV3Schema.properties[tags].items",
            "Required value: must be specified",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "items": {"type": "object"},
                    }
                },
            },
            "spec.versions[0].schema.openAPIV3Schema.properties[ports].x-kubernetes-list-map-keys",
            "Required value: must not be empty if x-kubernetes-list-type is map",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                    }
                },
            },
            "spec.versions[0].schema.openAPIV3Schema.properties[ports].items.properties[name]"
            ".default",
            "Required value: this property is in x-kubernetes-list-map-keys, so it must have "
            "a default or be a required property",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "tags": {
                        "type": "array",
                        "x-kubernetes-list-type": "bag",
                        "items": {"type": "string"},
                    }
                },
            },
            "spec.versions[0].schema.openAPIV3Schema.properties[tags].x-kubernetes-list-type",
            'Unsupported value: "bag": supported values: "atomic", "set", "map"',
        ),
    ],
)
def test_non_structural_schema_is_refused(
    sandbox: SandboxHandle, schema: dict[str, Any] | None, field: str, message: str
) -> None:
    """#specifying-a-structural-schema: every node has a type; list types are consistent."""
    status, answer = http(sandbox, "POST", CRDS, crd(schema))
    assert status == 422, answer
    assert {"field": field, "message": message} in [
        {"field": c["field"], "message": c["message"]} for c in answer["details"]["causes"]
    ]
    assert answer["message"].startswith(
        'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: '
    )
    assert http(sandbox, "GET", "/apis/example.com/v1")[0] == 404


def test_untyped_nodes_allowed_where_documented(sandbox: SandboxHandle) -> None:
    """int-or-string and preserve-unknown-fields nodes need no type."""
    schema = {
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": True},
            "blob": {"x-kubernetes-preserve-unknown-fields": True},
        },
    }
    status, answer = http(sandbox, "POST", CRDS, crd(schema))
    assert status == 201, answer


def test_crd_update_with_a_non_structural_schema_is_refused(widgets: SandboxHandle) -> None:
    _, stored = http(widgets, "GET", CRDS + "/widgets.example.com")
    stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].pop("type")
    status, answer = http(widgets, "PUT", CRDS + "/widgets.example.com", stored)
    assert status == 422
    assert answer["details"]["causes"][0]["field"].endswith("properties[spec].type")


# --- patch types ----------------------------------------------------------------------------


def test_strategic_merge_patch_on_a_custom_resource_is_415(
    widgets: SandboxHandle, api_client: client.ApiClient
) -> None:
    """CRs have no patch strategies: strategic merge patch is an Unsupported Media Type."""
    http(widgets, "POST", WIDGETS, widget())
    for path in (WIDGETS + "/w1", WIDGETS + "/w1/status", WIDGETS + "/missing"):
        status, answer = http(
            widgets,
            "PATCH",
            path,
            {"spec": {"replicas": 2}},
            "application/strategic-merge-patch+json",
        )
        assert status == 415
        assert answer == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the body of the request was in an unknown format - accepted media "
            "types include: application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml",
            "reason": "UnsupportedMediaType",
            "code": 415,
        }
    status, _ = http(
        widgets,
        "PATCH",
        WIDGETS + "/w1",
        [{"op": "replace", "path": "/spec/replicas", "value": 2}],
        "application/json-patch+json",
    )
    assert status == 200
    # the official client sends merge patches for custom objects: those work
    custom = client.CustomObjectsApi(api_client)
    patched = custom.patch_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "w1", {"spec": {"replicas": 3}}
    )
    assert patched["spec"]["replicas"] == 3


# --- server-side apply: the applied configuration must fit the schema ----------------------


def apply(sandbox: SandboxHandle, body: dict[str, Any], manager: str = "a") -> tuple[int, Any]:
    return http(
        sandbox,
        "PATCH",
        f"{WIDGETS}/{body['metadata']['name']}?fieldManager={manager}",
        body,
        "application/apply-patch+yaml",
    )


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"bogus": 1}, ".spec.bogus: field not declared in schema"),
        ({"replicas": "two"}, ".spec.replicas: expected numeric (int or float), got string"),
        (
            {"owner": 5},
            ".spec.owner: expected string, got &value.valueUnstructured{Value:5}",
        ),
        (
            {"ports": [{"port": 1}]},
            ".spec.ports: element 0: associative list with keys has an element that omits "
            'key field "name" (and doesn\'t have default value)',
        ),
    ],
)
def test_apply_of_a_config_the_schema_does_not_type_is_a_500(
    widgets: SandboxHandle, spec: dict[str, Any], error: str
) -> None:
    """A real server fails to build the typed patch object and answers 500, reason unset.

    (kubernetes/kubernetes#122480, #139253: apply never prunes unknown fields; create does.)
    """
    status, answer = apply(widgets, widget(**spec))
    assert status == 500
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "failed to create typed patch object (/w1; example.com/v1, Kind=Widget): "
        + error,
        "code": 500,
    }


def test_apply_result_is_defaulted_and_validated(widgets: SandboxHandle) -> None:
    """The merged object is defaulted and validated like any write (422 on a broken rule)."""
    status, created = apply(widgets, widget())
    assert status == 201 and created["spec"]["replicas"] == 1
    status, answer = apply(widgets, widget(replicas=50))
    assert status == 422 and answer["details"]["causes"][0]["field"] == "spec.replicas"
