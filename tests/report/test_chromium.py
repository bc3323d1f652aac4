"""The status page in a real browser: Debian's headless Chromium, from a file and from /ui.

Chromium parses the pages as a user's browser would: the DOM it dumps is what the
page became (a broken table or an unclosed tag shows there, not in our strings),
and its screenshot is kept in the test's tmp directory for a person to look at.
"""

from __future__ import annotations

import re
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.daemon.status_site import UI_REFRESH, StatusPages
from reconciler.source.ledger import StatusLedger
from reconciler.status.report import HALT_COLOURS, PHASE_COLOURS, PageOptions, instance_page
from tests.daemon.conftest import sandbox_world
from tests.daemon.test_waves import CLUSTERS, T0, Fleet, bad_release
from tests.daemon.test_waves import files as wave_files
from tests.report.chromium import ensure_chromium, headless, png_colours, rgb
from tests.report.conftest import FAST, serving

PNG = b"\x89PNG\r\n\x1a\n"
# two browser runs each (about 1 s apiece on an idle machine, several under load)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def chromium() -> Path:
    return ensure_chromium()


def load(chromium: Path, tmp_path: Path, url: str, name: str) -> str:
    """The DOM Chromium built from ``url``, and a screenshot at ``tmp_path/name`` (one run)."""
    shot = tmp_path / name
    dom = headless(chromium, tmp_path / "profile", url, f"--screenshot={shot}", "--dump-dom")
    assert shot.read_bytes().startswith(PNG) and shot.stat().st_size > 10_000
    print(f"screenshot of {url}: {shot}")  # shown with -s / -rA; kept in pytest's tmp dir
    return dom


def matrix_cells(dom: str) -> dict[tuple[str, str], str]:
    """(cluster, instance) -> version, from the matrix links as Chromium built them."""
    cells = {}
    for td in re.findall(r'<td data-cluster="([^"]+)"><div class="cell">(.*?)</div></td>', dom):
        for instance, version in re.findall(
            r'data-instance="([^"]+)"[^>]*><span class="ver">([^<]+)</span>', td[1]
        ):
            cells[(td[0], instance)] = version
    return cells


