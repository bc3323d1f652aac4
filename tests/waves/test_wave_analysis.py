"""A wave's analysis as pure functions: when it measures, opens, waits, halts, and who halts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.model.analysis import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    AnalysisFormatError,
    AnalysisQuery,
    Measurement,
    PrometheusAnalysis,
    parse_condition,
)
from reconciler.model.status import InstanceStatus, Phase
from reconciler.model.waveanalysis import (
    WAVE_KEY,
    WaveAnalysisRecord,
    read_wave_record,
    settings_digest,
)
from reconciler.model.waves import SeenRecord, Wave, Waves
from reconciler.waves import Halted, Open, Waiting
from reconciler.waves.analysis import Measure, analysis_halt, as_recorded, judge, wave_values
from tests.waves.test_gate import FRESH, STALE, fresh

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ANALYSIS = PrometheusAnalysis(
    queries=(
        AnalysisQuery("error-rate", "q1", parse_condition("< 0.01")),
        AnalysisQuery("latency", "q2", parse_condition("<= 0.5")),
    ),
    interval_seconds=60,
    count=3,
    failure_limit=1,
    inconclusive_limit=1,
)
EU = Wave("eu", names=("prod-eu",), analysis=ANALYSIS)
WAVES = Waves(
    waves=(Wave("canary", names=("staging", "prod-canary")), EU, Wave("rest", names=("*",))),
    members={"staging": 0, "prod-canary": 0, "prod-eu": 1, "prod-us": 2, "prod-ap": 2},
)
INSTANCES = {"staging": ["web"], "prod-canary": ["web"], "prod-eu": ["web"], "prod-us": ["web"]}


def look(minute: int, rate: float | None = 0.002, latency: float = 0.1) -> list[Measurement]:
    """One look at ``minute``: both queries; ``rate`` None is no data."""
    at = (T0 + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")
    if rate is None:
        first = Measurement(1, "error-rate", None, False, at, INCONCLUSIVE, "no data", "< 0.01")
    else:
        verdict = PASSED if rate < 0.01 else FAILED
        first = Measurement(1, "error-rate", rate, rate < 0.01, at, verdict, "", "< 0.01")
    second = Measurement(1, "latency", latency, latency <= 0.5, at, PASSED, "", "<= 0.5")
    return [first, second]


def decide(measured: Sequence[Measurement], minute: float) -> object:
    return judge(EU, "podinfo", "6.6.0", measured, T0 + timedelta(minutes=minute))


def test_nothing_measured_yet_measures_now() -> None:
    assert decide([], 0) == Measure("eu")


def test_between_looks_it_waits_and_says_how_long() -> None:
    waiting = decide(look(0), 0.5)
    assert isinstance(waiting, Waiting) and waiting.remaining == 30
    assert (
        waiting.message
        == "waiting for wave eu: analysis error-rate 0.002 < 0.01, latency 0.1 <= 0.5 (1/3)"
    )
    assert decide(look(0), 1) == Measure("eu")  # interval passed


def test_count_measurements_within_the_limits_open() -> None:
    measured = look(0) + look(1, rate=0.02) + look(2, rate=None)  # 1 failed, 1 no data: tolerated
    opened = decide(measured, 2)
    assert isinstance(opened, Open)
    assert opened.message == (
        "the analysis of wave eu passed podinfo 6.6.0: error-rate inconclusive (no data), "
        "latency 0.1 <= 0.5 (3/3)"
    )


def test_failures_beyond_the_limit_halt_before_count() -> None:
    halted = decide(look(0, rate=0.08) + look(1, rate=0.05), 1)
    assert isinstance(halted, Halted)
    assert halted.message.startswith(
        "halted: the analysis of wave eu failed podinfo 6.6.0: error-rate 0.05 not < 0.01 "
        "(2/2 failed > failureLimit 1)"
    )


def test_inconclusive_beyond_the_limit_holds_and_never_opens() -> None:
    measured = look(0, rate=None) + look(1, rate=None) + look(2)
    held = decide(measured, 500)
    assert isinstance(held, Waiting) and held.remaining is None
    assert held.message.startswith(
        "waiting for wave eu: analysis inconclusive: error-rate no data, 2/3 > inconclusiveLimit 1;"
    )


def test_a_wave_without_analysis_is_open() -> None:
    assert isinstance(judge(WAVES.waves[2], "podinfo", "6.6.0", [], T0), Open)


def test_placeholders_name_the_wave_and_the_earlier_clusters() -> None:
    values = wave_values(WAVES, 2, "podinfo", "6.6.0", "web", "web-ns")
    assert values == {
        "app": "podinfo",
        "version": "6.6.0",
        "app.name": "podinfo",
        "app.version": "6.6.0",
        "instance.name": "web",
        "instance.namespace": "web-ns",
        "wave.name": "rest",
        "wave.previous": "eu",
        "wave.clusters": "prod-canary|staging|prod-eu",
    }
    assert wave_values(WAVES, 1, "podinfo", "6.6.0", "web", "web")["wave.clusters"] == (
        "prod-canary|staging"
    )


def test_the_record_block_round_trips_without_batches() -> None:
    block = WaveAnalysisRecord("eu", "6.6.0", "r" * 40, settings_digest(ANALYSIS), tuple(look(0)))
    data = block.to_dict()
    assert all(
        set(m) >= {"name", "value", "ok", "at"} and "batch" not in m for m in data["analysis"]
    )
    assert data["analysis"][0]["value"] == 0.002 and data["name"] == "eu"
    assert WaveAnalysisRecord.from_dict(data) == block
    assert read_wave_record({WAVE_KEY: data}) == block
    assert read_wave_record({}) is None
    assert read_wave_record({WAVE_KEY: {"name": "eu"}}) is None  # unreadable: measure again
    with pytest.raises(AnalysisFormatError, match=r"wave\.analysis must be a list"):
        WaveAnalysisRecord.from_dict({"name": "eu", "version": "1.0.0", "analysis": {}})
    with pytest.raises(AnalysisFormatError, match=r"wave\.release must be a string"):
        WaveAnalysisRecord.from_dict({"name": "eu", "version": "1.0.0", "release": 3})


def halted_record(
    measured: Sequence[Measurement],
    *,
    commit: str = FRESH,
    version: str = "6.6.0",
    settings: str = "",
    reason: str = "WaveHalted",
) -> dict[tuple[str, str], SeenRecord]:
    block = WaveAnalysisRecord(
        "eu", version, "", settings or settings_digest(ANALYSIS), tuple(measured)
    )
    status = InstanceStatus(
        cluster="prod-eu",
        instance="web",
        app="podinfo",
        phase=Phase.STALLED,
        version="6.5.0",
        desired_version="6.6.0",
        source_commit=commit,
        reason=reason,
        extra={WAVE_KEY: block.to_dict()},
    )
    return {("prod-eu", "web"): SeenRecord(status, T0)}


def halt(records: dict[tuple[str, str], SeenRecord], index: int = 2) -> Halted | None:
    return analysis_halt(WAVES, index, "podinfo", "6.6.0", INSTANCES, records, fresh)


def test_a_later_wave_halts_with_the_earlier_waves_failed_analysis() -> None:
    failed = look(0, rate=0.08) + look(1, rate=0.09)
    halted = halt(halted_record(failed))
    assert halted is not None and halted.wave == "rest" and halted.failed == ("prod-eu/web",)
    assert halted.message.startswith(
        "halted: podinfo 6.6.0 failed the analysis of wave eu on prod-eu/web: error-rate 0.09 "
        "not < 0.01 (2/2 failed > failureLimit 1)"
    )


@pytest.mark.parametrize(
    "records",
    [
        halted_record(look(0, rate=0.08) + look(1, rate=0.09), commit=STALE),  # older release
        halted_record(look(0, rate=0.08) + look(1, rate=0.09), version="6.7.0"),
        halted_record(look(0, rate=0.08) + look(1, rate=0.09), settings="other"),
        halted_record(look(0, rate=0.08) + look(1, rate=0.09), reason="WaitingForWave"),
        halted_record(look(0, rate=0.08) + look(1)),  # within failureLimit
    ],
    ids=["stale", "other-version", "other-settings", "not-halted", "within-limit"],
)
def test_what_does_not_halt_a_later_wave(records: dict[tuple[str, str], SeenRecord]) -> None:
    assert halt(records) is None


def test_the_halting_wave_itself_is_not_halted_by_its_own_record() -> None:
    assert halt(halted_record(look(0, rate=0.08) + look(1, rate=0.09)), index=1) is None


def recorded(records: dict[tuple[str, str], SeenRecord], index: int = 1) -> object:
    """The board's answer for wave ``index`` when the status gate is open."""
    proven = Open(WAVES.name_of(index))
    return as_recorded(WAVES, index, "podinfo", "6.6.0", INSTANCES, records, fresh, proven)


