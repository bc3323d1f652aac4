"""Batches decided by a real Prometheus (SPEC section 4c): the daemon's scenarios.

The exporter serves web's error ratio per version; a real Prometheus scrapes it every
second; the daemon's passes measure each batch after it is ready (one measurement
per look, ``interval`` apart, never sleeping in a pass) and the rollout goes on,
fails, or holds from what Prometheus answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime

import pytest

from reconciler.analysis.local import Exporter, LocalPrometheus, free_port
from reconciler.cli import main
from reconciler.daemon.loop import Daemon, PassOutcome
from reconciler.model.analysis import FAILED, INCONCLUSIVE, PASSED
from reconciler.model.status import Phase
from tests.analysis.conftest import wait_for_value
from tests.daemon.conftest import World, next_look, sandbox_of, world
from tests.daemon.test_pass import CHANNELS
from tests.rollout.test_daemon_rollout import WEB, _web

__all__ = ["world"]  # the daemon tests' fixture: a catalog repository and a sandbox

RATIO = 'http_error_ratio{{series="{series}",version="${{rollout.to}}"}}'


def analysed(address: str, series: str, *, extra: str = "", query: str = RATIO) -> str:
    """web's instance file: [1, 50%, 50%] on 5 replicas, each batch measured twice."""
    address = f"      address: {address}\n" if address else ""
    return WEB.format(
        extra=f"""\
  onFailure: rollback
{extra}  analysis:
    prometheus:
{address}      interval: 1s
      count: 2
      inconclusiveLimit: 1
      queries:
        - name: error-rate
          query: '{query.format(series=series)}'
          successCondition: "< 0.05"
"""
    )


def _release(world: World, instance: str) -> None:
    world.commit("clusters/prod/instances/web.yaml", instance, "web: batches, analysed")
    assert _web(world.daemon.run_pass()).phase is Phase.READY  # a first install: no analysis
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")


def _roll(
    daemon: Daemon, each: Callable[[PassOutcome], None] | None = None, limit: float = 120.0
) -> list[PassOutcome]:
    """Passes as the service schedules them (at the next look, or once the sandbox has
    come to rest: ``next_look``) until web is no longer Progressing, within a generous
    bound."""
    outcomes: list[PassOutcome] = []
    deadline = time.monotonic() + limit
    sandbox = sandbox_of(daemon)
    while time.monotonic() < deadline:
        since = sandbox.resource_version() if sandbox is not None else 0
        outcome = daemon.run_pass()
        outcomes.append(outcome)
        if each is not None:
            each(outcome)
        if _web(outcome).phase is not Phase.PROGRESSING:
            return outcomes
        next_look(sandbox, since, outcome.report.next_look if outcome.report else None)
    raise AssertionError(f"web still progressing after {limit}s")


def _subjects(outcomes: list[PassOutcome]) -> list[str]:
    return [c.subject for o in outcomes for c in o.commits if c.instance == "web"]


