"""The daemon's ``/ui``: its own status branch as pages, rebuilt only when the branch moved."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from reconciler.daemon.status_site import StatusPages, read_report
from reconciler.source.ledger import StatusLedger
from reconciler.status.report import build_site
from tests.daemon.conftest import World, world  # noqa: F401
from tests.daemon.test_service import eventually, running
from tests.report.conftest import FAST, record, serving
from tests.source.servers import git

STAMP = "2026-01-01T00:00:00Z"


def test_pages_are_cached_per_branch_head_and_follow_new_records(
    remotes: Path, tmp_path: Path
) -> None:
    bare = remotes / "status.git"
    git(remotes, "init", "-q", "--bare", str(bare))
    ledger = StatusLedger(bare.as_uri(), "prod", policy=FAST)
    pages = StatusPages(ledger, clock=lambda: STAMP)
    assert "no branch status/prod yet" in (pages.page("") or "")
    ledger.record([record("prod", "web")])
    first = pages.page("index.html") or ""
    assert 'data-instance="web"' in first and pages.renders == 2
    # the same pages as `reconciler report` writes for this cluster
    site = build_site(
        [read_report(ledger)], title=pages.title, source=ledger.display, generated=STAMP
    )
    assert set(site) == {"index.html", "prod/web.html"}
    assert pages.page("prod/web.html") == site["prod/web.html"]
    assert first == site["index.html"]
    assert pages.page("") == first and pages.renders == 2  # same head: no Git log, no render
    assert pages.page("prod/nope.html") is None
    ledger.record([record("prod", "web", version="6.6.0", desired_version="6.6.0")])
    assert '<span class="ver">6.6.0</span>' in (pages.page("") or "")
    assert pages.renders == 3


def test_ui_routes_answer_html_with_a_policy_and_json_errors(remotes: Path) -> None:
    bare = remotes / "status.git"
    git(remotes, "init", "-q", "--bare", str(bare))
    StatusLedger(bare.as_uri(), "prod", policy=FAST).record([record("prod", "web")])
    pages = StatusPages(StatusLedger(bare.as_uri(), "prod", policy=FAST))
    with serving(pages) as base:
        with urllib.request.urlopen(f"{base}/ui/prod/web.html", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/html")
            assert "default-src 'none'" in response.headers["Content-Security-Policy"]
            assert response.headers["X-Content-Type-Options"] == "nosniff"
        try:
            urllib.request.urlopen(f"{base}/ui/prod/nope.html", timeout=10)
            raise AssertionError("expected 404")
        except urllib.error.HTTPError as e:
            assert e.code == 404 and "error" in json.loads(e.read())


def test_running_daemon_serves_its_status_at_ui(world: World) -> None:  # noqa: F811
    daemon = world.new_daemon(interval=3600.0, drift_interval=3600.0, metrics_address="127.0.0.1:0")
    with running(daemon) as service:

        def shows_web() -> bool:
            if not service.http_port:
                return False  # still starting
            url = f"http://127.0.0.1:{service.http_port}/ui/"
            with urllib.request.urlopen(url, timeout=10) as response:
                return 'data-instance="web"' in response.read().decode()

        eventually(shows_web)
