"""The rollout machine deciding a batch from measurements (SPEC section 4c), pure.

The pure cluster model of tests/rollout/sim.py stands for the pods; the measurements
are handed to ``step`` in the observation, as the daemon's ``MeasuringDriver`` does
when ``measurement_due`` says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from reconciler.model.analysis import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    AnalysisQuery,
    Measurement,
    PrometheusAnalysis,
    parse_condition,
)
from reconciler.model.catalog import Batch
from reconciler.model.rollout import RolloutRecord, describe
from reconciler.rollout import (
    BatchState,
    RollingState,
    RolloutSettings,
    begin,
    measurement_due,
    step,
)
from tests.rollout.sim import Cluster

T0 = datetime(2026, 1, 1, tzinfo=UTC)
QUERIES = (
    AnalysisQuery("error-rate", "x", parse_condition("< 0.01")),
    AnalysisQuery("latency", "y", parse_condition("<= 0.5")),
)
# batch -> look number (from 0) -> (error-rate, latency) results
Verdicts = Callable[[int, int], tuple[str, str]]


def _settings(**analysis: int) -> RolloutSettings:
    prom = PrometheusAnalysis(QUERIES, "http://p:9090", **{"interval_seconds": 10, **analysis})
    return RolloutSettings(
        batches=(Batch(1), Batch(50, percent=True), Batch(50, percent=True)),
        on_failure="rollback",
        analysis=prom,
    )


def _measure(
    batch: int, look: int, results: tuple[str, str], now: datetime
) -> tuple[Measurement, ...]:
    at = now.isoformat().replace("+00:00", "Z")
    out = []
    for query, result in zip(QUERIES, results, strict=True):
        value = None if result == INCONCLUSIVE else (0.002 if result == PASSED else 0.9)
        reason = "no data" if result == INCONCLUSIVE else ""
        out.append(
            Measurement(
                batch, query.name, value, result == PASSED, at, result, reason, str(query.condition)
            )
        )
    return tuple(out)


def _drive(
    settings: RolloutSettings, verdicts: Verdicts, limit: int = 500
) -> tuple[RolloutRecord, list[RolloutRecord]]:
    """Run to an end, a second per step; measure whenever ``measurement_due`` says so."""
    cluster = Cluster(5, "1.0.0", "2.0.0")
    now = T0
    out = begin("1.0.0", "2.0.0", settings, cluster.observe(now, "2.0.0"))
    seen = [out.record]
    looks: dict[int, int] = {}
    for _ in range(limit):
        for action in out.actions:
            cluster.apply(action)
        cluster.tick(5)
        now += timedelta(seconds=1)
        if out.record.state.terminal:
            break
        obs = cluster.observe(now, "2.0.0")
        if measurement_due(out.record, settings, now):
            b = out.record.batch
            obs = replace(
                obs, measurements=_measure(b, looks.get(b, 0), verdicts(b, looks.get(b, 0)), now)
            )
            looks[b] = looks.get(b, 0) + 1
        out = step(out.record, settings, obs)
        seen.append(out.record)
    return out.record, seen


def test_every_batch_is_measured_count_times_interval_apart() -> None:
    record, seen = _drive(_settings(count=3), lambda b, n: (PASSED, PASSED))
    assert record.state is RollingState.SUCCEEDED
    for batch in (1, 2, 3):
        mine = record.measured(batch)
        assert [m.name for m in mine] == ["error-rate", "latency"] * 3
        stamps = sorted({m.at for m in mine})
        gaps = [
            (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
            for a, b in itertools.pairwise(stamps)
        ]
        assert all(g >= 10 for g in gaps), gaps
    ready = [r for r in seen if r.batch_state is BatchState.READY and r.batch == 2]
    assert describe(ready[0], "app") == (
        "rollout app 1.0.0 -> 2.0.0: batch 2/3 verified: error-rate 0.002 < 0.01 (3/3), "
        "latency 0.002 <= 0.5 (3/3) (3/5 replicas)"
    )


def test_failures_within_the_limit_pass_and_beyond_it_roll_back_at_once() -> None:
    one_bad: Verdicts = lambda b, n: (FAILED if n == 0 else PASSED, PASSED)  # noqa: E731
    record, _ = _drive(_settings(count=3, failure_limit=1), one_bad)
    assert record.state is RollingState.SUCCEEDED
    record, _ = _drive(
        _settings(count=3, failure_limit=1), lambda b, n: (PASSED, FAILED if b == 2 else PASSED)
    )
    assert record.state is RollingState.ROLLED_BACK and record.batch == 2
    assert len(record.measured(2)) == 4  # failed twice: decided without a third look
    assert record.message == "analysis: latency 0.9 not <= 0.5, 2/2 failed"


def test_inconclusive_beyond_its_limit_holds_whatever_onfailure_says() -> None:
    record, _ = _drive(
        _settings(count=2, inconclusive_limit=1), lambda b, n: (INCONCLUSIVE, PASSED)
    )
    assert record.state is RollingState.FAILED and record.reason == "AnalysisInconclusive"
    assert record.batch == 1 and record.targets
    one_missing: Verdicts = lambda b, n: (INCONCLUSIVE if n == 0 else PASSED, PASSED)  # noqa: E731
    record, _ = _drive(_settings(count=2, inconclusive_limit=1), one_missing)
    assert record.state is RollingState.SUCCEEDED  # one look without data is tolerated
    assert [m.result for m in record.measured(1)][::2] == [INCONCLUSIVE, PASSED]


def test_no_measurement_is_due_outside_a_verifying_batch_or_while_baking() -> None:
    settings = replace(_settings(count=1), pause_seconds=30)
    record = RolloutRecord(
        "1.0.0",
        "2.0.0",
        RollingState.ROLLING,
        3,
        batch=1,
        batch_state=BatchState.VERIFYING,
        updated_at="2026-01-01T00:00:00Z",
    )
    assert not measurement_due(record, settings, T0 + timedelta(seconds=29))
    assert measurement_due(record, settings, T0 + timedelta(seconds=30))
    assert not measurement_due(
        replace(record, batch_state=BatchState.ROLLING), settings, T0 + timedelta(seconds=60)
    )
    assert not measurement_due(replace(record, paused=True), settings, T0 + timedelta(seconds=60))
    done = record.with_measurements(_measure(1, 0, (PASSED, PASSED), T0))
    assert not measurement_due(done, settings, T0 + timedelta(seconds=60))  # count reached


def test_measurements_round_trip_through_the_record() -> None:
    record = RolloutRecord("1.0.0", "2.0.0", RollingState.ROLLING, 3, batch=1)
    record = record.with_measurements(_measure(1, 0, (PASSED, INCONCLUSIVE), T0))
    nan = Measurement(1, "x", float("nan"), False, "t", FAILED, "the value is NaN, not a number")
    record = record.with_measurements((nan,))
    data = record.to_dict()
    assert data["analysis"][0] == {
        "batch": 1,
        "name": "error-rate",
        "value": 0.002,
        "ok": True,
        "at": "2026-01-01T00:00:00Z",
        "result": "passed",
        "condition": "< 0.01",
    }
    assert data["analysis"][2]["value"] == "NaN"
    back = RolloutRecord.from_dict(data)
    assert [m.name for m in back.analysis] == ["error-rate", "latency", "x"]
    assert back.analysis[:2] == record.analysis[:2]
