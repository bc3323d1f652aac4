"""The daemon's side of a wave's analysis: when it asks, what the record keeps, who shares.

No Prometheus here: without an address every query is an inconclusive measurement that
says so (``daemon.analysing.measure_now``), which is enough to see when the analyst asks
and what it keeps. ``tests/analysis/test_wave_analysis.py`` runs a real Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from reconciler.daemon.waveanalysing import WaveAnalysed, WaveAnalyst
from reconciler.model.analysis import INCONCLUSIVE
from reconciler.model.catalog import Instance
from reconciler.model.status import InstanceStatus, Phase
from reconciler.model.waveanalysis import WAVE_KEY, WaveAnalysisRecord, settings_digest
from reconciler.waves import Decision, Halted, Open, Waiting
from tests.waves.test_wave_analysis import ANALYSIS, T0, WAVES, look

WEB = Instance("web", "prod-eu", "podinfo", "web")
API = Instance("api", "prod-eu", "podinfo", "web")
RELEASE = "r" * 40


def analyse(
    analyst: WaveAnalyst,
    previous: InstanceStatus | None = None,
    *,
    instance: Instance = WEB,
    proven: Decision | None = None,
    measures: bool = True,
) -> WaveAnalysed:
    return analyst.analyse(
        WAVES,
        1,
        instance,
        "6.6.0",
        RELEASE,
        proven if proven is not None else Open("eu"),
        previous,
        measures=measures,
    )


def record_of(block: Mapping[str, object]) -> InstanceStatus:
    return InstanceStatus(
        "prod-eu", "web", "podinfo", Phase.PROGRESSING, "6.5.0", extra={WAVE_KEY: block}
    )


def test_a_due_measurement_is_asked_once_per_pass_and_kept() -> None:
    analyst = WaveAnalyst("", T0)
    first = analyse(analyst)
    assert isinstance(first.decision, Waiting) and first.record is not None
    assert first.decision.message == (
        "waiting for wave eu: analysis error-rate inconclusive (no Prometheus address: set "
        "rollout.analysis.prometheus.address or run --prometheus-url), latency inconclusive "
        "(no Prometheus address: set rollout.analysis.prometheus.address or run "
        "--prometheus-url) (1/3)"
    )
    block = first.record
    assert (block.wave, block.version, block.release) == ("eu", "6.6.0", RELEASE)
    assert block.settings == settings_digest(ANALYSIS)
    assert [m.result for m in first.measured] == [INCONCLUSIVE, INCONCLUSIVE]
    assert first.next_look == 60
    # another instance asking the same queries this pass shares the measurement
    same = analyse(analyst, instance=Instance("web", "prod-eu", "podinfo", "web"))
    assert same.measured == () and same.record == block
    # api's placeholders differ (${instance.name}): its queries are asked for it
    assert len(analyse(analyst, instance=API).measured) == 2


def test_it_goes_on_from_the_record_and_measures_when_due() -> None:
    block = WaveAnalysisRecord(
        "eu", "6.6.0", RELEASE, settings_digest(ANALYSIS), tuple(look(0))
    ).to_dict()
    early = analyse(WaveAnalyst("", T0 + timedelta(seconds=20)), record_of(block))
    assert isinstance(early.decision, Waiting) and early.measured == ()
    assert early.next_look == 40 and len(kept(early).measurements) == 2
    due = analyse(WaveAnalyst("", T0 + timedelta(minutes=1)), record_of(block))
    assert len(kept(due).measurements) == 4 and len(due.measured) == 2
    # a block of another release (or version, or settings) is not counted
    other = analyse(
        WaveAnalyst("", T0 + timedelta(seconds=20)), record_of({**block, "release": "x"})
    )
    assert len(kept(other).measurements) == 2 and len(other.measured) == 2


def kept(result: WaveAnalysed) -> WaveAnalysisRecord:
    assert result.record is not None
    return result.record


def test_another_replicas_instance_is_judged_but_never_measured() -> None:
    judged = analyse(WaveAnalyst("", T0), measures=False)
    assert judged.decision == Waiting("eu", "waiting for wave eu: analysis due")
    assert judged.record is None and judged.measured == ()


def test_a_gate_that_is_not_open_by_status_measures_nothing() -> None:
    for proven in (Waiting("eu", "waiting for wave canary: ..."), Halted("eu", "halted: ...")):
        result = analyse(WaveAnalyst("", T0), proven=proven)
        assert result.decision is proven and result.record is None
    plain = WaveAnalyst("", T0).analyse(WAVES, 2, WEB, "6.6.0", RELEASE, Open("rest"), None)
    assert plain.decision == Open("rest") and plain.record is None
