"""Custom resources against their CRD's schema: prune, default, validate (422), as kube-apiserver.

Follows https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
(#validation, #defaulting, #field-pruning). On every create and update of a custom
resource the served version's ``openAPIV3Schema`` prunes unknown fields, fills
defaults, drops non-nullable nulls, then validates; every violation becomes one
cause of a single ``422 Invalid``, worded as kube-openapi and the apiextensions
server word them::

    spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"
    spec.color: Unsupported value: "pink": supported values: "red", "blue"
    spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0
    spec.name: Too long: may not be longer than 5
    spec.tags: Too many: 4: must have at most 3 items
    spec.owner: Required value

Lists marked ``x-kubernetes-list-type: set``/``map`` refuse duplicates
(``spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}``).
Integer formats ``int32``/``int64`` are range-checked as kube-apiserver 1.36 and
later do (``<nil>: Invalid value: "": Checked value must be of type integer with
format int32 in spec.count``); earlier servers dropped the format and accepted
any integer. String formats (``date-time``...) are not checked.

Reads prune and default too (a CRD's schema may change under stored objects).
Server-side apply first turns the applied configuration into a typed object: a
field the schema does not declare, or a value of the wrong type, fails with 500
``failed to create typed patch object (...)`` before any merge, as real servers
answer (kubernetes/kubernetes#122480); :func:`check_applied` does that. ``api.py``
calls :func:`admit`, :func:`check_applied` and :func:`on_read`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox import goformat
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import clone
from reconciler.sandbox.goformat import Cause, json_type
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.structural import (
    Schema,
    apply_defaults,
    child,
    drop_nulls,
    items,
    keeps_unknown,
    list_type,
    properties,
    prune,
)

_RANGES = {
    ("integer", "int32"): (-(2**31), 2**31 - 1),
    ("integer", "int64"): (-(2**63), 2**63 - 1),
}
_FLOAT32_MAX = 3.4028234663852886e38


def admit(kind: Kind, obj: dict[str, Any]) -> None:
    """Prune, default and validate ``obj`` in place; raise one 422 listing every violation."""
    schema = kind.schema
    if schema is None:
        return
    prune(obj, schema)
    apply_defaults(obj, schema)
    drop_nulls(obj, schema)
    causes = validate(obj, schema) + list_duplicates(obj, schema)
    if causes:
        name = str((obj.get("metadata") or {}).get("name", ""))
        raise goformat.invalid_error(kind.kind, kind.group, name, causes)


def on_read(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A stored custom resource as served: pruned and defaulted by today's schema."""
    result = clone(dict(obj))
    if kind.schema is not None:
        prune(result, kind.schema)
        apply_defaults(result, kind.schema)
    return result


# --- kube-openapi's SchemaValidator ------------------------------------------------------


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string") is True:
        return ["integer", "string"]
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) and kind else []