@pytest.mark.slow
def test_a_healthy_release_passes_every_batch_with_its_values_recorded(
    world: World,
    prometheus: LocalPrometheus,
    exporter: Exporter,
    series: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    exporter.serve({"series": series, "version": "6.6.0"}, error_rate=0.002)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}"}}')
    _release(world, analysed(prometheus.url, series))
    outcomes = _roll(world.daemon)
    web = _web(outcomes[-1])
    assert web.phase is Phase.READY and web.version == "6.6.0"
    assert web.rollout is not None
    recorded = [(m.batch, m.name, m.value, m.ok, m.result) for m in web.rollout.analysis]
    assert recorded == [(b, "error-rate", 0.002, True, PASSED) for b in (1, 1, 2, 2, 3, 3)]
    # a look measures only when ``interval`` has passed since the batch's last one
    pairs = zip(web.rollout.analysis[::2], web.rollout.analysis[1::2], strict=True)
    for first, second in pairs:
        assert _seconds(second.at) - _seconds(first.at) >= 1.0
    subjects = _subjects(outcomes)
    for k in (1, 2, 3):
        assert any(f"batch {k}/3 verified: error-rate 0.002 < 0.05 (2/2)" in s for s in subjects), (
            subjects
        )
    data = web.rollout.to_dict()["analysis"][0]
    assert set(data) >= {"batch", "name", "value", "ok", "at"}
    metrics = world.daemon.metrics.render().decode()
    assert 'reconciler_analysis_measurements_total{result="passed"} 6.0' in metrics
    assert 'reconciler_analysis_measurements_total{result="failed"} 0.0' in metrics
    assert 'reconciler_analysis_measurements_total{result="inconclusive"} 0.0' in metrics
    capsys.readouterr()
    assert main(["rollout", "status", "web", "--cluster", "prod", "--repo", world.repo.url]) == 0
    shown = capsys.readouterr().out
    assert shown.count("analysis: error-rate 0.002 < 0.05 (2/2)") == 3, shown


@pytest.mark.slow
def test_an_error_spike_at_batch_2_fails_the_batch_and_rolls_back(
    world: World, prometheus: LocalPrometheus, exporter: Exporter, series: str
) -> None:
    labels = {"series": series, "version": "6.6.0"}
    exporter.serve(labels, error_rate=0.002)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}"}}')
    _release(world, analysed(prometheus.url, series))
    spiked: list[bool] = []

    def spike_at_batch_2(outcome: PassOutcome) -> None:
        web = _web(outcome)
        if not spiked and web.rollout is not None and web.rollout.batch >= 2:
            exporter.serve(labels, error_rate=0.08)  # 8% of requests fail from now on
            wait_for_value(prometheus, f'http_error_ratio{{series="{series}"}}', want=0.08)
            spiked.append(True)

    outcomes = _roll(world.daemon, spike_at_batch_2)
    web = _web(outcomes[-1])
    assert web.phase is Phase.STALLED and web.reason == "RolledBack"
    assert web.version == "6.5.0" and web.rollout is not None and web.rollout.batch == 2
    batch1 = [m for m in web.rollout.analysis if m.batch == 1]
    assert [(m.value, m.result) for m in batch1] == [(0.002, PASSED), (0.002, PASSED)]
    assert [(m.batch, m.value, m.result) for m in web.rollout.analysis if m.batch == 2] == [
        (2, 0.08, FAILED)
    ]
    why = "analysis: error-rate 0.08 not < 0.05, 1/1 failed"
    assert web.message.endswith(why)
    subjects = _subjects(outcomes)
    assert any("batch 1/3 verified: error-rate 0.002 < 0.05 (2/2)" in s for s in subjects)
    assert any(s.endswith(f"rolled back at batch 2/3: {why}") for s in subjects), subjects


def test_a_query_with_no_data_holds_as_analysis_inconclusive(
    world: World, prometheus: LocalPrometheus, series: str
) -> None:
    """No series for the new version: inconclusive; beyond ``inconclusiveLimit`` (1 here)
    the rollout holds where it is, neither forward nor back."""
    _release(world, analysed(prometheus.url, series, extra="  healthTimeoutSeconds: 120\n"))
    outcomes = _roll(world.daemon)
    web = _web(outcomes[-1])
    assert web.phase is Phase.STALLED and web.reason == "AnalysisInconclusive"
    assert web.version == "6.5.0" and web.rollout is not None
    assert (web.rollout.batch, str(web.rollout.state)) == (1, "rolloutFailed")
    assert [(m.result, m.reason) for m in web.rollout.analysis] == [(INCONCLUSIVE, "no data")] * 2
    assert web.message.endswith("analysis inconclusive: error-rate no data, 2/2; holding")
    again = world.daemon.run_pass()
    assert _web(again).reason == "AnalysisInconclusive" and again.commits == []
    assert web.rollout.replicas.updated == 1  # batch 1's replica, held


