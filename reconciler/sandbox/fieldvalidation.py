"""``fieldValidation``: what a write does with fields its kind does not declare.

As https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
describes, a create, update or patch is decoded into the kind's type, so an
unknown field is never stored, and a field given twice keeps its last value.
The ``fieldValidation`` query parameter decides what the client hears about it:
``Strict`` fails the request (400, every problem listed in one ``strict decoding
error``), ``Warn`` (the default) answers with one ``Warning: 299`` header per
problem, ``Ignore`` says nothing. Any other value is refused (422) before the
body is read. Messages follow the real server's integration tests
(kubernetes/kubernetes ``test/integration/apiserver/field_validation_test.go``):
typed JSON bodies list problems in document order; YAML bodies, patches and
custom resources list duplicates first, then unknown fields sorted.

Server-side apply is different: its typed conversion refuses an undeclared field
whatever the directive, with HTTP 500 and no reason (kubernetes/kubernetes
issues #122480 and #139253 track that code), while ``fieldValidation`` only
governs duplicate keys in the applied YAML.

``server.py`` builds one :class:`FieldValidation` per write and adds its
warnings to the response; ``fieldschema.py`` says what each kind declares.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.fieldschema import (
    FREE,
    INT_OR_STRING,
    Free,
    ListOf,
    MapOf,
    Node,
    Scalar,
    Struct,
    go_name,
    go_type,
)
from reconciler.sandbox.fieldsets import list_key
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.patch import JSON_PATCH

SUPPORTED = ("", "Ignore", "Strict", "Warn")
DEFAULT = "Warn"  # the default since Kubernetes 1.27 (ServerSideFieldValidation GA)
_JSON_PATCH_FIELDS = frozenset({"op", "path", "value", "from"})


@dataclass(frozen=True)
class Parsed:
    """A request body and what decoding it saw besides the value.

    ``key_orders`` maps ``id()`` of each JSON object that repeats a key to its keys
    in document order (repeats kept); ``yaml_duplicates`` holds go-yaml's
    ``line N: key "k" already set in map`` for a YAML body.
    """

    value: Any = None
    key_orders: Mapping[int, list[str]] = field(default_factory=dict)
    yaml_duplicates: tuple[str, ...] = ()
    is_yaml: bool = False


class _DuplicateKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A SafeLoader that notes repeated mapping keys instead of silently keeping the last."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[int, str]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                line = key_node.start_mark.line + 1
                text = f"line {line}: key {_go_repr(key)} already set in map"
                self.duplicates.append((line, text))
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


def _go_repr(key: Any) -> str:
    """A key as Go's ``%#v`` prints it (strings quoted)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, str):
        return json.dumps(key, ensure_ascii=False)
    return str(key)


class _Repeated(Exception):
    """A JSON object repeats a key: the caller falls back to the YAML parser."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Repeated
    return obj


def _plain_json(raw: bytes) -> Any:
    """``raw`` as JSON when it is JSON with no repeated key, else None."""
    try:
        return json.loads(raw, object_pairs_hook=_unique)
    except (ValueError, _Repeated):
        return None


def parse_body(raw: bytes, content_type: str) -> Parsed:
    """Decode a JSON or YAML body, remembering repeated keys; 400 when it is not valid."""
    is_yaml = content_type.endswith("yaml")
    if not raw:
        return Parsed(is_yaml=is_yaml)
    try:
        if is_yaml and raw.lstrip()[:1] == b"{":
            # JSON is YAML, and clients (the official ones, kubectl) send apply
            # bodies as JSON: the C JSON parser reads them in a fraction of a YAML
            # parse. Repeated keys or anything JSON refuses take the YAML road below,
            # which reports them as go-yaml does.
            value = _plain_json(raw)
            if value is not None:
                return Parsed(value, {}, (), True)
        if is_yaml:
            loader = _DuplicateKeyLoader(raw)
            try:
                value = loader.get_single_data()
            finally:
                loader.dispose()
            lines = tuple(text for _, text in sorted(loader.duplicates, key=lambda d: d[0]))
            return Parsed(value, {}, lines, True)
        orders: dict[int, list[str]] = {}

        def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            obj = dict(pairs)
            if len(obj) != len(pairs):
                orders[id(obj)] = [key for key, _ in pairs]
            return obj

        return Parsed(json.loads(raw, object_pairs_hook=hook), orders)
    except (ValueError, yaml.YAMLError) as e:
        raise ApiError(400, f"the request body is not valid: {e}") from e


def invalid_directive(options: str, value: str) -> ApiError:
    """The 422 for an unsupported ``fieldValidation`` (``CreateOptions``/``UpdateOptions``/...)."""
    supported = ", ".join(json.dumps(v) for v in SUPPORTED)
    why = f"Unsupported value: {json.dumps(value)}: supported values: {supported}"
    return ApiError(
        422,
        f'{options}.meta.k8s.io "" is invalid: fieldValidation: {why}',
        group="meta.k8s.io",
        kind=options,
        causes=[{"reason": "FieldValueNotSupported", "message": why, "field": "fieldValidation"}],
    )


def warning_header(text: str) -> str:
    """A ``Warning`` header value as the API server writes it: ``299 - "<text>"``."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- walking a body against a schema ----------------------------------------------------


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _child(node: Node, key: str) -> Node | None:
    """The node of field ``key`` inside ``node``, or None when it is not declared."""
    if isinstance(node, Struct):
        declared = node.fields.get(key)
        return declared if declared is not None else (FREE if node.open else None)
    if isinstance(node, MapOf):
        return node.value
    return FREE


