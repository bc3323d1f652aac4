"""JSON Schemas of reconciler's own file kinds, and checking documents against them.

The schemas ship inside the package (``schemas/*.json``) and are the same files
editors use through the yaml-language-server modeline at the top of each
catalog file, so an author sees the same rules while typing as in CI.

Checking is two-speed: a compiled ``fastjsonschema`` validator answers the
common case (the document is valid) in microseconds; only a document that fails
is checked again with ``jsonschema`` to collect *every* error with its path,
which is then phrased for a person. ``jsonschema`` is imported on that first failure
only: its import is 0.07 s of CPU, which every process that loads a valid catalog
(each daemon start, each ``validate``, ``preview`` and ``render``) paid for nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import fastjsonschema

if TYPE_CHECKING:
    import jsonschema

SCHEMA_FILES = {
    "App": "app.schema.json",
    "Channels": "channels.schema.json",
    "AppVersion": "appversion.schema.json",
    "Cluster": "cluster.schema.json",
    "Instance": "instance.schema.json",
    "ImageBuilds": "imagebuilds.schema.json",
    "Waves": "waves.schema.json",
}

_LABEL_HINT = 'lowercase letters, digits and "-", starting and ending alphanumeric, at most 63'


@dataclass(frozen=True)
class SchemaViolation:
    path: tuple[str | int, ...]
    message: str


@cache
def load_schema(kind: str) -> dict[str, Any]:
    text = resources.files("reconciler.catalog").joinpath("schemas", SCHEMA_FILES[kind]).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _fast_validator(kind: str) -> Callable[[Any], Any]:
    validator: Callable[[Any], Any] = fastjsonschema.compile(_merge_type_choices(load_schema(kind)))
    return validator


# keywords that constrain one JSON type only and let every other type through
_ONLY_FOR = {
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "string": {"minLength", "maxLength", "pattern", "format"},
}
_ANNOTATIONS = {"description", "title", "examples", "default"}


def _merge_type_choices(schema: Any) -> Any:
    """``schema`` with each ``oneOf`` of branches of different types, each constrained
    only by keywords of its own type, written as one schema (``type: [integer, string],
    minimum: 1, pattern: ...``), which accepts exactly the same documents.

    For the fast validator only: fastjsonschema checks a ``oneOf`` by trying each
    branch and catching the failure, and formatting each failure's message was a
    tenth of validating a large catalog (a batch list is three of them). Errors are
    still phrased from the schema as written (``_full_validator``).
    """
    if isinstance(schema, list):
        return [_merge_type_choices(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _merge_type_choices(v) for k, v in schema.items()}
    branches = out.get("oneOf")
    if isinstance(branches, list) and "type" not in out and _disjoint_typed(branches):
        merged: dict[str, Any] = {"type": [b["type"] for b in branches]}
        for branch in branches:
            merged.update({k: v for k, v in branch.items() if k != "type"})
        del out["oneOf"]
        out.update(merged)
    return out


def _disjoint_typed(branches: list[Any]) -> bool:
    types = [b.get("type") if isinstance(b, dict) else None for b in branches]
    if len(set(types)) != len(types) or not all(t in _ONLY_FOR for t in types):
        return False
    return all(set(b) - {"type"} - _ANNOTATIONS <= _ONLY_FOR[b["type"]] for b in branches)


@cache
def _full_validator(kind: str) -> jsonschema.protocols.Validator:
    import jsonschema.validators  # the failure path only: see the docstring

    cls = jsonschema.validators.validator_for(load_schema(kind))
    return cls(load_schema(kind))


def check_document(kind: str, data: Any) -> list[SchemaViolation]:
    """All schema violations of ``data`` as a ``kind`` document, phrased for people."""
    try:
        _fast_validator(kind)(data)
        return []
    except fastjsonschema.JsonSchemaException:
        pass
    errors = sorted(
        _full_validator(kind).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]
    )
    return [_phrase(e) for e in _leaf_errors(errors)]


def _leaf_errors(errors: list[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    """Replace a oneOf/anyOf failure by its most specific explanation."""
    import jsonschema.exceptions  # the failure path only

    out: list[jsonschema.ValidationError] = []
    for err in errors:
        if err.validator in ("oneOf", "anyOf") and err.context:
            best = jsonschema.exceptions.best_match(err.context)
            out.append(best if best.validator not in ("type", "pattern") else err)
        else:
            out.append(err)
    return out


def field_name(path: tuple[str | int, ...] | list[str | int]) -> str:
    """``("rollout", "batches", 1)`` -> ``rollout.batches[1]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "document"


def _type_words(expected: Any) -> str:
    words = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "object": "a mapping",
        "array": "a list",
        "null": "null",
    }
    if isinstance(expected, list):
        return " or ".join(words.get(str(t), str(t)) for t in expected)
    return words.get(str(expected), str(expected))


def _describe(value: Any) -> str:
    from reconciler.catalog.yamlread import type_name

    if isinstance(value, (dict, list)):
        return type_name(value)
    return f"{type_name(value)} {json.dumps(value)}"


def _phrase(err: jsonschema.ValidationError) -> SchemaViolation:
    path = tuple(err.absolute_path)
    name = field_name(path)
    v = err.validator
    schema: dict[str, Any] = err.schema if isinstance(err.schema, dict) else {}
    expected: Any = err.validator_value
    instance: Any = err.instance
    if v == "additionalProperties":
        extra = sorted(set(instance) - set(schema.get("properties", {})))
        key = str(extra[0]) if extra else "?"
        known = ", ".join(sorted(schema.get("properties", {})))
        where = f" in {name}" if path else ""
        hint = f" (known: {known})" if known else ""
        return SchemaViolation((*path, key), f'unknown field "{key}"{where}{hint}')
    if v == "required":
        missing = str(err.message).split("'")[1] if "'" in err.message else "?"
        where = f" in {name}" if path else ""
        return SchemaViolation(path, f'missing required field "{missing}"{where}')
    if v == "type":
        hint = ""
        if expected == "string" and isinstance(instance, (int, float)):
            hint = f' (quote it: "{instance}")'
        return SchemaViolation(
            path,
            f"{name} must be {_type_words(expected)}, got {_describe(instance)}{hint}",
        )
    if v == "pattern" and path and path[-1] == "soak":
        return SchemaViolation(
            path, f'{name} "{instance}" is not a duration (e.g. 30s, 20m, 1h, 1h30m, 2d)'
        )
    if v == "pattern":
        if expected.startswith("^[a-z0-9]("):
            return SchemaViolation(
                path, f'{name} "{instance}" is not a valid DNS-1123 label ({_LABEL_HINT})'
            )
        return SchemaViolation(path, f'{name} "{instance}" has an invalid format')
    if v == "propertyNames":
        return SchemaViolation(path, f'{name}: key "{instance}" is not a valid name')
    if v == "enum":
        allowed = ", ".join(str(x) for x in expected)
        return SchemaViolation(path, f"{name} must be one of {allowed}, got {_describe(instance)}")
    if v == "const":
        return SchemaViolation(path, f'{name} must be "{expected}"')
    if v == "oneOf" and path and "batches" in path:
        return SchemaViolation(
            path,
            f'{name} must be a replica count or a percentage like "50%", got {_describe(instance)}',
        )
    if v in ("minimum", "maxLength", "minLength", "minItems"):
        return SchemaViolation(path, f"{name}: {err.message}")
    return SchemaViolation(path, f"{name}: {err.message}")
