"""Which fields each served kind declares: the schema a decoder checks bodies against.

A real API server decodes every write into the kind's Go type (built-in kinds) or
prunes it with the CRD's structural schema (custom resources), so a field the
type does not declare is never stored; ``fieldValidation`` only decides whether
that is an error, a warning or silent
(https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).
The sandbox has no Go types, but the official Python client's models are
generated from the same OpenAPI document: ``V1Deployment.openapi_types`` names
each field's type and ``attribute_map`` its JSON name. :func:`builtin_schema`
turns them into a tree of :class:`Struct`/:class:`ListOf`/:class:`MapOf` nodes
(built once per model and cached); :func:`crd_schema` does the same for a
CRD version's ``openAPIV3Schema``. ``fieldvalidation.py`` walks bodies against
the result.

Importing the client's models (and pydantic with them) took a second of a sandbox
process's CPU on its first write, a tenth of a 1,000-instance install. So what this
module reads of them, each model's JSON names and type strings, is kept in
``builtin_models.json`` beside it for the client version it was taken from
(``python -c "from reconciler.sandbox.fieldschema import write_snapshot;
write_snapshot()"`` takes it again); another installed
version, or a model it lacks, is read from the client as before.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.sandbox.kinds import Kind, KindRegistry

# Sandboxes in one process (tests) run on their own threads; a model's node is
# registered before its fields are filled, so building happens under this lock.
_LOCK = threading.RLock()


@dataclass(eq=False)
class Struct:
    """An object with declared fields; ``open`` keeps undeclared ones (preserve-unknown)."""

    name: str
    fields: dict[str, Node] = field(default_factory=dict, repr=False)
    open: bool = False


@dataclass(frozen=True)
class ListOf:
    item: Node


@dataclass(frozen=True)
class MapOf:
    """A map with free keys (labels, ConfigMap data, CRD ``additionalProperties``)."""

    value: Node


@dataclass(frozen=True)
class Free:
    """Anything goes: scalars, IntOrString, RawExtension, preserve-unknown subtrees."""


@dataclass(frozen=True)
class Scalar:
    """A string, integer or boolean the Go type fixes: ``go`` is its Go type name
    (``int32``), as the decoder's ``cannot unmarshal`` errors print it."""

    go: str


Node = Struct | ListOf | MapOf | Free | Scalar
FREE = Free()
_STRING, _INT32, _INT64, _BOOL, _BYTES = (
    Scalar("string"),
    Scalar("int32"),
    Scalar("int64"),
    Scalar("bool"),
    Scalar("[]uint8"),
)
# The client's models say ``int`` for every integer; these fields are int64 in Go.
_INT64_FIELDS = frozenset(
    {
        "activeDeadlineSeconds",
        "deletionGracePeriodSeconds",
        "expirationSeconds",
        "fsGroup",
        "generation",
        "observedGeneration",
        "runAsGroup",
        "runAsUser",
        "startingDeadlineSeconds",
        "terminationGracePeriodSeconds",
    }
)
# IntOrString fields (k8s.io/apimachinery/pkg/util/intstr): the client's models say
# ``object`` for them, as for a RawExtension, but Go decodes a string into their StrVal
# and anything else into their IntVal, an int32 (``IntOrString.UnmarshalJSON``).
INT_OR_STRING = Scalar("intstr.IntOrString")
_INT_OR_STRING_FIELDS = frozenset(
    {
        ("V1HTTPGetAction", "port"),
        ("V1NetworkPolicyPort", "port"),
        ("V1PodDisruptionBudgetSpec", "maxUnavailable"),
        ("V1PodDisruptionBudgetSpec", "minAvailable"),
        ("V1RollingUpdateDaemonSet", "maxSurge"),
        ("V1RollingUpdateDaemonSet", "maxUnavailable"),
        ("V1RollingUpdateDeployment", "maxSurge"),
        ("V1RollingUpdateDeployment", "maxUnavailable"),
        ("V1RollingUpdateStatefulSetStrategy", "maxUnavailable"),
        ("V1ServicePort", "targetPort"),
        ("V1TCPSocketAction", "port"),
    }
)
# Quantities are strings in the models but decode from numbers too (``cpu: 1``).
_QUANTITY_FIELDS = frozenset(
    {
        "allocatable",
        "capacity",
        "default",
        "defaultRequest",
        "hard",
        "limits",
        "max",
        "maxLimitRequestRatio",
        "maximumVolumeSize",
        "min",
        "podFixed",
        "requests",
        "sizeLimit",
        "used",
    }
)

# Model names the generator disambiguated (core/v1 Event vs events.k8s.io/v1 Event).
_MODEL_NAMES = {("", "v1", "Event"): "CoreV1Event"}
_SCALARS = frozenset({"str", "int", "float", "bool", "bytes", "datetime", "date", "object"})


