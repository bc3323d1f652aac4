"""The index's pipeline view from hand-made values: columns, cards, soak, halts, escaping."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

from reconciler.daemon.status_site import pipeline_of
from reconciler.model.status import Phase
from reconciler.model.waves import SeenRecord, Wave, Waves
from reconciler.status.report import (
    CSP,
    ClusterReport,
    Pipeline,
    PipelineCard,
    PipelineWave,
    Soak,
    index_page,
)
from reconciler.waves import wave_board
from tests.report.conftest import EVIL_MESSAGE, EVIL_NAME, record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def render(pipelines: list[Pipeline], reports: list[ClusterReport] | None = None) -> str:
    return index_page(reports or [], title="t", source="", generated="", pipelines=pipelines)


def test_no_pipeline_no_section() -> None:
    assert 'id="pipelines"' not in render([])


def test_waves_are_columns_in_order_and_clusters_are_cards() -> None:
    pipeline = Pipeline(
        "podinfo",
        "6.6.0",
        (
            PipelineWave(
                "canary",
                "open",
                "wave canary is the first",
                cards=(
                    PipelineCard(
                        "staging",
                        "web",
                        "6.6.0",
                        "Ready",
                        "",
                        "2026-01-01T00:00:00Z",
                        Soak(720, 3600, "eu"),
                    ),
                ),
            ),
            PipelineWave(
                "eu",
                "waiting",
                "waiting for wave canary: staging/web 6.6.0 Ready for 12m of 1h",
                soak="1h",
                approval=True,
            ),
            PipelineWave(
                "rest",
                "waiting",
                "waiting",
                soak="30m",
                max_failures=1,
                cards=(PipelineCard("prod-us", "web", None),),
            ),
        ),
    )
    page = render(
        [pipeline],
        [ClusterReport("prod-us", "status/prod-us", "c" * 40, {"web": record("prod-us", "web")})],
    )
    waves = re.findall(r'<li class="wave gate-(\w+)" data-wave="([^"]+)"', page)
    assert waves == [("open", "canary"), ("waiting", "eu"), ("waiting", "rest")]
    assert "soak 1h, approval required" in page and "soak 30m, maxFailures 1" in page
    assert "no instance of the app: passed through" in page  # eu has no card
    # the soak is a progress element (no script), its text says the same
    assert '<progress max="3600" value="720">Ready 12m of 1h</progress>' in page
    # a card links to an instance page only when the site has it (prod-us/web here)
    assert '<div class="card phase-ready" data-cluster="staging"' in page
    assert re.search(r'<a class="card" data-cluster="prod-us"[^>]*href="prod-us/web.html"', page)
    assert "no record yet" in page


def test_a_halted_wave_is_red_and_names_who_failed() -> None:
    pipeline = Pipeline(
        "podinfo",
        "6.7.0",
        (
            PipelineWave(
                "canary",
                "open",
                "first",
                cards=(PipelineCard("staging", "web", "6.7.0", "Failed", "HealthCheckFailed"),),
            ),
            PipelineWave(
                "eu",
                "halted",
                "halted: podinfo 6.7.0 failed in earlier waves on staging/web (1 > maxFailures 0)",
            ),
        ),
    )
    assert pipeline.halted
    page = render([pipeline])
    assert '<span class="badge halt">halted</span>' in page
    assert re.search(r'<li class="wave gate-halted" data-wave="eu" data-gate="halted">', page)
    assert "li.gate-halted{--strong:#a40e26;border:2px solid #a40e26;background:#ffcecb}" in page
    assert 'class="card phase-failed"' in page


def test_values_from_git_are_text() -> None:
    pipeline = Pipeline(
        EVIL_NAME,
        "1.0<br>",
        (
            PipelineWave(
                EVIL_NAME,
                "open",
                EVIL_MESSAGE,
                soak=EVIL_NAME,
                cards=(PipelineCard(EVIL_NAME, EVIL_NAME, EVIL_NAME, "Ready", EVIL_MESSAGE),),
            ),
        ),
    )
    page = render([pipeline])
    assert "<script" not in page and "<img" not in page and "<br>" not in page
    assert html.escape(CSP) in page and "script-src" not in CSP


def test_pipeline_of_measures_each_card_against_the_next_waves_soak() -> None:
    waves = Waves(
        waves=(
            Wave("canary", names=("staging",)),
            Wave("eu", names=("prod-eu",), soak=3600, soak_text="1h"),
            Wave("rest", names=("*",)),
        ),
        members={"staging": 0, "prod-eu": 1, "prod-us": 2},
    )
    instances = {"staging": ["web"], "prod-eu": ["web"], "prod-us": ["web"]}
    records = {
        ("staging", "web"): SeenRecord(record("staging", "web", version="6.6.0"), T0),
        ("prod-eu", "web"): SeenRecord(
            record(
                "prod-eu",
                "web",
                version="6.5.0",
                desired_version="6.6.0",
                phase=Phase.PROGRESSING,
                reason="WaitingForWave",
            ),
            T0,
        ),
        # a record whose time is not known (a hand-made commit): no soak, no date
        ("prod-us", "web"): SeenRecord(
            record("prod-us", "web", version="6.6.0"), datetime.max.replace(tzinfo=UTC)
        ),
    }
    now = T0 + timedelta(minutes=12)
    board = wave_board(waves, "podinfo", "6.6.0", instances, records, lambda *_: True, now)
    pipeline = pipeline_of("podinfo", "6.6.0", board, now)
    assert [w.state for w in pipeline.waves] == ["open", "waiting", "waiting"]
    staging, eu, us = (w.cards[0] for w in pipeline.waves)
    assert staging.soak == Soak(720.0, 3600, "eu") and staging.soak.label == "Ready 12m of 1h"
    assert staging.since == "2026-01-01T00:00:00Z"
    assert eu.soak is None and (eu.version, eu.reason) == ("6.5.0", "WaitingForWave")
    assert us.soak is None and us.since == ""  # the last wave: nothing after it to soak for
    assert Soak(5000, 3600, "eu").label == "Ready 1h of 1h" and Soak(5000, 3600, "eu").done