def test_static_report_renders_in_chromium(
    chromium: Path, status_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    assert main(["report", "--repo", status_remote.as_uri(), "--html", str(site)]) == 1
    capsys.readouterr()
    dom = load(chromium, tmp_path, (site / "index.html").as_uri(), "report.png")
    cells = matrix_cells(dom)
    assert cells[("prod", "web")] == "6.6.0"
    assert cells[("prod", "api")] == "6.5.0"
    assert cells[("staging", "web")] == "6.7.0"
    assert "<script" not in dom and "<img" not in dom  # the markup in names stayed text
    # the cells are painted in their phase's colour: Ready, Progressing, Failed fills
    painted = png_colours(tmp_path / "report.png")
    for phase in ("Ready", "Progressing", "Failed"):
        assert rgb(PHASE_COLOURS[phase][1]) in painted, phase
    page = load(chromium, tmp_path, (site / instance_page("prod", "web")).as_uri(), "web.png")
    timeline = re.search(r'<ol class="timeline" id="timeline">(.*?)</ol>', page)
    assert timeline is not None
    versions = re.findall(r'data-version="([^"]+)"', timeline.group(1))
    assert versions == ["6.5.0", "6.6.0"]
    batches = re.findall(r'<li class="([a-z-]+)" data-batch="(\d)"', page)
    assert batches == [("done", "1"), ("waiting", "2"), ("pending", "3")]
    assert "waitingForPromotion" not in page and "waiting for promotion" in page
    # the front page: what needs a person, and the command to run, before the matrix
    attention = re.search(r'<table class="grid" id="attention">(.*?)</table>', dom)
    assert attention is not None and dom.index('id="attention"') < dom.index('id="matrix"')
    assert "reconciler rollout promote web --cluster prod --repo " in attention.group(1)
    channels = re.search(r'<table class="grid" id="channels">(.*?)</table>', dom)
    assert channels is not None and "newer version available" in channels.group(1)
    assert 'http-equiv="refresh"' not in dom  # a static report does not reload itself
    with capsys.disabled():
        print(f"\nstatus page screenshots: {tmp_path / 'report.png'}, {tmp_path / 'web.png'}")


def test_daemon_serves_the_same_page_at_ui(
    chromium: Path, status_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = StatusLedger(status_remote.as_uri(), "prod", policy=FAST)
    ledger.snapshot()  # the daemon's mirror, as its first pass leaves it
    forge = "https://github.com/org/catalog/commit/"
    pages = StatusPages(ledger, options=PageOptions(commit_url=forge, refresh=UI_REFRESH))
    with serving(pages) as base:
        url = f"{base}/ui"
        with urllib.request.urlopen(url, timeout=10) as response:  # redirected to /ui/
            assert response.url.endswith("/ui/")
            assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
        dom = load(chromium, tmp_path, url, "ui.png")
        cells = matrix_cells(dom)
        assert cells[("prod", "web")] == "6.6.0" and cells[("prod", "api")] == "6.5.0"
        assert {cluster for cluster, _ in cells} == {"prod"}  # the daemon shows its own cluster
        assert f'<meta http-equiv="refresh" content="{UI_REFRESH}">' in dom
        assert re.search(rf'<a class="commit" href="{forge}[0-9a-f]{{40}}">[0-9a-f]{{12}}</a>', dom)
        assert 'id="attention"' in dom and 'id="channels"' in dom
        page = load(chromium, tmp_path, f"{url}/{instance_page('prod', 'web')}", "ui-web.png")
        assert re.findall(r'<li class="phase-\w+" data-version="([^"]+)"', page) == [
            "6.5.0",
            "6.6.0",
        ]
    with capsys.disabled():
        print(f"\n/ui screenshots: {tmp_path / 'ui.png'}, {tmp_path / 'ui-web.png'}")


def test_pipeline_view_at_ui_and_in_the_report(
    chromium: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three clusters' daemons (tests/daemon/test_waves.py): a good release mid-soak as
    prod-us's /ui draws it, then a bad release halted as ``reconciler report`` draws it."""
    with sandbox_world(tmp_path, wave_files(), cluster="staging") as world:
        fleet = Fleet(world, tmp_path)
        for cluster in CLUSTERS:
            fleet.settle(cluster)
        fleet.release("6.6.0")
        fleet.settle("staging")
        fleet.approve("6.6.0")
        fleet.settle("prod-eu")
        fleet.now = T0 + timedelta(minutes=12)
        fleet.run("prod-us")  # waits for eu's soak
        daemon = fleet.daemon("prod-us")
        pages = StatusPages(daemon.ledger, pipelines=daemon.wave_pipelines)
        with serving(pages) as base:
            dom = load(chromium, tmp_path, f"{base}/ui/", "ui-waves.png")
        assert pipeline_gates(dom) == [("canary", "open"), ("eu", "open"), ("rest", "waiting")]
        cards = pipeline_cards(dom)
        assert cards == {
            "staging/web": ("6.6.0", "Ready"),
            "prod-eu/web": ("6.6.0", "Ready"),
            "prod-us/web": ("6.5.0", "Progressing"),
        }
        # prod-eu's soak toward wave rest's 1h, as a progress bar (no script)
        assert '<progress max="3600" value="720">Ready 12m of 1h</progress>' in dom
        assert "waiting for wave eu: prod-eu/web 6.6.0 Ready for 12m of 1h" in dom

        bad_release(fleet)
        fleet.approve("6.7.0")
        for cluster in ("prod-eu", "prod-us"):
            fleet.run(cluster)
        site = tmp_path / "site"
        capsys.readouterr()
        assert main(["report", "--repo", world.repo.url, "--html", str(site)]) == 0
        assert "no wave pipelines" not in capsys.readouterr().err
        dom = load(chromium, tmp_path, (site / "index.html").as_uri(), "report-waves.png")
    assert pipeline_gates(dom) == [("canary", "open"), ("eu", "halted"), ("rest", "halted")]
    assert pipeline_cards(dom) == {
        "staging/web": ("6.7.0", "Failed"),
        "prod-eu/web": ("6.6.0", "Stalled"),
        "prod-us/web": ("6.5.0", "Stalled"),  # it never finished waiting for 6.6.0's soak
    }
    assert "halted: podinfo 6.7.0 failed in earlier waves on staging/web" in dom
    assert rgb(HALT_COLOURS[1]) in png_colours(tmp_path / "report-waves.png")  # drawn red
    assert "<script" not in dom
    with capsys.disabled():
        print(
            f"\npipeline screenshots: {tmp_path / 'ui-waves.png'}, {tmp_path / 'report-waves.png'}"
        )


def pipeline_gates(dom: str) -> list[tuple[str, str]]:
    return re.findall(r'<li class="wave gate-\w+" data-wave="([^"]+)" data-gate="(\w+)">', dom)


def pipeline_cards(dom: str) -> dict[str, tuple[str, str]]:
    found = re.findall(
        r'class="card[^"]*" data-cluster="([^"]+)" data-instance="([^"]+)" '
        r'data-version="([^"]*)" data-phase="([^"]*)"',
        dom,
    )
    return {f"{c}/{i}": (v, p) for c, i, v, p in found}