def _decode(
    node: Node,
    value: Any,
    path: str,
    orders: Mapping[int, list[str]],
    events: list[tuple[str, str]],
) -> Any:
    """``value`` without its undeclared fields; appends ("unknown"|"duplicate", path) events
    in document order, as Go's strict JSON decoder meets them (a field both unknown and
    repeated is reported once, as unknown). Values of the wrong shape are left as they
    are for validation to judge."""
    if isinstance(value, dict) and not isinstance(node, ListOf):
        result: dict[str, Any] = {}
        seen: set[str] = set()
        for key in orders.get(id(value)) or list(value):
            here = _join(path, key)
            child = _child(node, key)
            if key in seen:
                if child is not None:
                    events.append(("duplicate", here))
                continue
            seen.add(key)
            if child is None:
                events.append(("unknown", here))
                continue
            result[key] = _decode(child, value[key], here, orders, events)
        return result
    if isinstance(value, list) and isinstance(node, ListOf | Free):
        item = node.item if isinstance(node, ListOf) else FREE
        return [_decode(item, v, f"{path}[{i}]", orders, events) for i, v in enumerate(value)]
    return value


def _json_kind(value: Any) -> str:
    """What Go's decoder calls a JSON value in ``cannot unmarshal <kind> into``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return f"number {value:g}"
    return "array" if isinstance(value, list) else "object"


_INT32 = Scalar("int32")


def _decoded_as(node: Node) -> Node:
    """The node whose Go type decodes ``node``'s value: an IntOrString's number goes to
    its int32 (``IntOrString.UnmarshalJSON``), whose errors name int32."""
    return _INT32 if node == INT_OR_STRING else node


def _fits(node: Node, value: Any) -> bool:
    if value is None or isinstance(node, Free):
        return True
    if node == INT_OR_STRING:
        return isinstance(value, str) or _fits(_INT32, value)
    if isinstance(node, Struct | MapOf):
        return isinstance(value, dict)
    if isinstance(node, ListOf):
        return isinstance(value, list)
    if node.go == "bool":
        return isinstance(value, bool)
    if node.go.startswith("int"):
        whole = isinstance(value, float) and value.is_integer()
        return whole or (isinstance(value, int) and not isinstance(value, bool))
    return isinstance(value, str)


# what Go's integer types hold: a number beyond them does not decode
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _overflow(node: Node, value: Any) -> str | None:
    """The number, as the decoder prints it, when ``node``'s Go integer type cannot hold it.

    ``encoding/json`` reports ``cannot unmarshal number 4294967296 into ... of type
    int32`` (``literalStore``: ``strconv.ParseInt`` or ``OverflowInt`` failing), so
    ``replicas: 4294967296`` is a 400 before any controller would try to make that
    many pods."""
    node = _decoded_as(node)
    if not isinstance(node, Scalar) or isinstance(value, bool):
        return None
    bounds = _INT_RANGES.get(node.go)
    if bounds is None or not isinstance(value, int | float):
        return None
    if bounds[0] <= value <= bounds[1]:
        return None
    return f"number {value}" if isinstance(value, int) else f"number {value:g}"


def type_error(node: Node, value: Any, struct: str = "", path: str = "") -> str | None:
    """The first value, in document order, whose JSON type its Go type cannot decode, as
    ``encoding/json`` reports it: ``json: cannot unmarshal string into Go struct field
    DeploymentSpec.spec.replicas of type int32`` (list indexes and map keys not shown).
    A number its integer type cannot hold is named with its value (:func:`_overflow`).
    The decoder stops the body there, so the API server answers 400, not 422."""
    fits = _fits(node, value)
    overflow = _overflow(node, value) if fits else None
    if not fits or overflow:
        return (
            f"json: cannot unmarshal {overflow or _json_kind(value)} into Go struct field "
            f"{struct}.{path} of type {go_type(_decoded_as(node))}"
        )
    if isinstance(node, Struct) and isinstance(value, dict):
        here = go_name(node.name)[1]
        for key, item in value.items():
            child = node.fields.get(key)
            if child is not None:
                found = type_error(child, item, here, _join(path, key))
                if found:
                    return found
    elif isinstance(node, MapOf | ListOf) and isinstance(value, dict | list):
        inner = node.value if isinstance(node, MapOf) else node.item
        for item in value.values() if isinstance(value, dict) else value:
            found = type_error(inner, item, struct, path)
            if found:
                return found
    return None


def _duplicates(value: Any, path: str, orders: Mapping[int, list[str]], out: list[str]) -> None:
    """Every repeated key of a parsed JSON body, schema or not, in document order."""
    if isinstance(value, dict):
        seen: set[str] = set()
        for key in orders.get(id(value)) or list(value):
            if key in seen:
                out.append(f'duplicate field "{_join(path, key)}"')
                continue
            seen.add(key)
            _duplicates(value[key], _join(path, key), orders, out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _duplicates(item, f"{path}[{i}]", orders, out)


def _go_value(value: Any) -> str:
    """A value as Go's ``%#v`` prints the decoded JSON scalar (``587``, ``true``, ``"x"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[]interface {}{...}"
    if isinstance(value, dict):
        return "map[string]interface {}{...}"
    return repr(value)


