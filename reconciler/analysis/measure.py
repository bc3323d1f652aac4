"""One measurement of a batch: every query asked once, each answer judged (SPEC section 4c).

Called by the daemon when the rollout machine says a measurement is due
(``reconciler.rollout.measurement_due``) and by ``reconciler rollout analyze``. The
verdict of one answer:

- a scalar, or a vector of exactly one series, is compared with the query's
  condition: ``passed`` or ``failed``;
- no series at all is ``inconclusive`` (no data: the pods may not have been
  scraped yet, or the query names a label that is not there);
- several series, a range vector or string, or a value that is not a number
  (``NaN``, what ``0/0`` gives when nothing was served) is ``failed`` with that reason;
- Prometheus refusing the query is ``failed`` with its reason; Prometheus out of
  reach is ``inconclusive`` (see ``client.py``): it says nothing about the release.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from reconciler.analysis.client import Answer, PrometheusUnreachable, QueryError
from reconciler.analysis.queries import fill_query
from reconciler.model.analysis import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    AnalysisQuery,
    Measurement,
    PrometheusAnalysis,
)
from reconciler.model.placeholders import PlaceholderError


class Querier(Protocol):
    """What a measurement needs of Prometheus: ``PrometheusClient.query``."""

    def query(self, expr: str) -> Answer: ...


def measure(
    querier: Querier,
    analysis: PrometheusAnalysis,
    *,
    batch: int,
    values: Mapping[str, str],
    at: str,
) -> tuple[Measurement, ...]:
    """Each query of ``analysis`` asked once; ``values`` fill the placeholders."""
    return tuple(
        measure_query(querier, query, batch=batch, values=values, at=at)
        for query in analysis.queries
    )


def measure_query(
    querier: Querier,
    query: AnalysisQuery,
    *,
    batch: int,
    values: Mapping[str, str],
    at: str,
) -> Measurement:
    """One query's measurement (see the module's docstring for the verdicts)."""
    condition = str(query.condition)

    def result(value: float | None, verdict: str, reason: str = "") -> Measurement:
        return Measurement(
            batch=batch,
            name=query.name,
            value=value,
            ok=verdict == PASSED,
            at=at,
            result=verdict,
            reason=reason,
            condition=condition,
        )

    try:
        answer = querier.query(fill_query(query.query, values))
    except PlaceholderError as e:
        return result(None, FAILED, str(e))
    except QueryError as e:
        return result(None, FAILED, f"query failed: {e.reason}")
    except PrometheusUnreachable as e:
        return result(None, INCONCLUSIVE, f"prometheus {e.reason}")
    if answer.result_type not in ("scalar", "vector"):
        return result(None, FAILED, f"the query returns a {answer.result_type}, not a number")
    if not answer.samples:
        return result(None, INCONCLUSIVE, "no data")
    if len(answer.samples) > 1:
        shown = ", ".join(_series(s.labels) for s in answer.samples[:3])
        more = ", ..." if len(answer.samples) > 3 else ""
        return result(None, FAILED, f"{len(answer.samples)} series, expected one: {shown}{more}")
    value = answer.samples[0].value
    if math.isnan(value):
        return result(value, FAILED, "the value is NaN, not a number")
    if query.condition.holds(value):
        return result(value, PASSED)
    return result(value, FAILED)


def _series(labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


__all__ = ["Querier", "measure", "measure_query"]