@pytest.mark.slow
def test_an_unreachable_prometheus_holds_and_never_rolls_forward(world: World, series: str) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    _release(world, analysed(nowhere, series, extra="  healthTimeoutSeconds: 120\n"))
    outcomes = _roll(world.daemon)
    web = _web(outcomes[-1])
    assert web.phase is Phase.STALLED and web.reason == "AnalysisInconclusive"
    assert web.rollout is not None and web.rollout.batch == 1
    assert all(
        _web(o).rollout is None or _web(o).rollout.batch <= 1  # type: ignore[union-attr]
        for o in outcomes
    )
    assert web.version == "6.5.0"  # not rolled back either: the release was not judged
    assert [(m.result, m.reason) for m in web.rollout.analysis] == [
        (INCONCLUSIVE, "prometheus unreachable: connection refused")
    ] * 2


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_rollout_analyze_runs_the_queries_once_for_the_next_or_current_rollout(
    world: World,
    prometheus: LocalPrometheus,
    exporter: Exporter,
    series: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    labels = {"series": series, "version": "6.6.0"}
    exporter.serve(labels, error_rate=0.002)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}"}}')
    _release(world, analysed("", series))  # no address: --prometheus-url says where
    repos = ["--repo", str(world.repo.work), "--status-repo", world.repo.url]
    argv = ["rollout", "analyze", "web", "--cluster", "prod", *repos]
    capsys.readouterr()
    assert main([*argv, "--prometheus-url", prometheus.url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "prod/web: podinfo 6.5.0 -> 6.6.0, batch 1, the next rollout"
    assert out[1].split() == ["QUERY", "VALUE", "CONDITION", "RESULT"]
    assert out[2].split() == ["error-rate", "0.002", "<", "0.05", "passed"]

    exporter.serve(labels, error_rate=0.08)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}"}}', want=0.08)
    assert main([*argv, "--prometheus-url", prometheus.url, "-o", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["from"], data["to"], data["batch"]) == ("6.5.0", "6.6.0", 1)
    (measured,) = data["measurements"]
    assert (measured["value"], measured["ok"], measured["result"]) == (0.08, False, "failed")

    assert main(argv) == 1  # no address anywhere: inconclusive, saying so
    assert "no Prometheus address" in capsys.readouterr().out
    started = _web(world.daemon.run_pass())  # the rollout starts: it is in flight now
    assert started.rollout is not None and not started.rollout.state.terminal
    assert main([*argv, "--prometheus-url", prometheus.url]) == 1
    assert capsys.readouterr().out.startswith(
        "prod/web: podinfo 6.5.0 -> 6.6.0, batch 1, in flight"
    )
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "no analysis")
    assert main([*argv, "--prometheus-url", prometheus.url]) == 2
    assert "has no rollout.analysis.prometheus" in capsys.readouterr().err


@pytest.mark.slow
def test_a_restarted_daemon_goes_on_from_the_last_committed_record(
    world: World, prometheus: LocalPrometheus, exporter: Exporter, series: str
) -> None:
    """Killed between two looks of batch 2: the new daemon reads the record from Git (batch
    1 verified, its values), measures batch 2 again and finishes; nothing is undone."""
    exporter.serve({"series": series, "version": "6.6.0"}, error_rate=0.002)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}"}}')
    _release(world, analysed(prometheus.url, series))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        web = _web(world.daemon.run_pass())
        if web.rollout is not None and web.rollout.measured(2):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("batch 2 was never measured")
    restarted = world.new_daemon()
    web = _web(_roll(restarted)[-1])
    assert web.phase is Phase.READY and web.version == "6.6.0" and web.rollout is not None
    assert [m.batch for m in web.rollout.analysis] == [1, 1, 2, 2, 3, 3]
    assert all(m.ok for m in web.rollout.analysis)
