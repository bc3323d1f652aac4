"""A query's placeholders filled, and a query checked the way ``validate`` reports it. Pure.

A batch's queries take the manifest placeholders (``${instance.namespace}``,
``${params.X}``...) plus ``${rollout.from}`` and ``${rollout.to}`` (SPEC section 4c);
a wave's queries in ``waves.yaml`` take those that mean something for a whole fleet
(``WAVE_KEYS``: the app, the version released, the waiting instance, the wave and the
earlier waves' clusters). ``validate`` has no instance or rollout at hand, so it
fills each placeholder with a sample of the right shape and parses the result: a
placeholder never hides a syntax error, and an unknown one is reported like one in
a manifest.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.analysis.promql import PromQLError, check
from reconciler.model.placeholders import TOKEN, PlaceholderError, parse_placeholder

ROLLOUT_KEYS = ("rollout.from", "rollout.to")
SAMPLE = {
    "instance.name": "web",
    "instance.namespace": "web",
    "app.name": "app",
    "app.version": "1.0.0",
    "rollout.from": "1.0.0",
    "rollout.to": "1.1.0",
}
# a wave's query (waves.yaml): no params or images, which differ from app to app
WAVE_SAMPLE = {
    "app": "app",
    "version": "1.1.0",
    "app.name": "app",
    "app.version": "1.1.0",
    "instance.name": "web",
    "instance.namespace": "web",
    "wave.name": "eu",
    "wave.previous": "canary",
    "wave.clusters": "staging|prod-canary",
}
WAVE_KEYS = tuple(WAVE_SAMPLE)


def fill_query(query: str, values: Mapping[str, str]) -> str:
    """``query`` with every ``${...}`` replaced from ``values`` (keys like ``params.x``).

    ``$${`` writes a literal ``${``. An unknown placeholder, or a known one ``values``
    lacks, raises ``PlaceholderError`` naming it.
    """

    return _filled(query, values)[0]


def _filled(query: str, values: Mapping[str, str]) -> tuple[str, list[tuple[int, int]]]:
    """The filled query, and (filled offset, original offset) where each replacement ends."""
    out: list[str] = []
    marks: list[tuple[int, int]] = []
    size = last = 0
    for match in TOKEN.finditer(query):
        token = match.group(0)
        if token == "${":
            raise PlaceholderError(f'unterminated placeholder in "{query}" (missing "}}")')
        if token == "$${":
            text = "${"
        else:
            expr = str(match.group(1)).strip()
            if expr not in values:
                if expr not in ROLLOUT_KEYS:
                    parse_placeholder(expr)  # raises for an unknown one, with the known list
                raise PlaceholderError(f'placeholder "${{{expr}}}" has no value here')
            text = values[expr]
        out.append(query[last : match.start()])
        size += match.start() - last
        out.append(text)
        size += len(text)
        last = match.end()
        marks.append((size, last))
    out.append(query[last:])
    return "".join(out), marks


def _original_column(column: int, marks: list[tuple[int, int]]) -> int:
    """A column of the filled query as a column of the query as written."""
    offset = column - 1
    shift = 0
    for filled_end, original_end in marks:
        if offset < filled_end:
            break
        shift = original_end - filled_end
    return offset + shift + 1


def check_query(
    query: str, params: Mapping[str, object] | None, images: Mapping[str, str] | None
) -> str | None:
    """Why ``query`` is not valid PromQL once filled with samples, or None when it is.

    ``params``/``images``: the version's parameter defaults and images, so
    ``${params.X}`` must name a declared parameter; None (an instance file, whose
    version is chosen later) accepts any name.
    """
    values = dict(SAMPLE)
    for scope, known in (("params", params), ("images", images)):
        for name, value in (known or {}).items():
            values[f"{scope}.{name}"] = "0" if value is None else str(value)
    if params is None or images is None:
        for match in TOKEN.finditer(query):
            expr = (match.group(1) or "").strip()
            scope = expr.split(".", 1)[0]
            if (scope == "params" and params is None) or (scope == "images" and images is None):
                values.setdefault(expr, "0")
    return _check_filled(query, values)


def check_wave_query(query: str) -> str | None:
    """Why a wave's ``query`` is not valid PromQL once filled with samples, or None."""
    for match in TOKEN.finditer(query):
        expr = (match.group(1) or "").strip()
        if match.group(1) is not None and expr not in WAVE_SAMPLE:
            known = ", ".join(WAVE_KEYS)
            return f'unknown placeholder "${{{expr}}}" in a wave\'s query (known: {known})'
    return _check_filled(query, WAVE_SAMPLE)


def _check_filled(query: str, values: Mapping[str, str]) -> str | None:
    try:
        filled, marks = _filled(query, values)
    except PlaceholderError as e:
        return str(e)
    try:
        check(filled)
    except PromQLError as e:
        return f"PromQL: {e.reason} (column {_original_column(e.column, marks)})"
    return None


__all__ = [
    "ROLLOUT_KEYS",
    "SAMPLE",
    "WAVE_KEYS",
    "WAVE_SAMPLE",
    "check_query",
    "check_wave_query",
    "fill_query",
]