def model_name(group: str, version: str, kind: str) -> str:
    """The Python client's model class name of a built-in kind (``V1Deployment``)."""
    return _MODEL_NAMES.get((group, version, kind), version[:1].upper() + version[1:] + kind)


def builtin_schema(kind: Kind) -> Struct | None:
    """The declared fields of a built-in kind, or None when the client has no model."""
    return model_schema(model_name(kind.group, kind.version, kind.kind))


@functools.cache
def _models() -> Any:
    """The client's generated models, imported on first use (a quarter of a second)."""
    import kubernetes.client.models

    return kubernetes.client.models


SNAPSHOT = Path(__file__).with_name("builtin_models.json")
Fields = dict[str, str]  # a model's fields: JSON name -> ``openapi_types`` type string


def _client_version() -> str:
    return importlib.metadata.version("kubernetes")


@functools.cache
def _snapshot() -> dict[str, Fields]:
    """``builtin_models.json``'s models when it was taken from the installed client."""
    try:
        data = json.loads(SNAPSHOT.read_text())
        if data["kubernetes"] != _client_version():
            return {}
        models: dict[str, Fields] = data["models"]
    except (OSError, ValueError, KeyError, TypeError, importlib.metadata.PackageNotFoundError):
        return {}
    return models


def client_fields(name: str) -> Fields | None:
    """A model's fields as the client's class declares them; None when it has no such model."""
    model = getattr(_models(), name, None)
    if model is None or not hasattr(model, "openapi_types"):
        return None
    return {json_name: model.openapi_types[attr] for attr, json_name in model.attribute_map.items()}


def _fields(name: str) -> Fields | None:
    """``client_fields``, from the snapshot when it holds the model."""
    known = _snapshot().get(name)
    return known if known is not None else client_fields(name)


def referenced(fields: Fields) -> set[str]:
    """The names in ``fields``' type strings that may be models (not containers, not scalars)."""
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(fields.values())))
    return names - _SCALARS - {"list", "List", "dict", "Dict"}


def snapshot_models(roots: Iterable[str]) -> dict[str, Fields]:
    """The client's models reachable from ``roots``, as ``builtin_models.json`` holds them."""
    found: dict[str, Fields] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        fields = client_fields(name)
        if fields is not None:
            found[name] = fields
            todo.extend(referenced(fields))
    return dict(sorted(found.items()))


# model_schema's answers by name: every write asks, and looking the class up on the
# client's models package each time was 2% of the sandbox's CPU during an install
_MODEL_SCHEMAS: dict[str, Struct | None] = {}


def model_schema(name: str) -> Struct | None:
    """The schema of one client model class by name (``V1Scale``), or None if unknown."""
    if name in _MODEL_SCHEMAS:
        return _MODEL_SCHEMAS[name]
    node: Struct | None = None
    if _fields(name) is not None:
        with _LOCK:
            found = _type_node(name)
        assert isinstance(found, Struct)
        node = found
    _MODEL_SCHEMAS[name] = node
    return node


def go_type(node: Node) -> str:
    """The Go type a node decodes into, as ``encoding/json`` names it (``[]v1.Container``)."""
    if isinstance(node, Scalar):
        return node.go
    if isinstance(node, ListOf):
        return "[]" + go_type(node.item)
    if isinstance(node, MapOf):
        return "map[string]" + go_type(node.value)
    if isinstance(node, Struct):
        version, name = go_name(node.name)
        return f"{version}.{name}"
    return "interface {}"


def go_name(model: str) -> tuple[str, str]:
    """(package, type) of a client model: ``V1DeploymentSpec`` -> (``v1``, ``DeploymentSpec``)."""
    match = re.match(r"^(?:Core)?(V\d+(?:alpha\d+|beta\d+)?)(.+)$", model)
    if match is None:
        return "v1", model
    return match.group(1).lower(), match.group(2)


def _scalar(type_name: str, json_name: str) -> Node:
    if json_name in _QUANTITY_FIELDS:
        return FREE
    if type_name == "int":
        return _INT64 if json_name in _INT64_FIELDS else _INT32
    return {"str": _STRING, "bool": _BOOL, "bytes": _BYTES}.get(type_name, FREE)


