"""Structural schemas of CustomResourceDefinitions: the shape checks, pruning and defaulting.

Follows https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/:

* #specifying-a-structural-schema: a CRD's ``openAPIV3Schema`` must give every node
  a ``type`` (unless ``x-kubernetes-int-or-string`` or
  ``x-kubernetes-preserve-unknown-fields``), ``object`` at the root, ``items`` for
  arrays, and consistent ``x-kubernetes-list-type``/``-list-map-keys``;
  :func:`schema_causes` lists what a real server refuses (422) on CRD create/update.
* #field-pruning: fields the schema does not name are dropped (:func:`prune`) unless
  a node says ``x-kubernetes-preserve-unknown-fields: true``; ``apiVersion``,
  ``kind`` and ``metadata`` at the root (and of embedded resources) are kept.
* #defaulting: ``default:`` values fill missing fields whose parent exists, and a
  ``null`` in a non-nullable field with a default (:func:`apply_defaults`); nulls
  in non-nullable fields without one are dropped (:func:`drop_nulls`).

Server-side apply reads list types from the same schema (:func:`list_type`).
``crvalidation.py`` runs these on every write and read of a custom resource.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox import goformat
from reconciler.sandbox.copying import clone
from reconciler.sandbox.goformat import Cause

Schema = Mapping[str, Any]
EMPTY: Schema = {}
_LIST_TYPES = ("atomic", "set", "map")
_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_EMBEDDED = "x-kubernetes-embedded-resource"


def _node(value: Any) -> Schema:
    return value if isinstance(value, Mapping) else EMPTY


def properties(schema: Schema) -> Mapping[str, Any]:
    return _node(schema.get("properties"))


def child(schema: Schema, name: str) -> Schema | None:
    """The schema of field ``name`` of an object node; None when the schema does not know it."""
    props = properties(schema)
    if name in props:
        return _node(props[name])
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra
    return None


def items(schema: Schema) -> Schema:
    return _node(schema.get("items"))


def keeps_unknown(schema: Schema) -> bool:
    return schema.get(_PRESERVE) is True or schema.get("additionalProperties") is True


def list_type(schema: Schema) -> tuple[str, tuple[str, ...]]:
    """How server-side apply merges a list: ("atomic"|"set"|"map", map keys)."""
    kind = schema.get("x-kubernetes-list-type")
    if kind == "map":
        keys = schema.get("x-kubernetes-list-map-keys")
        if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
            return "map", tuple(keys)
        return "atomic", ()
    if kind == "set":
        return "set", ()
    return "atomic", ()


# --- pruning and defaulting -------------------------------------------------------------


def prune(value: Any, schema: Schema, *, root: bool = True) -> None:
    """Drop, in place, every field ``schema`` does not specify (#field-pruning)."""
    if isinstance(value, dict):
        if schema.get(_INT_OR_STRING) is True:
            return
        keep_meta = root or schema.get(_EMBEDDED) is True
        for key in list(value):
            if keep_meta and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = child(schema, str(key))
            if sub is not None:
                prune(value[key], sub, root=False)
            elif not keeps_unknown(schema):
                del value[key]
    elif isinstance(value, list):
        for item in value:
            prune(item, items(schema), root=False)


def apply_defaults(value: Any, schema: Schema, *, root: bool = True) -> None:
    """Fill ``default:`` values in place where the parent exists (#defaulting)."""
    if isinstance(value, dict):
        for name, raw in properties(schema).items():
            sub = _node(raw)
            if root and name == "metadata":
                continue
            missing = name not in value or (value[name] is None and sub.get("nullable") is not True)
            if "default" in sub and missing:
                value[name] = clone(sub["default"])
        for key, sub_value in value.items():
            if root and key == "metadata":
                continue
            sub_schema = child(schema, str(key))
            if sub_schema is not None:
                apply_defaults(sub_value, sub_schema, root=False)
    elif isinstance(value, list):
        for item in value:
            apply_defaults(item, items(schema), root=False)


def drop_nulls(value: Any, schema: Schema) -> None:
    """Remove, in place, nulls of non-nullable fields that have no default."""
    if isinstance(value, dict):
        for key in list(value):
            sub = child(schema, str(key))
            if sub is None:
                continue
            if value[key] is None and "default" not in sub and sub.get("nullable") is not True:
                del value[key]
            else:
                drop_nulls(value[key], sub)
    elif isinstance(value, list):
        for item in value:
            drop_nulls(item, items(schema))


# --- is the CRD's schema structural? ------------------------------------------------------


def schema_causes(schema: Any, where: str) -> list[Cause]:
    """Why a real server refuses this ``openAPIV3Schema`` (empty when it is acceptable)."""
    if not isinstance(schema, Mapping):
        return [goformat.required(where, "schemas are required")]
    causes = _node_causes(schema, where, "root")
    return sorted(causes, key=lambda c: f"{c['field']}: {c['message']}")


def _node_causes(schema: Schema, where: str, level: str) -> list[Cause]:
    causes: list[Cause] = []
    kind = schema.get("type")
    free = schema.get(_INT_OR_STRING) is True or schema.get(_PRESERVE) is True
    if kind is not None and kind not in _TYPES:
        causes.append(goformat.not_supported(f"{where}.type", kind, _TYPES))
    if not kind and not free:
        why = {
            "root": "must not be empty at the root",
            "items": "must not be empty for specified array items",
            "field": "must not be empty for specified object fields",
        }[level]
        causes.append(goformat.required(f"{where}.type", why))
    if level == "root" and kind and kind != "object":
        causes.append(goformat.invalid(f"{where}.type", kind, "must be object at the root"))
    if level == "root" and "additionalProperties" in schema:
        causes.append(
            goformat.forbidden(f"{where}.additionalProperties", "must not be used at the root")
        )
    if schema.get(_INT_OR_STRING) is True and schema.get(_PRESERVE) is True:
        causes.append(
            goformat.invalid(
                f"{where}.x-kubernetes-preserve-unknown-fields",
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if kind == "array" and not isinstance(schema.get("items"), Mapping):
        causes.append(goformat.required(f"{where}.items", "must be specified"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as e:
            causes.append(
                goformat.invalid(
                    f"{where}.pattern",
                    pattern,
                    f"must be a valid regular expression, but isn't: {e}",
                )
            )
    causes += _list_type_causes(schema, where)
    if level == "root":
        causes += _metadata_causes(schema, where)
    for name, sub in properties(schema).items():
        at = f"{where}.properties[{name}]"
        if isinstance(sub, Mapping):
            causes += _node_causes(sub, at, "field")
        else:
            causes.append(goformat.invalid(at, sub, "must be an object"))
    if isinstance(schema.get("items"), Mapping):
        causes += _node_causes(schema["items"], f"{where}.items", "items")
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        causes += _node_causes(extra, f"{where}.additionalProperties", "field")
    return causes


def _metadata_causes(schema: Schema, where: str) -> list[Cause]:
    """At the root, metadata may only restrict name and generateName."""
    meta = properties(schema).get("metadata")
    if not isinstance(meta, Mapping):
        return []
    at = f"{where}.properties[metadata]"
    causes = []
    if meta.get("type") != "object":
        causes.append(goformat.invalid(f"{at}.type", meta.get("type", ""), "must be object"))
    allowed = {"type", "properties", "description"}
    extra_props = set(properties(meta)) - {"name", "generateName"}
    if extra_props or set(meta) - allowed:
        causes.append(
            goformat.forbidden(
                at,
                "must not specify anything other than name and generateName, "
                "but metadata is implicitly specified",
            )
        )
    return causes


def _list_type_causes(schema: Schema, where: str) -> list[Cause]:
    causes: list[Cause] = []
    kind = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    if kind is not None and schema.get("type") != "array":
        why = "must be array if x-kubernetes-list-type is specified"
        if schema.get("type"):
            causes.append(goformat.invalid(f"{where}.type", schema.get("type"), why))
        else:
            causes.append(goformat.required(f"{where}.type", why))
    if kind is not None and kind not in _LIST_TYPES:
        causes.append(
            goformat.not_supported(f"{where}.x-kubernetes-list-type", kind, list(_LIST_TYPES))
        )
    if keys:
        why = "must be map if x-kubernetes-list-map-keys is non-empty"
        if kind is None:
            causes.append(goformat.required(f"{where}.x-kubernetes-list-type", why))
        elif kind != "map":
            causes.append(goformat.invalid(f"{where}.x-kubernetes-list-type", kind, why))
    if kind != "map":
        return causes
    if not keys:
        causes.append(
            goformat.required(
                f"{where}.x-kubernetes-list-map-keys",
                "must not be empty if x-kubernetes-list-type is map",
            )
        )
    item = schema.get("items")
    if not isinstance(item, Mapping):
        return causes
    if item.get("type") != "object":
        causes.append(
            goformat.invalid(
                f"{where}.items.type",
                item.get("type", ""),
                "must be object if parent array's x-kubernetes-list-type is map",
            )
        )
        return causes
    required = set(item.get("required") or ())
    for key in keys if isinstance(keys, list) else ():
        prop = properties(item).get(key)
        if not isinstance(prop, Mapping):
            causes.append(
                goformat.invalid(
                    f"{where}.x-kubernetes-list-map-keys",
                    keys,
                    "entries must all be names of item properties",
                )
            )
        elif key not in required and "default" not in prop:
            causes.append(
                goformat.required(
                    f"{where}.items.properties[{key}].default",
                    "this property is in x-kubernetes-list-map-keys, "
                    "so it must have a default or be a required property",
                )
            )
    return causes