def _go_kind(value: Any) -> str:
    """``%T`` of a decoded JSON value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, list):
        return "[]interface {}"
    return "map[string]interface {}" if isinstance(value, dict) else "string"


def _scalar_error(node: Scalar, value: Any) -> str | None:
    """structured-merge-diff's ``validateScalar``: numeric, string and boolean leaves."""
    if value is None or node == INT_OR_STRING:
        return None  # an untyped scalar there (x-kubernetes-int-or-string): any will do
    if node.go.startswith("int"):
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        return None if numeric else f"expected numeric (int or float), got {_go_kind(value)}"
    if node.go == "bool":
        return None if isinstance(value, bool) else f"expected boolean, got &{{{value}}}"
    if isinstance(value, str):
        return None
    return f"expected string, got &value.valueUnstructured{{Value:{_go_value(value)}}}"


def _undeclared(node: Node, value: Any, path: str, field_name: str | None, out: list[str]) -> None:
    """What structured-merge-diff's typed conversion reports: undeclared fields
    (``.spec.foo``, list items by merge key; it stops at the first one in each map) and
    scalars of the wrong type (``.data.VERSION: expected string, got ...``)."""
    if isinstance(node, Free):
        return
    if isinstance(node, Scalar):
        error = _scalar_error(node, value)
        if error:
            out.append(f"{path}: {error}")
    elif isinstance(value, dict) and not isinstance(node, ListOf):
        for key in sorted(value, key=str):
            child = _child(node, key)
            here = f"{path}.{key}"
            if child is None:
                out.append(f"{here}: field not declared in schema")
                return
            _undeclared(child, value[key], here, key, out)
    elif isinstance(value, list) and isinstance(node, ListOf):
        merge_key = list_key(field_name, value)
        for i, item in enumerate(value):
            if merge_key is not None:
                element = f"[{merge_key}={json.dumps(item[merge_key], separators=(',', ':'))}]"
            else:
                element = f"[{i}]"
            _undeclared(node.item, item, path + element, None, out)


# --- one request ----------------------------------------------------------------------


