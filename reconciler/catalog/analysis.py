"""``analysis.prometheus`` read from version.yaml, an instance file or waves.yaml.

A batch's analysis (SPEC section 4c) is ``rollout.analysis.prometheus``; a wave's
(``waves.yaml``) is ``waves[i].analysis.prometheus``, with the same shape. The schema
has already checked the shape (keys, types, bounds); this adds what a schema cannot
say, each at its own line: the interval is a duration, each ``successCondition`` is
an operator and a number, each query is PromQL once its placeholders are filled
(``reconciler.analysis.check_query``, or ``check_wave_query`` for a wave), query
names are unique. A problem makes the file invalid, so its instance keeps its last
good state (and a broken waves.yaml holds the releases it would gate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.analysis import check_query
from reconciler.catalog.context import LoadContext
from reconciler.catalog.yamlread import Document
from reconciler.model.analysis import (
    AnalysisFormatError,
    AnalysisQuery,
    PrometheusAnalysis,
    parse_condition,
    parse_duration,
)


def read_prometheus(
    ctx: LoadContext,
    rel: str,
    doc: Document,
    raw: object,
    *,
    params: Mapping[str, object] | None = None,
    images: Mapping[str, str] | None = None,
    at: Sequence[str | int] = ("rollout", "analysis"),
    check: Callable[[str], str | None] | None = None,
) -> PrometheusAnalysis | None:
    """The analysis ``raw`` (the value of ``rollout.analysis``) states, or None.

    None when ``raw`` is not the Prometheus form (a Job path, or absent), and when
    it has a problem (reported at its line). ``params``/``images`` are the version's
    (None in an instance file: its version is chosen later). ``at`` is where ``raw``
    sits in ``doc`` and ``check`` how a query is checked (a wave's: its placeholders).
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("prometheus"), Mapping):
        return None
    spec: Mapping[str, Any] = raw["prometheus"]
    base: list[str | int] = [*at, "prometheus"]
    label = ".".join(str(part) for part in base)
    ok = True
    try:
        interval = parse_duration(spec.get("interval", "30s"), "interval")
    except AnalysisFormatError as e:
        ctx.error(rel, doc.line_of([*base, "interval"]), f"{label}: {e}")
        ok, interval = False, 30
    queries: list[AnalysisQuery] = []
    seen: set[str] = set()
    for index, item in enumerate(spec.get("queries") or ()):
        if not isinstance(item, Mapping):
            continue  # the schema reported it
        where: list[str | int] = [*base, "queries", index]
        name = str(item.get("name", ""))
        if name in seen:
            ctx.error(rel, doc.line_of([*where, "name"]), f'analysis query "{name}" is named twice')
            ok = False
        seen.add(name)
        try:
            condition = parse_condition(item.get("successCondition"))
        except AnalysisFormatError as e:
            line = doc.line_of([*where, "successCondition"])
            ctx.error(rel, line, f'analysis query "{name}": {e}')
            ok = False
            continue
        query = str(item.get("query", ""))
        line = doc.line_of([*where, "query"])
        problem = check(query) if check is not None else check_query(query, params, images)
        if problem is not None:
            ctx.error(rel, line, f'analysis query "{name}": {problem}')
            ok = False
            continue
        queries.append(AnalysisQuery(name, query, condition, line))
    if not ok or not queries:
        return None
    return PrometheusAnalysis(
        queries=tuple(queries),
        address=str(spec.get("address", "")),
        interval_seconds=interval,
        count=int(spec.get("count", 1)),
        failure_limit=int(spec.get("failureLimit", 0)),
        inconclusive_limit=int(spec.get("inconclusiveLimit", 0)),
    )


__all__ = ["read_prometheus"]