def validate(value: Any, schema: Schema, path: str = "") -> list[Cause]:
    """Every schema violation of ``value`` (the object) as field causes."""
    causes: list[Cause] = []
    types = _types(schema)
    if value is None:
        if types and schema.get("nullable") is not True:
            detail = f'{path} in body must be of type {",".join(types)}: "null"'
            causes.append(goformat.type_invalid(path, "null", detail))
        causes += _enum(value, schema, path)
        return causes
    causes += _type(value, schema, types, path)
    if isinstance(value, str):
        causes += _string(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        causes += _number(value, schema, types, path)
    elif isinstance(value, list):
        causes += _array(value, schema, path)
    causes += _enum(value, schema, path)
    if isinstance(value, Mapping):
        causes += _object(value, schema, path)
    return causes


def _type(value: Any, schema: Schema, types: list[str], path: str) -> list[Cause]:
    actual = json_type(value)
    fmt = schema.get("format")
    integral = isinstance(value, float) and value.is_integer()
    fits = (
        actual in types
        or (actual == "number" and integral and "integer" in types)
        or (actual == "integer" and "number" in types)
    )
    formatted = (types == ["integer"] and fmt in ("int32", "int64")) or (
        types == ["number"] and fmt in ("float", "double")
    )
    # kube-openapi names the format when the value is neither a string nor a list
    if formatted and not fits and not isinstance(value, str | list):
        held = "float64" if isinstance(value, float) else ""
        detail = f"{path} in body must be of type {fmt}: {goformat.go_quote(held)}"
        return [goformat.type_invalid(path, held, detail)]
    if types and not fits:
        detail = f'{path} in body must be of type {",".join(types)}: "{actual}"'
        return [goformat.type_invalid(path, actual, detail)]
    return []


def _string(value: str, schema: Schema, path: str) -> list[Cause]:
    """maxLength, minLength, pattern: the first failure only, as kube-openapi reports."""
    maximum = schema.get("maxLength")
    if isinstance(maximum, int) and len(value) > maximum:
        return [goformat.too_long(path, maximum)]
    minimum = schema.get("minLength")
    if isinstance(minimum, int) and len(value) < minimum:
        detail = f"{path} in body should be at least {minimum} chars long"
        return [goformat.invalid(path, value, detail)]
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # refused when the CRD was stored; nothing to enforce
        if not matched:
            return [goformat.invalid(path, value, f"{path} in body should match '{pattern}'")]
    return []


def _bound(value: int | float, bound: float) -> str:
    """How kube-openapi prints a bound: as an int64 for integer values, else as float64."""
    if isinstance(value, int):
        return str(int(bound))
    return goformat.go_float(float(bound))


def _number(value: int | float, schema: Schema, types: list[str], path: str) -> list[Cause]:
    causes: list[Cause] = []
    fmt = schema.get("format")
    if types in (["integer"], ["number"]) and isinstance(fmt, str):
        causes += _range(value, types[0], fmt, "Checked", path)
    factor = schema.get("multipleOf")
    if isinstance(factor, int | float) and factor > 0:
        remainder = value / factor
        if not float(remainder).is_integer():
            detail = f"{path} in body should be a multiple of {_bound(value, factor)}"
            causes.append(goformat.invalid(path, value, detail))
    for key, exclusive_key, above in (
        ("minimum", "exclusiveMinimum", False),
        ("maximum", "exclusiveMaximum", True),
    ):
        bound = schema.get(key)
        if not isinstance(bound, int | float) or isinstance(bound, bool):
            continue
        if types in (["integer"], ["number"]) and isinstance(fmt, str):
            label = "Maximum boundary" if above else "Minimum boundary"
            broken = _range(bound, types[0], fmt, label, path)
            if broken:
                causes += broken
                continue
        exclusive = schema.get(exclusive_key) is True
        limit: float = int(bound) if isinstance(value, int) else float(bound)
        if above:
            bad = value >= limit if exclusive else value > limit
            words = "less than" if exclusive else "less than or equal to"
        else:
            bad = value <= limit if exclusive else value < limit
            words = "greater than" if exclusive else "greater than or equal to"
        if bad:
            detail = f"{path} in body should be {words} {_bound(value, bound)}"
            causes.append(goformat.invalid(path, value, detail))
    return causes


def _range(value: int | float, kind: str, fmt: str, label: str, path: str) -> list[Cause]:
    """A value outside its format's range: reported without a field, as the server does."""
    bounds = _RANGES.get((kind, fmt))
    if bounds is not None:
        ok = float(value).is_integer() and bounds[0] <= value <= bounds[1]
    elif (kind, fmt) in (("number", "float"),):
        ok = abs(value) <= _FLOAT32_MAX
    else:
        return []
    if ok:
        return []
    detail = f"{label} value must be of type {kind} with format {fmt} in {path}"
    return [goformat.invalid("<nil>", "", detail)]


def _array(value: list[Any], schema: Schema, path: str) -> list[Cause]:
    causes: list[Cause] = []
    item_schema = schema.get("items")
    if isinstance(item_schema, Mapping):
        for index, item in enumerate(value):
            causes += validate(item, item_schema, f"{path}[{index}]")
    minimum = schema.get("minItems")
    if isinstance(minimum, int) and len(value) < minimum:
        detail = f"{path} in body should have at least {minimum} items"
        causes.append(goformat.invalid(path, len(value), detail))
    maximum = schema.get("maxItems")
    if isinstance(maximum, int) and len(value) > maximum:
        causes.append(goformat.too_many(path, len(value), maximum))
    return causes


def _same(a: Any, b: Any) -> bool:
    """JSON equality as Go's reflect sees it: 1 == 1.0, but true is never 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _enum(value: Any, schema: Schema, path: str) -> list[Cause]:
    allowed = schema.get("enum")
    if not isinstance(allowed, list) or not allowed:
        return []
    if value is not None and any(_same(value, option) for option in allowed):
        return []
    return [goformat.not_supported(path, value, allowed)]


def _object(value: Mapping[str, Any], schema: Schema, path: str) -> list[Cause]:
    causes: list[Cause] = []
    count = len(value)
    fewest, most = schema.get("minProperties"), schema.get("maxProperties")
    if isinstance(fewest, int) and count < fewest:
        detail = f"{path} in body should have at least {fewest} properties"
        return [goformat.invalid(path, count, detail)]
    if isinstance(most, int) and count > most:
        return [goformat.too_many(path, count, most)]
    props = properties(schema)
    extra = schema.get("additionalProperties")
    for key, sub_value in value.items():
        if key not in props and isinstance(extra, Mapping):
            causes += validate(sub_value, extra, f"{path}.{key}")
    for name, sub in props.items():
        if name in value and isinstance(sub, Mapping):
            causes += validate(value[name], sub, _join(path, name))
    for name in schema.get("required") or ():
        if name not in value:
            causes.append(goformat.required(_join(path, str(name))))
    return causes


# --- x-kubernetes-list-type: set and map refuse duplicates --------------------------------


def list_duplicates(value: Any, schema: Schema, path: str = "") -> list[Cause]:
    """Duplicate items of ``set`` lists and duplicate keys of ``map`` lists."""
    causes: list[Cause] = []
    if isinstance(value, Mapping):
        for key, sub_value in value.items():
            sub = child(schema, str(key))
            if sub is not None:
                causes += list_duplicates(sub_value, sub, _join(path, str(key)))
    elif isinstance(value, list):
        kind, keys = list_type(schema)
        seen: list[Any] = []
        for index, item in enumerate(value):
            identity: Any = item
            if kind == "map" and isinstance(item, Mapping):
                identity = {k: item.get(k) for k in keys if k in item}
            if kind in ("set", "map"):
                if any(_same_json(identity, s) for s in seen):
                    causes.append(goformat.duplicate(f"{path}[{index}]", identity))
                seen.append(identity)
            causes += list_duplicates(item, items(schema), f"{path}[{index}]")
    return causes


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- server-side apply: the applied configuration as a typed object ------------------------


def check_applied(kind: Kind, applied: Mapping[str, Any]) -> None:
    """Raise the 500 a real server answers when an applied config does not fit the schema."""
    if kind.schema is None:
        return
    errors = _typed_errors(applied, kind.schema, "", root=True)
    if not errors:
        return
    meta = applied.get("metadata") or {}
    gvk = f"{kind.group}/{kind.version}, Kind={kind.kind}"
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    text = errors[0] if len(errors) == 1 else "errors:\n  " + "\n  ".join(errors)
    raise ApiError(500, f"failed to create typed patch object ({where}; {gvk}): {text}", reason="")


def _typed_errors(value: Any, schema: Schema, path: str, *, root: bool = False) -> list[str]:
    """structured-merge-diff's conversion errors (``.spec.x: field not declared in schema``)."""
    if value is None or not schema:
        return []
    if schema.get("x-kubernetes-int-or-string") is True:
        return []
    kind = schema.get("type")
    where = path or "."
    if kind in ("integer", "number"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            return [f"{where}: expected numeric (int or float), got {_go_type(value)}"]
    elif kind == "string":
        if not isinstance(value, str):
            shown = f"&value.valueUnstructured{{Value:{goformat.go_syntax(value)}}}"
            return [f"{where}: expected string, got {shown}"]
    elif kind == "boolean":
        if not isinstance(value, bool):
            return [f"{where}: expected boolean, got &{{{goformat.go_v(value)}}}"]
    elif kind == "object" or (kind is None and isinstance(value, Mapping)):
        if not isinstance(value, Mapping):
            return [f"{where}: expected map, got &{{{goformat.go_v(value)}}}"]
        return _typed_object(value, schema, path, root)
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{where}: expected list, got &{{{goformat.go_v(value)}}}"]
        return _typed_list(value, schema, path)
    return []


def _typed_object(value: Mapping[str, Any], schema: Schema, path: str, root: bool) -> list[str]:
    errors: list[str] = []
    embedded = root or schema.get("x-kubernetes-embedded-resource") is True
    for key, sub_value in value.items():
        if embedded and key in ("apiVersion", "kind", "metadata"):
            continue
        sub = child(schema, str(key))
        if sub is None:
            if not keeps_unknown(schema):
                errors.append(f"{path}.{key}: field not declared in schema")
            continue
        errors += _typed_errors(sub_value, sub, f"{path}.{key}")
    return errors


def _typed_list(value: list[Any], schema: Schema, path: str) -> list[str]:
    errors: list[str] = []
    kind, keys = list_type(schema)
    for index, item in enumerate(value):
        element = f"[{index}]"
        if kind == "map":
            missing = [k for k in keys if not (isinstance(item, Mapping) and k in item)]
            if missing:
                errors.append(
                    f"{path}: element {index}: associative list with keys has an element "
                    f'that omits key field "{missing[0]}" (and doesn\'t have default value)'
                )
                continue
            element = "[" + ",".join(f"{k}={json.dumps(item[k])}" for k in keys) + "]"
        elif kind == "set":
            element = f"[={json.dumps(item)}]"
        errors += _typed_errors(item, items(schema), path + element)
    return errors


def _go_type(value: Any) -> str:
    """``%T`` of a decoded JSON value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    return "<nil>"
