"""Prometheus analysis of a batch (SPEC section 4c): its settings and its measurements.

In ``model/`` because the catalog loads the settings (``rollout.analysis.prometheus``
in version.yaml or an instance file), the rollout machine decides from the
measurements, and the status record carries them (``rollout.analysis: [{batch, name,
value, ok, at}]``). The condition grammar lives here too: it is data a catalog file
states (``"< 0.01"``) and both ``validate`` and the decision read it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"
RESULTS = (PASSED, FAILED, INCONCLUSIVE)
MAX_QUERIES = 20  # queries per analysis: each is a request per measurement
MAX_COUNT = 100  # measurements per batch
MAX_RECORDED = 200  # measurements the status record keeps (the newest)

_CONDITION = re.compile(r"\s*(<=|>=|==|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?")


class AnalysisFormatError(ValueError):
    """A condition, duration or measurement record that does not have its shape."""


@dataclass(frozen=True)
class Condition:
    """``< 0.01``: the comparison a query's scalar result must satisfy."""

    op: str
    threshold: float

    def holds(self, value: float) -> bool:
        t = self.threshold
        return {
            "<": value < t,
            "<=": value <= t,
            ">": value > t,
            ">=": value >= t,
            "==": value == t,
        }[self.op]

    def __str__(self) -> str:
        return f"{self.op} {format_value(self.threshold)}"


def parse_condition(text: object) -> Condition:
    """``"< 0.01"`` -> ``Condition("<", 0.01)``; anything else is ``AnalysisFormatError``."""
    if not isinstance(text, str):
        raise AnalysisFormatError(
            f'successCondition must be a string such as "< 0.01", got {text!r}'
        )
    match = _CONDITION.fullmatch(text)
    if match is None:
        raise AnalysisFormatError(
            f'successCondition "{text}" is not an operator (<, <=, >, >=, ==) and a number'
        )
    return Condition(match.group(1), float(match.group(2)))


def parse_duration(value: object, what: str) -> int:
    """``30s``, ``2m``, ``1h30m`` or a number of seconds -> whole seconds (>= 1)."""
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and value and (m := _DURATION.fullmatch(value)) and any(m.groups()):
        h, mi, s = (int(g or 0) for g in m.groups())
        seconds = h * 3600 + mi * 60 + s
    else:
        raise AnalysisFormatError(f"{what} must be a duration such as 30s, 2m or 1h, got {value!r}")
    if not 1 <= seconds <= 86400:
        raise AnalysisFormatError(f"{what} must be between 1s and 24h, got {value!r}")
    return seconds


def format_value(value: float | None) -> str:
    """A measured value for a commit subject: ``0.002``, ``12``, ``NaN``; no float noise."""
    if value is None:
        return "no data"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


@dataclass(frozen=True)
class AnalysisQuery:
    """One query: its name in records and commits, the PromQL, its condition."""

    name: str
    query: str
    condition: Condition
    line: int | None = field(default=None, compare=False, repr=False)  # of the query, in its file


@dataclass(frozen=True)
class PrometheusAnalysis:
    """``rollout.analysis.prometheus``: how often to measure, how many, what tolerated."""

    queries: tuple[AnalysisQuery, ...]
    address: str = ""  # "" -> the daemon's ``--prometheus-url``
    interval_seconds: int = 30
    count: int = 1
    failure_limit: int = 0
    inconclusive_limit: int = 0

    def fingerprint(self) -> tuple[object, ...]:
        """What a failed rollout waits to change before it is tried again."""
        return (
            self.address,
            self.interval_seconds,
            self.count,
            self.failure_limit,
            self.inconclusive_limit,
            tuple((q.name, q.query, str(q.condition)) for q in self.queries),
        )


@dataclass(frozen=True)
class Measurement:
    """One query's result at one look: the status record's ``rollout.analysis`` entry.

    ``ok`` is SPEC's verdict (the condition held); ``result`` tells a failed
    measurement from an inconclusive one (no data, Prometheus unreachable), which
    only ``inconclusiveLimit`` tolerates; ``reason`` says why it was not ``passed``.
    """

    batch: int
    name: str
    value: float | None
    ok: bool
    at: str
    result: str = PASSED
    reason: str = ""
    condition: str = ""  # "< 0.01", for the commit subject

    def to_dict(self) -> dict[str, Any]:
        value: Any = self.value
        if value is not None and (math.isnan(value) or math.isinf(value)):
            value = format_value(value)  # YAML and JSON both keep the text
        out: dict[str, Any] = {
            "batch": self.batch,
            "name": self.name,
            "value": value,
            "ok": self.ok,
            "at": self.at,
            "result": self.result,
        }
        if self.condition:
            out["condition"] = self.condition
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, data: object) -> Measurement:
        if not isinstance(data, Mapping):
            raise AnalysisFormatError("rollout.analysis entries must be mappings")
        batch, name, ok, at = data.get("batch"), data.get("name"), data.get("ok"), data.get("at")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            raise AnalysisFormatError(f"rollout.analysis.batch must be a count >= 1, got {batch!r}")
        if not isinstance(name, str) or not isinstance(ok, bool) or not isinstance(at, str):
            raise AnalysisFormatError("rollout.analysis entries need name, ok and at")
        result = data.get("result", PASSED if ok else FAILED)
        if result not in RESULTS:
            raise AnalysisFormatError(f"rollout.analysis.result must be one of {RESULTS}")
        return cls(
            batch=batch,
            name=name,
            value=_value(data.get("value")),
            ok=ok,
            at=at,
            result=str(result),
            reason=str(data.get("reason", "")),
            condition=str(data.get("condition", "")),
        )

    def describe(self) -> str:
        """``error-rate 0.002 < 0.01``, or ``error-rate no data``/``failed: why``."""
        if self.result == INCONCLUSIVE:
            return f"{self.name} inconclusive ({self.reason or 'no data'})"
        if self.value is None or (self.reason and not self.ok):
            return f"{self.name} failed ({self.reason})"
        verdict = self.condition if self.ok else f"not {self.condition}"
        return f"{self.name} {format_value(self.value)} {verdict}".rstrip()


def _value(raw: object) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise AnalysisFormatError("rollout.analysis.value must be a number")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.replace("Inf", "inf"))
        except ValueError as e:
            raise AnalysisFormatError(f"rollout.analysis.value {raw!r} is not a number") from e
    raise AnalysisFormatError("rollout.analysis.value must be a number")


__all__ = [
    "FAILED",
    "INCONCLUSIVE",
    "MAX_COUNT",
    "MAX_QUERIES",
    "MAX_RECORDED",
    "PASSED",
    "RESULTS",
    "AnalysisFormatError",
    "AnalysisQuery",
    "Condition",
    "Measurement",
    "PrometheusAnalysis",
    "format_value",
    "parse_condition",
    "parse_duration",
]
