"""Values and field errors printed the way the Go API server prints them.

A real API server builds its 422 messages with Go's ``fmt`` verbs and
``k8s.io/apimachinery/pkg/util/validation/field``: a cause message is the
error's "body" (``Invalid value: "x": detail``), the Status message is
``<Kind>.<group> "<name>" is invalid: <field>: <body>`` (several errors in
``[...]``), see https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation.
Clients and people compare these strings, so the sandbox prints numbers, strings
and JSON values as Go would: ``%v`` of ``1000000.0`` is ``1e+06``, ``%q`` quotes,
``%#v`` of a decoded JSON object is ``map[string]interface {}{"k":"v"}``.
``crvalidation.py`` and ``crds.py`` use these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from reconciler.sandbox.apierrors import ApiError

Cause = dict[str, str]


def go_quote(text: str) -> str:
    """``%q`` of a string (Go escapes like JSON for the characters manifests hold)."""
    return json.dumps(text, ensure_ascii=False)


def go_float(number: float) -> str:
    """``%v`` of a float64: shortest digits, exponent form from 1e+06 and below 1e-04."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "-0" if math.copysign(1, number) < 0 else "0"
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # digits before the decimal point
    decimal_exponent = point - 1
    prefix = "-" if sign else ""
    if decimal_exponent < -4 or decimal_exponent >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        sign_char = "-" if decimal_exponent < 0 else "+"
        return f"{prefix}{mantissa}e{sign_char}{abs(decimal_exponent):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def go_v(value: Any) -> str:
    """``%v`` of a decoded JSON value (``map[k:v]``, ``[a b]``, ``<nil>``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{go_v(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    return str(value)


def go_syntax(value: Any) -> str:
    """``%#v`` of a decoded JSON value, as the API server holds it (``interface {}``)."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{go_quote(str(k))}:{go_syntax(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_syntax(v) for v in value) + "}"
    return go_v(value)


def shown(value: Any) -> str:
    """A bad value in an error body: ``%v`` for numbers and booleans, ``%q`` for strings."""
    if value is None:
        return go_quote("null")
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool | int | float):
        return go_v(value)
    return go_syntax(value)


def json_type(value: Any) -> str:
    """The JSON schema type name of a decoded value (what kube-openapi reports)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# --- field.Error constructors (reason = the CauseType, message = ErrorBody) -------------


def _cause(reason: str, field: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


def required(field: str, detail: str = "") -> Cause:
    return _cause("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))


def invalid(field: str, value: Any, detail: str) -> Cause:
    return _cause("FieldValueInvalid", field, f"Invalid value: {shown(value)}: {detail}")


def type_invalid(field: str, value: Any, detail: str) -> Cause:
    return _cause("FieldValueTypeInvalid", field, f"Invalid value: {shown(value)}: {detail}")


def not_supported(field: str, value: Any, supported: Sequence[Any]) -> Cause:
    names = [v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in supported]
    listed = ", ".join(go_quote(n) for n in names)
    detail = f": supported values: {listed}" if names else ""
    return _cause("FieldValueNotSupported", field, f"Unsupported value: {shown(value)}{detail}")


def too_long(field: str, maximum: int) -> Cause:
    return _cause("FieldValueTooLong", field, f"Too long: may not be longer than {maximum}")


def too_many(field: str, actual: int, maximum: int) -> Cause:
    items = "item" if maximum == 1 else "items"
    return _cause(
        "FieldValueTooMany", field, f"Too many: {actual}: must have at most {maximum} {items}"
    )


def duplicate(field: str, value: Any) -> Cause:
    return _cause("FieldValueDuplicate", field, f"Duplicate value: {shown(value)}")


def forbidden(field: str, detail: str) -> Cause:
    return _cause("FieldValueForbidden", field, f"Forbidden: {detail}")


def invalid_error(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """One ``422 Invalid`` listing every cause, worded as ``NewInvalid`` words it."""
    qualified = f"{kind}.{group}" if group else kind
    listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    text = listed if len(causes) == 1 else f"[{listed}]"
    return ApiError(
        422,
        f'{qualified} "{name}" is invalid: {text}',
        name=name,
        group=group,
        kind=kind,
        causes=causes,
    )
