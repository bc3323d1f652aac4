"""The pure side of field validation: schemas from the client models and CRDs, body parsing.

https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.fieldschema import (
    FREE,
    INT_OR_STRING,
    ListOf,
    MapOf,
    Scalar,
    Struct,
    builtin_schema,
    crd_schema,
    go_type,
    model_schema,
    schema_for,
)
from reconciler.sandbox.fieldvalidation import FieldValidation, parse_body, warning_header
from reconciler.sandbox.kinds import BUILTIN_KINDS, Kind


@pytest.mark.parametrize("kind", BUILTIN_KINDS, ids=lambda k: f"{k.api_version}/{k.kind}")
def test_every_served_builtin_kind_has_a_schema(kind: Kind) -> None:
    """A kind without a model would accept anything: each one the sandbox serves has one."""
    schema = builtin_schema(kind)
    assert schema is not None
    assert {"apiVersion", "kind", "metadata"} <= set(schema.fields)


def test_model_types_become_nodes() -> None:
    """``List[...]``, ``Dict[str, ...]`` and scalars map to lists, free-key maps and leaves."""
    deployment = model_schema("V1Deployment")
    assert deployment is not None
    spec = deployment.fields["spec"]
    assert isinstance(spec, Struct)
    pod = spec.fields["template"]
    assert isinstance(pod, Struct)
    containers = pod.fields["spec"]
    assert isinstance(containers, Struct)
    assert isinstance(containers.fields["containers"], ListOf)
    assert containers.fields["nodeSelector"] == MapOf(Scalar("string"))
    assert spec.fields["replicas"] == Scalar("int32")
    assert containers.fields["terminationGracePeriodSeconds"] == Scalar("int64")
    assert spec.fields["paused"] == Scalar("bool")
    # quantities decode from numbers too; an IntOrString from a string or an int32
    resources = containers.fields["containers"]
    assert isinstance(resources, ListOf) and isinstance(resources.item, Struct)
    requirements = resources.item.fields["resources"]
    assert isinstance(requirements, Struct) and requirements.fields["limits"] == MapOf(FREE)
    rolling = model_schema("V1RollingUpdateDeployment")
    assert rolling is not None and rolling.fields["maxSurge"] == INT_OR_STRING
    assert go_type(spec) == "v1.DeploymentSpec"
    assert go_type(containers.fields["containers"]) == "[]v1.Container"
    assert go_type(containers.fields["nodeSelector"]) == "map[string]string"
    assert model_schema("V1NoSuchThing") is None


def test_recursive_models_point_back_at_themselves() -> None:
    """JSONSchemaProps nests itself (properties, items via allOf...): one node, no recursion."""
    props = model_schema("V1JSONSchemaProps")
    assert props is not None
    properties = props.fields["properties"]
    assert isinstance(properties, MapOf) and properties.value is props
    assert props.fields["default"] is FREE  # JSON of any shape
    assert "x-kubernetes-preserve-unknown-fields" in props.fields and "$ref" in props.fields


def crd(schema: Any, version: str = "v1", uid: str = "u", rv: str = "1") -> dict[str, Any]:
    entry: dict[str, Any] = {"name": version, "served": True, "storage": True}
    if schema is not None:
        entry["schema"] = {"openAPIV3Schema": schema}
    return {"metadata": {"uid": uid, "resourceVersion": rv}, "spec": {"versions": [entry]}}


def test_crd_schema_shapes() -> None:
    """Arrays, maps, preserved and int-or-string nodes; root metadata stays ObjectMeta."""
    schema = crd_schema(
        crd(
            {
                "type": "object",
                "properties": {
                    "metadata": {"type": "object", "properties": {"extra": {"type": "string"}}},
                    "list": {"type": "array"},
                    "anyMap": {"type": "object", "additionalProperties": True},
                    "port": {"x-kubernetes-int-or-string": True},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }
        ),
        "v1",
    )
    assert schema is not None and not schema.open
    assert schema.fields["metadata"] is model_schema("V1ObjectMeta")
    assert schema.fields["list"] == ListOf(FREE)
    assert schema.fields["anyMap"] == MapOf(FREE)
    assert schema.fields["port"] is FREE and schema.fields["free"] is FREE
    empty = crd_schema(crd({"type": "object", "properties": {"spec": {"type": "object"}}}), "v1")
    assert empty is not None
    spec = empty.fields["spec"]
    assert isinstance(spec, Struct) and spec.fields == {}  # everything in it is pruned


@pytest.mark.parametrize(
    ("obj", "version"),
    [
        (crd(None), "v1"),  # no schema: nothing to check against
        (crd({"type": "object"}), "v2"),  # no such version
        (crd({"type": "array"}), "v1"),  # a root that is not an object
        ({"spec": "nonsense"}, "v1"),
    ],
)
def test_crd_without_a_usable_schema(obj: dict[str, Any], version: str) -> None:
    assert crd_schema(obj, version) is None


def test_schema_for_caches_per_crd_revision() -> None:
    """A CRD's schema is derived once per resourceVersion; an update brings the new one."""
    kind = Kind("example.com", "v1", "Gadget", "gadgets", crd=True)
    first = crd({"type": "object", "properties": {"a": {"type": "string"}}})
    assert schema_for(kind, "", first) is schema_for(kind, "", first)
    changed = crd({"type": "object", "properties": {"b": {"type": "string"}}}, rv="2")
    schema = schema_for(kind, "", changed)
    assert schema is not None and "b" in schema.fields
    assert schema_for(kind, "", None) is None
    assert schema_for(kind, "scale", None) is model_schema("V1Scale")


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [(b"{", "application/json"), (b"a: [", "application/yaml"), (b"\xff", "application/json")],
)
def test_unparsable_bodies_are_bad_requests(raw: bytes, content_type: str) -> None:
    with pytest.raises(ApiError) as e:
        parse_body(raw, content_type)
    assert e.value.code == 400 and e.value.message.startswith("the request body is not valid")


def test_yaml_duplicate_keys_are_reported_like_go_yaml() -> None:
    """Non-string keys print as Go's %#v does; lines are 1-based and in order."""
    parsed = parse_body(b"1: a\nfalse: x\nk:\n  z: 1\n  z: 2\n1: b\nfalse: y\n", "application/yaml")
    assert parsed.value == {1: "b", False: "y", "k": {"z": 2}}
    assert parsed.yaml_duplicates == (
        'line 5: key "z" already set in map',
        "line 6: key 1 already set in map",
        "line 7: key false already set in map",
    )
    assert parse_body(b"", "application/yaml").value is None


def test_warning_header_escapes_quotes_and_backslashes() -> None:
    assert warning_header('unknown field "a\\b"') == '299 - "unknown field \\"a\\\\b\\""'


def test_bodies_of_the_wrong_type_are_bad_requests() -> None:
    """A value its Go type cannot hold stops decoding (400); a body that is not an object is
    the handler's business."""
    kind = next(k for k in BUILTIN_KINDS if k.kind == "Deployment")
    fields = FieldValidation.of(None, "CreateOptions", kind, "", builtin_schema(kind))
    assert fields.directive == "Warn"
    with pytest.raises(ApiError) as error:
        fields.decode({"kind": "Deployment", "spec": "nonsense", "metadata": []})
    assert error.value.code == 400
    assert error.value.message == (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot '
        "unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec"
    )
    assert fields.decode([1, 2]) == [1, 2]
