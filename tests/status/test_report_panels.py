"""The status page's front: problems with the next command, channels, commit links, refresh.

Also the wording bugs a newcomer met: "every replica runs to" (no version),
"1 replicas", and state names in camelCase.
"""

from __future__ import annotations

import re
from dataclasses import replace

from reconciler.model.rollout import RollingState
from reconciler.model.status import Phase
from reconciler.model.words import plural, readable
from reconciler.status.next_steps import next_command
from reconciler.status.report import INDEX, ClusterReport, PageOptions, build_site, instance_page
from tests.report.conftest import ROLLOUT, record
from tests.rollout.sim import Cluster
from tests.rollout.test_machine import run, settings_
from tests.status.test_report_html import parse

SHA = "0123456789abcdef0123456789abcdef01234567"


def reports() -> list[ClusterReport]:
    prod = {
        "web": record(
            "prod", "web", rollout=ROLLOUT, phase=Phase.PROGRESSING, reason="Progressing"
        ),
        "api": record(
            "prod",
            "api",
            phase=Phase.STALLED,
            reason="CatalogInvalid",
            message="clusters/prod/instances/api.yaml:3: invalid YAML",
        ),
        "docs": record("prod", "docs", source="exact", source_commit=SHA),
    }
    staging = {
        "web": record("staging", "web", version="6.6.0", desired_version="6.6.0"),
        "db": record("staging", "db", app="postgres", phase=Phase.FAILED, reason="MigrationFailed"),
    }
    return [
        ClusterReport("prod", "status/prod", SHA, prod),
        ClusterReport("staging", "status/staging", "f" * 40, staging),
    ]


def test_problems_panel_names_each_stalled_or_failed_instance_and_the_next_command() -> None:
    index = build_site(reports(), options=PageOptions(repo="https://git.example/catalog.git"))[
        INDEX
    ]
    assert not parse(index).errors
    panel = re.search(r'<table class="grid" id="attention">(.*?)</table>', index)
    assert panel is not None
    rows = re.findall(r'data-cluster="([^"]+)" data-instance="([^"]+)"', panel.group(1))
    assert rows == [("prod", "api"), ("prod", "web"), ("staging", "db")]
    text = panel.group(1)
    assert "catalog invalid" in text and "clusters/prod/instances/api.yaml:3" in text
    repo = "--repo https://git.example/catalog.git"
    assert f"reconciler rollout promote web --cluster prod {repo}" in text
    assert "reconciler validate --repo https://git.example/catalog.git" in text
    assert f"reconciler migrations --cluster staging {repo} db" in text
    # the panel comes before the matrix: the first thing on the page
    assert index.index('id="attention"') < index.index('id="matrix"')


def test_no_problem_no_panel() -> None:
    calm = [ClusterReport("prod", "status/prod", SHA, {"web": record("prod", "web")})]
    assert 'id="attention"' not in build_site(calm)[INDEX]


def test_channel_table_says_where_each_channel_points_and_who_runs_older() -> None:
    index = build_site(reports())[INDEX]
    table = re.search(r'<table class="grid" id="channels">(.*?)</table>', index)
    assert table is not None
    rows = re.findall(
        r'<tr data-channel-app="([^"]+)" data-channel="([^"]+)">(.*?)</tr>', table.group(1)
    )
    stable = {(app, channel): body for app, channel, body in rows}
    assert set(stable) == {("podinfo", "stable"), ("postgres", "stable")}
    podinfo = stable[("podinfo", "stable")]
    assert "<strong>6.6.0</strong>" in podinfo and "3 instances" in podinfo
    assert "newer version available" in podinfo
    assert "prod/web</a> runs 6.5.0" in podinfo
    assert "staging/web" not in podinfo  # it runs the channel's version
    assert "1 instance<" in stable[("postgres", "stable")]


def test_commit_ids_link_to_the_configured_forge() -> None:
    options = PageOptions(commit_url="https://github.com/org/catalog/commit/")
    site = build_site(reports(), options=options)
    assert f'href="https://github.com/org/catalog/commit/{SHA}"' in site[INDEX]
    docs = site[instance_page("prod", "docs")]
    assert f'<a class="commit" href="https://github.com/org/catalog/commit/{SHA}">{SHA}</a>' in docs
    gitlab = PageOptions(commit_url="https://gitlab.com/org/catalog/-/commit/{commit}")
    assert (
        "https://gitlab.com/org/catalog/-/commit/" + SHA
        in build_site(reports(), options=gitlab)[instance_page("prod", "docs")]
    )
    plain = build_site(reports())[instance_page("prod", "docs")]
    assert 'class="commit"' not in plain and SHA in plain
    # a record's commit that is not an id (a watched checkout's "-dirty") is never a link
    dirty = [
        ClusterReport(
            "prod", "status/prod", SHA, {"x": record("prod", "x", source_commit=SHA + "-dirty")}
        )
    ]
    assert "-dirty</a>" not in build_site(dirty, options=options)[instance_page("prod", "x")]


def test_meta_refresh_only_when_asked() -> None:
    assert 'http-equiv="refresh"' not in build_site(reports())[INDEX]
    site = build_site(reports(), options=PageOptions(refresh=30))
    assert all('<meta http-equiv="refresh" content="30">' in page for page in site.values())
    assert all("<script" not in page for page in site.values())


def test_state_names_and_counts_read_as_words() -> None:
    site = build_site(reports())
    page = site[instance_page("prod", "web")]
    assert "waitingForPromotion" not in page and "waiting for promotion" in page
    assert "waitingForPromotion" not in site[INDEX]
    done = replace(ROLLOUT, state=RollingState.SUCCEEDED, targets=(1, 3, 5))
    solo = [ClusterReport("prod", "status/prod", SHA, {"web": record("prod", "web", rollout=done)})]
    page = build_site(solo)[instance_page("prod", "web")]
    assert "rolloutSucceed" not in page and "succeeded" in page
    assert "&middot; 1 replica &middot;" in page and "1 replicas" not in page
    assert readable("rolledBack") == "rolled back" and readable("Ready") == "Ready"
    assert plural(1, "batch", "batches") == "1 batch" and plural(0, "object") == "0 objects"


def test_a_succeeded_rollout_says_the_version_every_replica_runs() -> None:
    records = run(Cluster(1, "1.0.0", "2.0.0"), settings_())
    assert records[-1].state is RollingState.SUCCEEDED
    assert records[-1].message == "every replica runs 2.0.0"
    assert records[0].message in ("3 batches over 1 replica", "")
    assert not any("1 replicas" in r.message for r in records)


def test_next_command_for_each_kind_of_trouble() -> None:
    paused = replace(ROLLOUT, paused=True)
    cases = {
        "DowngradeBlocked": "reconciler resolve --cluster prod --explain",
        "RolledBack": "reconciler rollout status web --cluster prod",
        "HealthCheckFailed": "reconciler history --cluster prod web",
    }
    for reason, expected in cases.items():
        status = record("prod", "web", phase=Phase.STALLED, reason=reason)
        assert next_command("prod", status) == expected, reason
    resumed = next_command("prod", record("prod", "web", rollout=paused))
    assert resumed == "reconciler rollout resume web --cluster prod"