def test_the_board_says_what_the_analysed_wave_recorded() -> None:
    assert recorded({}) == Waiting(
        "eu", "prod-eu/web: the analysis of wave eu has not measured yet"
    )
    halted = recorded(halted_record(look(0, rate=0.08) + look(1, rate=0.09)))
    assert isinstance(halted, Halted) and halted.failed == ("prod-eu/web",)
    assert "failed podinfo 6.6.0 on prod-eu/web: error-rate 0.09 not < 0.01" in halted.message
    measuring = halted_record(look(0), reason="WaitingForWave")
    status = measuring[("prod-eu", "web")].status
    measuring[("prod-eu", "web")] = SeenRecord(
        replace(status, message="waiting for wave eu: analysis ... (1/3)"), T0
    )
    assert recorded(measuring) == Waiting(
        "eu", "prod-eu/web: waiting for wave eu: analysis ... (1/3)"
    )
    opened = {("prod-eu", "web"): SeenRecord(replace(status, version="6.6.0", extra={}), T0)}
    assert recorded(opened) == Open("eu")
    # later waves: halted by eu's record, else the status gate's answer stands
    assert isinstance(recorded(halted_record(look(0, rate=0.08) + look(1, rate=0.09)), 2), Halted)
    assert recorded({}, 2) == Open("rest")
    assert recorded({}, 0) == Open("canary")
    waiting = Waiting("eu", "waiting for wave canary: ...")
    assert as_recorded(WAVES, 1, "podinfo", "6.6.0", INSTANCES, {}, fresh, waiting) is waiting
