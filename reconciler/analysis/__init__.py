"""Prometheus analysis of rollout batches (SPEC section 4c).

The only code that speaks to Prometheus (``client.py``), plus pure parts: the PromQL
syntax check ``validate`` runs (``promql.py``), placeholders in queries
(``queries.py``) and the measurement of one look (``measure.py``). The rollout
machine decides from the measurements; the daemon composes the two.
"""

from reconciler.analysis.promql import PromQLError, check
from reconciler.analysis.queries import (
    ROLLOUT_KEYS,
    WAVE_KEYS,
    check_query,
    check_wave_query,
    fill_query,
)

__all__ = [
    "ROLLOUT_KEYS",
    "WAVE_KEYS",
    "PromQLError",
    "check",
    "check_query",
    "check_wave_query",
    "fill_query",
]