def _type_node(type_name: str, json_name: str = "") -> Node:
    """One ``openapi_types`` type string (``List[V1Container]``, ``Dict[str, str]``) as a node;
    ``json_name``: the field it types, for what the type string does not say."""
    type_name = type_name.strip()
    for prefix in ("list[", "List["):
        if type_name.startswith(prefix) and type_name.endswith("]"):
            return ListOf(_type_node(type_name[len(prefix) : -1], json_name))
    for prefix, suffix in (("dict(", ")"), ("Dict[", "]")):
        if type_name.startswith(prefix) and type_name.endswith(suffix):
            _key, _, value = type_name[len(prefix) : -len(suffix)].partition(",")
            return MapOf(_type_node(value, json_name))
    if type_name in _SCALARS:
        return _scalar(type_name, json_name)
    if _fields(type_name) is None:
        return FREE
    return _model_struct(type_name)


_STRUCTS: dict[str, Struct] = {}


def _model_struct(name: str) -> Struct:
    """A model's node, built once; registered before its fields are filled, so a
    recursive model (JSONSchemaProps.properties) points back at itself."""
    struct = _STRUCTS.get(name)
    if struct is None:
        struct = _STRUCTS[name] = Struct(name)
        for json_name, type_name in (_fields(name) or {}).items():
            struct.fields[json_name] = (
                INT_OR_STRING
                if (name, json_name) in _INT_OR_STRING_FIELDS
                else _type_node(type_name, json_name)
            )
    return struct


# --- custom resources -----------------------------------------------------------------


def crd_schema(crd: Mapping[str, Any], version: str) -> Struct | None:
    """The structural schema of one version of a stored CRD, or None when it has none.

    Follows https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning:
    ``properties`` declare fields, ``additionalProperties`` makes a map,
    ``x-kubernetes-preserve-unknown-fields`` keeps undeclared fields, an
    ``x-kubernetes-embedded-resource`` gets apiVersion/kind/metadata, and
    ``metadata`` at the root is always ObjectMeta.
    """
    spec = crd.get("spec") if isinstance(crd.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    for entry in spec.get("versions") or ():
        if isinstance(entry, Mapping) and entry.get("name") == version:
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            if not isinstance(schema, Mapping):
                return None
            root = _json_schema_node(schema, embedded=True)
            return root if isinstance(root, Struct) else None
    return None


def _object_meta() -> Node:
    meta = model_schema("V1ObjectMeta")
    assert meta is not None
    return meta


def _json_schema_node(schema: Mapping[str, Any], *, embedded: bool = False) -> Node:
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = embedded or schema.get("x-kubernetes-embedded-resource") is True
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return ListOf(_json_schema_node(items) if isinstance(items, Mapping) else FREE)
    if isinstance(additional, Mapping) and not properties:
        return MapOf(_json_schema_node(additional))
    if additional is True and not properties:
        return MapOf(FREE)
    if kind != "object" and not properties and not embedded:
        return FREE  # scalars, int-or-string, untyped preserve-unknown nodes
    if preserve and not properties and not embedded:
        return FREE
    struct = Struct("openAPIV3Schema", open=preserve)
    if embedded:
        struct.fields.update(apiVersion=FREE, kind=FREE, metadata=_object_meta())
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            if name == "metadata" and embedded:
                continue  # ObjectMeta is fixed; a schema cannot widen it
            struct.fields[str(name)] = _json_schema_node(sub) if isinstance(sub, Mapping) else FREE
    return struct


# --- per request ----------------------------------------------------------------------

_CRD_CACHE: dict[tuple[str, str, str], Struct | None] = {}
_CRD_CACHE_LIMIT = 256


def schema_for(kind: Kind, subresource: str, crd: Mapping[str, Any] | None) -> Struct | None:
    """The schema a write to ``kind`` (or its ``/scale``) is decoded with; None skips checks.

    ``crd`` is the stored CustomResourceDefinition of a custom kind. Its schema is
    cached per (uid, resourceVersion, version): a CRD update brings a new schema.
    """
    if subresource == "scale":
        return model_schema("V1Scale")
    if not kind.crd:
        return builtin_schema(kind)
    if crd is None:
        return None
    meta = crd.get("metadata") or {}
    key = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")), kind.version)
    with _LOCK:
        if key not in _CRD_CACHE:
            if len(_CRD_CACHE) >= _CRD_CACHE_LIMIT:
                _CRD_CACHE.clear()
            _CRD_CACHE[key] = crd_schema(crd, kind.version)
        return _CRD_CACHE[key]


def snapshot_roots() -> list[str]:
    """The models a write is decoded with: every built-in kind's, and ``/scale``'s."""
    kinds = KindRegistry().all()
    return [*(model_name(k.group, k.version, k.kind) for k in kinds if not k.crd), "V1Scale"]


def write_snapshot() -> None:
    """Take ``builtin_models.json`` again from the installed client."""
    data = {"kubernetes": _client_version(), "models": snapshot_models(snapshot_roots())}
    SNAPSHOT.write_text(json.dumps(data, indent=1) + "\n")  # fields in the client's order