@dataclass
class FieldValidation:
    """One write request's field validation: its directive, its body, its warnings."""

    directive: str
    schema: Struct | None
    type_kind: str  # the type the body decodes into, for messages ("Deployment", "Scale")
    type_version: str
    crd: bool = False
    parsed: Parsed = field(default_factory=Parsed)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls, value: str | None, options: str, kind: Kind, subresource: str, schema: Struct | None
    ) -> FieldValidation:
        """The validation a request asks for; 422 for an unsupported ``fieldValidation``."""
        value = value or ""
        if value not in SUPPORTED:
            raise invalid_directive(options, value)
        scale = subresource == "scale"
        return cls(
            directive=value or DEFAULT,
            schema=schema,
            type_kind="Scale" if scale else kind.kind,
            type_version="v1" if scale else kind.version,
            crd=kind.crd and not scale,
        )

    def parse(self, raw: bytes, content_type: str) -> Any:
        self.parsed = parse_body(raw, content_type)
        return self.parsed.value

    def header_values(self) -> list[str]:
        """``Warning`` header values, each text once (the server's recorder deduplicates)."""
        return [warning_header(text) for text in dict.fromkeys(self.warnings)]

    def decode(self, body: Any) -> Any:
        """A create or update body as it will be stored, its problems reported per directive."""
        self._check_types(body)
        events: list[tuple[str, str]] = []
        in_document_order = not self.crd and not self.parsed.is_yaml
        orders = self.parsed.key_orders if in_document_order else {}
        decoded = _decode(self.schema or FREE, body, "", orders, events)
        if in_document_order:
            problems = [f'{what} field "{path}"' for what, path in events]
        else:
            problems = self._json_duplicates() + _unknown(events)
        self._report(self._prefix(), problems)
        return decoded

    def decode_patched(self, content_type: str, patched: dict[str, Any]) -> dict[str, Any]:
        """The object a JSON, merge or strategic merge patch produced, as it will be stored."""
        self._check_types(patched)
        events: list[tuple[str, str]] = []
        decoded = _decode(self.schema or FREE, patched, "", {}, events)
        if content_type == JSON_PATCH:
            problems = self._json_patch_problems()
        else:
            problems = self._json_duplicates()
        self._report("", problems + _unknown(events))
        assert isinstance(decoded, dict)
        return decoded

    def check_apply(self, body: Any) -> None:
        """Server-side apply: 500 for an undeclared field or a scalar of the wrong type,
        whatever the directive; duplicate YAML keys are an error (Strict) or warnings (Warn)."""
        if isinstance(body, dict) and self.schema is not None:
            errors: list[str] = []
            _undeclared(self.schema, body, "", None, errors)
            if errors:
                raise ApiError(500, _typed_patch_error(body, self.type_kind, errors), reason="")
        lines = list(self.parsed.yaml_duplicates)
        if lines and self.directive == "Strict":
            raise ApiError(
                400,
                "error strict decoding YAML: error converting YAML to JSON: "
                "yaml: unmarshal errors:\n  " + "\n  ".join(lines),
            )
        if lines and self.directive == "Warn":
            self.warnings.extend(lines)

    def _check_types(self, body: Any) -> None:
        """400 for a value of the wrong JSON type in a built-in kind (custom resources are
        checked against their schema with 422s, as ``crvalidation.py`` does)."""
        if self.crd or self.schema is None or not isinstance(body, dict):
            return
        found = type_error(self.schema, body)
        if found:
            raise ApiError(400, f"{self._prefix()}{found}")

    def _prefix(self) -> str:
        return (
            f'{self.type_kind} in version "{self.type_version}" '
            f"cannot be handled as a {self.type_kind}: "
        )

    def _json_duplicates(self) -> list[str]:
        found: list[str] = []
        _duplicates(self.parsed.value, "", self.parsed.key_orders, found)
        return found

    def _json_patch_problems(self) -> list[str]:
        """Unknown and repeated keys of the operations themselves (``[0].foo``)."""
        problems: list[str] = []
        operations = self.parsed.value if isinstance(self.parsed.value, list) else []
        for i, op in enumerate(operations):
            if not isinstance(op, dict):
                continue
            seen: set[str] = set()
            for key in self.parsed.key_orders.get(id(op)) or list(op):
                if key in seen:
                    problems.append(f'json patch duplicate field "[{i}].{key}"')
                elif key not in _JSON_PATCH_FIELDS:
                    problems.append(f'json patch unknown field "[{i}].{key}"')
                seen.add(key)
        return problems

    def _report(self, prefix: str, problems: list[str]) -> None:
        """Strict: one 400 listing everything; Warn: one warning each; Ignore: nothing.

        go-yaml reports a YAML body's repeated keys as one error (``yaml: unmarshal
        errors:`` and a line each), listed before the other problems."""
        yaml_lines = list(self.parsed.yaml_duplicates)
        if not problems and not yaml_lines:
            return
        if self.directive == "Strict":
            parts = ["yaml: unmarshal errors:\n  " + "\n  ".join(yaml_lines)] if yaml_lines else []
            raise ApiError(400, prefix + "strict decoding error: " + ", ".join(parts + problems))
        if self.directive == "Warn":
            self.warnings.extend(yaml_lines + problems)


def _unknown(events: list[tuple[str, str]]) -> list[str]:
    return [f'unknown field "{p}"' for p in sorted(p for what, p in events if what == "unknown")]


def _typed_patch_error(body: Mapping[str, Any], type_kind: str, errors: list[str]) -> str:
    """structured-merge-diff's message: ``failed to create typed patch object
    (ns/name; apps/v1, Kind=Deployment): .spec.foo: field not declared in schema``."""
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    api_version = str(body.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    kind = str(body.get("kind") or type_kind)
    name = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    where = f"{name}; {group}/{version}, Kind={kind}"
    detail = errors[0] if len(errors) == 1 else "errors:\n  " + "\n  ".join(errors)
    return f"failed to create typed patch object ({where}): {detail}"
