"""Resource quantities in the canonical form a real API server stores and returns.

A kube-apiserver parses every ``resource.Quantity`` and serialises it again, so what
a client reads back is not always what it sent: ``1000m`` comes back ``1``, ``0.5``
as ``500m``, ``1024Mi`` as ``1Gi`` and ``1000`` as ``1k``
(https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/).
The rules, from apimachinery's ``Quantity.CanonicalizeBytes``:

* the suffix family is kept: binary (``Ki``...``Ei``), decimal SI (``n``...``E`` or
  none) or decimal exponent (``e3``); numbers without a suffix are decimal SI;
* decimal forms use the largest power of 1000 that leaves an integer mantissa;
* binary forms use the largest power of 1024 that leaves an integer mantissa, and
  fall back to decimal SI below 1024 or for fractional values;
* precision below ``1n`` is rounded up (away from zero), and a resource list
  (requests, limits, PVC sizes) is rounded up to ``1m``.

A value that is no quantity at all is a ``400 BadRequest`` on a real server (the body
cannot be decoded); :func:`canonical` raises ``ValueError`` and the caller words it.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Decimal, InvalidOperation
from typing import Any

# apimachinery's own wording of the rule, quoted in its 400 answers
PATTERN_TEXT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(
    r"^([+-]?)(\d+\.?\d*|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_DECIMAL_VALUE = {s: e for e, s in _DECIMAL.items()}
NANO = Decimal("1e-9")
MILLI = Decimal("1e-3")


def canonical(value: Any, precision: Decimal = NANO) -> str:
    """``value`` (a quantity string or a JSON number) in canonical form.

    ``precision`` is the smallest step kept: values are rounded up to a multiple
    of it (``MILLI`` for resource lists, ``NANO`` elsewhere).
    """
    number, binary, exponent_form = _parse(value)
    return render(number, binary=binary, precision=precision, exponent_form=exponent_form)


def parse(value: Any) -> tuple[Decimal, bool]:
    """``value``'s number and whether it was written with a binary suffix (``Mi``):
    sums keep the family of their first term, as ``Quantity.Add`` does."""
    number, binary, _ = _parse(value)
    return number, binary


def render(
    number: Decimal, *, binary: bool, precision: Decimal = NANO, exponent_form: bool = False
) -> str:
    """``number`` in canonical form, in the binary family when ``binary`` (and whole)."""
    number = (number / precision).to_integral_value(rounding=ROUND_UP) * precision
    if number == 0:
        return "0"
    if binary and abs(number) >= 1024 and number == number.to_integral_value():
        return _binary_form(int(number))
    return _decimal_form(number, exponent_form=exponent_form)


def _parse(value: Any) -> tuple[Decimal, bool, bool]:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
    text = repr(value) if isinstance(value, float) else str(value)
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"quantities must match the regular expression '{PATTERN_TEXT}'")
    sign, digits, exponent, suffix = match.groups()
    try:
        number = Decimal(sign + digits)
    except InvalidOperation as e:  # pragma: no cover - the pattern admits only numbers
        raise ValueError(str(e)) from e
    binary = suffix in _BINARY[1:]
    if exponent:
        number = number.scaleb(int(exponent[1:]))
    elif binary:
        number *= Decimal(1024) ** _BINARY.index(suffix)
    else:
        number = number.scaleb(_DECIMAL_VALUE[suffix or ""])
    return number, binary, bool(exponent)


def _binary_form(number: int) -> str:
    power = 0
    while power + 1 < len(_BINARY) and number % (1024 ** (power + 1)) == 0:
        power += 1
    return f"{number // 1024**power}{_BINARY[power]}"


def _decimal_form(number: Decimal, *, exponent_form: bool) -> str:
    """The integer mantissa and the largest multiple-of-3 exponent that keeps it whole."""
    sign, digit_tuple, exponent = number.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digit_tuple)))
    shift = exponent % 3  # lower the exponent to a multiple of 3
    mantissa *= 10**shift
    exponent -= shift
    text = ("-" if sign else "") + str(mantissa)
    if exponent_form:
        return text + (f"e{exponent}" if exponent else "")
    if exponent in _DECIMAL:
        return text + _DECIMAL[exponent]
    return f"{text}e{exponent}"


def add(total: Any, value: Any) -> str:
    """``total + value`` in canonical form, in ``total``'s family (``Quantity.Add``
    keeps its receiver's format: ``128Mi + 128Mi`` is ``256Mi``); ``total`` None: ``value``."""
    if total is None:
        return canonical(value)
    number, binary = parse(total)
    return render(number + parse(value)[0], binary=binary)
