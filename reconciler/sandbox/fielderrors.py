"""Field errors worded as the API server's ``field.Error`` values (k8s.io/apimachinery
``pkg/util/validation/field``), the causes of a ``422 Invalid``.

Each is a ``{"reason", "message", "field"}`` cause as
https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/ shows
(``details.causes``); the message is the error's text without its field path, which
the server prefixes when it joins the causes into the Status message. Values are
quoted as JSON, as the server prints strings (``Invalid value: "Never"``).
``rules.py`` and ``workloadrules.py`` build their causes from these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Cause = dict[str, str]


def as_map(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a map, else empty: shapes are the decoder's business."""
    # a plain dict first: the ABC check of ``isinstance`` is slow, and controllers
    # call this for every field they read
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def cause(reason: str, field: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


def invalid(field: str, value: Any, why: str) -> Cause:
    return cause("FieldValueInvalid", field, f"Invalid value: {json.dumps(value)}: {why}")


def required(field: str, why: str = "") -> Cause:
    return cause("FieldValueRequired", field, f"Required value: {why}" if why else "Required value")


def not_supported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(json.dumps(v) for v in supported)
    message = f"Unsupported value: {json.dumps(value)}: supported values: {listed}"
    return cause("FieldValueNotSupported", field, message)


def duplicate(field: str, value: Any) -> Cause:
    return cause("FieldValueDuplicate", field, f"Duplicate value: {json.dumps(value)}")


def not_found(field: str, value: Any) -> Cause:
    return cause("FieldValueNotFound", field, f"Not found: {json.dumps(value)}")


def forbidden(field: str, why: str) -> Cause:
    return cause("FieldValueForbidden", field, f"Forbidden: {why}")


def port_number(value: Any, field: str) -> list[Cause]:
    """``IsValidPortNum``: container ports, Service ports and numeric target ports."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return []
    return [invalid(field, value, "must be between 1 and 65535, inclusive")]


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """``validation.RegexError``: the message, its examples and the pattern."""
    shown = "".join(f"'{e}', " if i == 0 else f" or '{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def dot_dir_errors(value: str) -> list[str]:
    """``hasChDirPrefix``: keys and names that would be a directory path component."""
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []
