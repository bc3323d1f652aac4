"""A wave measured by a real Prometheus before it opens: three clusters' daemons, real Git.

The exporter serves each cluster's error ratio (labelled ``cluster``); a real Prometheus
scrapes it every second. Wave ``eu`` measures the earlier waves' clusters
(``${wave.clusters}``: staging) once they run the version Ready. The daemons' clock is
injected (``Fleet.now``), so ``interval`` passes without sleeping; only Prometheus's
first scrape is waited for, with a generous bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import git
import pytest

from reconciler.analysis.local import Exporter, LocalPrometheus, free_port
from reconciler.catalog import load_catalog
from reconciler.commands.waves import fleet_board
from reconciler.model.analysis import INCONCLUSIVE, PASSED
from reconciler.model.status import Phase
from reconciler.model.waveanalysis import WAVE_KEY, read_wave_record
from tests.analysis.conftest import wait_for_value
from tests.daemon.conftest import sandbox_world
from tests.daemon.test_waves import CLUSTERS, T0, Fleet, files, web

WAVES = """\
apiVersion: reconciler/v1
kind: Waves
waves:
  - name: canary
    clusters: [staging]
  - name: eu
    clusters: [prod-eu]
    analysis:
      prometheus:
        interval: 1m
        count: 3
        inconclusiveLimit: 0
        queries:
          - name: error-rate
            query: 'max(http_error_ratio{{series="{series}",cluster=~"${{wave.clusters}}",version="${{version}}"}})'
            successCondition: "< 0.01"
  - name: rest
    clusters: ["*"]
"""


@contextmanager
def analysed_fleet(tmp_path: Path, series: str, prometheus_url: str) -> Iterator[Fleet]:
    """Three clusters on 6.5.0, then 6.6.0 released and Ready in the canary (staging)."""
    catalog = {**files(), "waves.yaml": WAVES.format(series=series)}
    with sandbox_world(
        tmp_path, catalog, cluster="staging", prometheus_url=prometheus_url
    ) as world:
        fleet = Fleet(world, tmp_path)
        for cluster in CLUSTERS:  # first installs are never held
            fleet.settle(cluster)
            assert fleet.record(cluster).version == "6.5.0"
        fleet.release("6.6.0")
        assert web(fleet.settle("staging")).version == "6.6.0"
        yield fleet


@pytest.fixture
def healthy(
    tmp_path: Path, prometheus: LocalPrometheus, exporter: Exporter, series: str
) -> Iterator[tuple[Fleet, Exporter, str]]:
    exporter.serve({"series": series, "cluster": "staging", "version": "6.6.0"}, error_rate=0.002)
    # another cluster's errors are not the earlier waves': the query never sees them
    exporter.serve({"series": series, "cluster": "prod-us", "version": "6.6.0"}, error_rate=0.5)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}",cluster="staging"}}')
    with analysed_fleet(tmp_path, series, prometheus.url) as fleet:
        yield fleet, exporter, series


def board(fleet: Fleet) -> list[tuple[str, str]]:
    """``wave status`` at the daemons' time: each wave's gate and message."""
    catalog = load_catalog(fleet.world.repo.work)
    head = git.Repo(fleet.world.repo.work).head.commit.hexsha
    waves = fleet_board(catalog, str(fleet.world.repo.remote), "podinfo", None, head, now=fleet.now)
    return [(wave.state, wave.decision.message) for wave in waves]


@pytest.mark.slow
def test_a_healthy_fleet_opens_the_analysed_wave_after_its_measurements(
    healthy: tuple[Fleet, Exporter, str],
) -> None:
    fleet, _, _ = healthy
    first = fleet.run("prod-eu")
    eu = web(first)
    assert (eu.phase, eu.reason, eu.version, eu.desired_version) == (
        Phase.PROGRESSING,
        "WaitingForWave",
        "6.5.0",
        "6.6.0",
    )
    assert eu.message == "waiting for wave eu: analysis error-rate 0.002 < 0.01 (1/3)"
    block = read_wave_record(fleet.record("prod-eu").extra)  # committed to the status branch
    assert block is not None and (block.wave, block.version) == ("eu", "6.6.0")
    assert [(m.name, m.value, m.ok, m.result) for m in block.measurements] == [
        ("error-rate", 0.002, True, PASSED)
    ]
    assert set(fleet.record("prod-eu").to_dict()[WAVE_KEY]["analysis"][0]) >= {
        "name",
        "value",
        "ok",
        "at",
    }
    assert board(fleet) == [
        ("open", "wave canary is the first: podinfo 6.6.0 may start"),
        ("waiting", "prod-eu/web: waiting for wave eu: analysis error-rate 0.002 < 0.01 (1/3)"),
        ("waiting", "waiting for wave eu: prod-eu/web runs 6.5.0 (Progressing)"),
    ]
    # no interval yet: another look measures nothing and commits nothing
    assert fleet.run("prod-eu").commits == []
    # nor does a restarted daemon: it goes on from the record in Git
    fleet.now = T0 + timedelta(seconds=30)
    assert fleet.daemon("prod-eu", fresh=True).run_pass().commits == []

    fleet.now = T0 + timedelta(minutes=1)
    second = fleet.run("prod-eu")
    assert [c.subject for c in second.commits] == [
        "prod-eu/web: waiting for wave eu: analysis error-rate 0.002 < 0.01 (2/3)"
    ]
    # the later wave waits for eu to run it, not for eu's analysis
    us = web(fleet.run("prod-us"))
    assert us.reason == "WaitingForWave" and "prod-eu/web runs 6.5.0" in us.message

    fleet.now = T0 + timedelta(minutes=2)
    opened = web(fleet.settle("prod-eu"))
    assert (opened.phase, opened.version) == (Phase.READY, "6.6.0")
    assert WAVE_KEY not in fleet.record("prod-eu").extra
    metrics = fleet.daemon("prod-eu").metrics.render().decode()
    # the restarted daemon took the last two measurements
    assert 'reconciler_analysis_measurements_total{result="passed"} 2.0' in metrics
    assert web(fleet.settle("prod-us")).version == "6.6.0"


@pytest.mark.slow
def test_an_error_spike_in_the_earlier_wave_halts_the_release_there(
    healthy: tuple[Fleet, Exporter, str], prometheus: LocalPrometheus
) -> None:
    fleet, exporter, series = healthy
    assert web(fleet.run("prod-eu")).reason == "WaitingForWave"  # 1/3 passed
    staging = {"series": series, "cluster": "staging", "version": "6.6.0"}
    exporter.serve(staging, error_rate=0.08)  # 8% of staging's requests fail from now on
    wait_for_value(
        prometheus, f'http_error_ratio{{series="{series}",cluster="staging"}}', want=0.08
    )
    fleet.now = T0 + timedelta(minutes=1)
    spiked = fleet.run("prod-eu")
    eu = web(spiked)
    assert (eu.phase, eu.reason, eu.version) == (Phase.STALLED, "WaveHalted", "6.5.0")
    assert eu.message.startswith(
        "halted: the analysis of wave eu failed podinfo 6.6.0: error-rate 0.08 not < 0.01 "
        "(1/2 failed > failureLimit 0)"
    )
    assert len(spiked.commits) == 1 and "WaveHalted" in spiked.commits[0].subject
    # the later wave halts too, naming the query and its value
    us = web(fleet.run("prod-us"))
    assert (us.phase, us.reason, us.version) == (Phase.STALLED, "WaveHalted", "6.5.0")
    assert us.message.startswith(
        "halted: podinfo 6.6.0 failed the analysis of wave eu on prod-eu/web: error-rate 0.08 "
        "not < 0.01"
    )
    metrics = fleet.daemon("prod-us").metrics.render().decode()
    assert 'reconciler_wave_halts_total{app="podinfo",wave="rest"} 1.0' in metrics
    states = board(fleet)
    assert [state for state, _ in states] == ["open", "halted", "halted"]
    assert states[1][1].startswith(
        "halted: the analysis of wave eu failed podinfo 6.6.0 on prod-eu/web: error-rate 0.08"
    )
    # the halt stands: the errors going away later measures nothing more
    exporter.serve(staging, error_rate=0.0)
    fleet.now = T0 + timedelta(hours=2)
    again = fleet.daemon("prod-eu", fresh=True).run_pass()
    assert web(again).reason == "WaveHalted" and again.commits == []
    assert fleet.record("prod-eu").version == "6.5.0"
    # moving the channel back clears it
    fleet.release("6.5.0")
    assert web(fleet.settle("prod-eu")).phase is Phase.READY


@pytest.mark.slow
def test_an_unreachable_prometheus_holds_and_never_opens(tmp_path: Path, series: str) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with analysed_fleet(tmp_path, series, nowhere) as fleet:
        eu = web(fleet.run("prod-eu"))
        assert (eu.phase, eu.reason, eu.version) == (Phase.PROGRESSING, "WaitingForWave", "6.5.0")
        assert eu.message.startswith(
            "waiting for wave eu: analysis inconclusive: error-rate prometheus unreachable: "
            "connection refused, 1/1 > inconclusiveLimit 0; holding"
        )
        block = read_wave_record(fleet.record("prod-eu").extra)
        assert block is not None
        assert [m.result for m in block.measurements] == [INCONCLUSIVE]
        for hours in (1, 24):  # never opens, and asks no more
            fleet.now = T0 + timedelta(hours=hours)
            later = fleet.run("prod-eu")
            assert later.commits == [] and web(later).version == "6.5.0"
        assert fleet.record("prod-eu").version == "6.5.0"
        assert web(fleet.run("prod-us")).reason == "WaitingForWave"
