"""The status page's HTML builder on hand-made records: structure, escaping, colours."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from reconciler.model.rollout import RollingState, RolloutRecord
from reconciler.model.status import InstanceStatus, Phase
from reconciler.status import HistoryEntry
from reconciler.status.report import (
    INDEX,
    PHASE_COLOURS,
    ClusterReport,
    build_site,
    channel_of,
    instance_page,
    phase_class,
    slug,
    source_label,
    version_segments,
)
from reconciler.status.report.style import channel_index, stylesheet

VOID = {"meta", "br", "img", "link", "input", "hr"}
EVIL = "<script>alert(1)</script>\"'&"


class Tags(HTMLParser):
    """Checks that every element is closed in order; collects attributes by tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    tags.close()
    assert tags.errors == [] and tags.stack == [], (tags.errors, tags.stack)
    return tags


def status(cluster: str, instance: str, **changes: object) -> InstanceStatus:
    base = InstanceStatus(
        cluster=cluster,
        instance=instance,
        app="podinfo",
        phase=Phase.READY,
        version="6.5.0",
        desired_version="6.5.0",
        source="channel:stable",
        updated_at="2026-01-01T00:00:00Z",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def entry(instance: str, version: str, phase: str, n: int, summary: str = "x") -> HistoryEntry:
    return HistoryEntry(
        commit=f"{n:040x}",
        time=f"2026-01-0{n}T00:00:00Z",
        cluster="prod",
        instance=instance,
        phase=phase,
        version=version,
        source_commit="a" * 40,
        summary=summary,
    )


def reports() -> list[ClusterReport]:
    prod = ClusterReport(
        cluster="prod",
        branch="status/prod",
        commit="c" * 40,
        statuses={
            "web": status("prod", "web", version="6.6.0", desired_version="6.7.0"),
            "db": status("prod", "db", app="postgres", phase=Phase.FAILED, source="exact"),
            "old": status("prod", "old", phase=Phase.REMOVED),
        },
        history=(
            entry("web", "6.6.0", "Ready", 3),
            entry("web", "6.5.0", "Ready", 2),
            entry("web", "6.5.0", "Progressing", 1),
        ),
    )
    staging = ClusterReport(
        cluster="staging",
        branch="status/staging",
        commit="d" * 40,
        statuses={"web": status("staging", "web", source="channel:beta", phase=Phase.STALLED)},
    )
    dev = ClusterReport(cluster="dev", branch="status/dev", commit=None)
    return [prod, staging, dev]


def test_site_has_an_index_and_a_page_per_record_linked_from_the_matrix() -> None:
    pages = build_site(reports(), title="Fleet", generated="2026-01-05T00:00:00Z")
    assert set(pages) == {
        INDEX,
        "prod/web.html",
        "prod/db.html",
        "prod/old.html",
        "staging/web.html",
    }
    for page in pages.values():
        parse(page)
    index = parse(pages[INDEX])
    header = [a.get("data-cluster") for t, a in index.found if t == "th" and "data-cluster" in a]
    assert header == ["prod", "staging", "dev"]
    rows = [a["data-app"] for t, a in index.found if t == "tr" and "data-app" in a]
    assert rows == ["podinfo", "postgres"]
    hrefs = [
        a["href"] for t, a in index.found if t == "a" and a.get("class", "").startswith("inst")
    ]
    assert sorted(hrefs) == ["prod/db.html", "prod/web.html", "staging/web.html"]
    assert all(h in pages for h in hrefs)
    assert "prod/old.html" not in hrefs  # removed: its page stays, the matrix drops it
    assert "no branch status/dev yet" in pages[INDEX]
    assert "&rarr; 6.7.0" in pages[INDEX]  # desired differs from running
    back = [a["href"] for t, a in parse(pages["prod/web.html"]).found if t == "a"]
    assert back == ["../index.html"]


def test_every_value_from_git_is_escaped_in_every_page() -> None:
    record = status(
        EVIL,
        EVIL,
        app=EVIL,
        version=EVIL,
        desired_version=EVIL,
        source=f"channel:{EVIL}",
        reason=EVIL,
        message=EVIL,
        migrations=(
            {
                "name": EVIL,
                "version": EVIL,
                "phase": "pre",
                "outcome": "failed",
                "message": EVIL,
                "checksum": "x",
                "startedAt": EVIL,
            },
        ),
        rollout=RolloutRecord(EVIL, EVIL, RollingState.FAILED, 2, 1, message=EVIL),
    )
    report = ClusterReport(
        cluster=EVIL,
        branch=EVIL,
        commit="e" * 40,
        statuses={EVIL: record},
        history=(replace(entry(EVIL, EVIL, EVIL, 1, EVIL), cluster=EVIL),),
        problems=(EVIL,),
    )
    pages = build_site([report], title=EVIL, source=EVIL, generated=EVIL)
    assert set(pages) == {INDEX, instance_page(EVIL, EVIL)}
    assert re.fullmatch(r"[A-Za-z0-9_-]+/[A-Za-z0-9_-]+\.html", instance_page(EVIL, EVIL))
    for page in pages.values():
        tags = parse(page)
        assert "<script" not in page
        assert [t for t, _ in tags.found if t == "script"] == []
        assert EVIL in "".join(tags.text)  # shown as the text it is
        # quotes in values never end an attribute early: only our own attributes exist
        names = {k for _, a in tags.found for k in a}
        assert names <= {
            "lang",
            "charset",
            "name",
            "content",
            "http-equiv",
            "class",
            "id",
            "href",
            "title",
            "scope",
            "colspan",
        } | {n for n in names if n.startswith("data-")}


def test_each_phase_has_its_own_colour_and_cells_carry_it() -> None:
    strong = [c[0] for c in PHASE_COLOURS.values()]
    assert len(set(strong)) == len(strong)
    assert {p.value for p in Phase} <= set(PHASE_COLOURS)
    css = stylesheet()
    for phase, (colour, light) in PHASE_COLOURS.items():
        assert f".{phase_class(phase)}{{--strong:{colour};--light:{light}}}" in css
    assert phase_class("Ready") == "phase-ready"
    assert phase_class("NoSuchPhase") == "phase-unknown"
    index = parse(build_site(reports())[INDEX])
    cells = {
        a["data-instance"] + "@" + a["href"]: a["class"]
        for t, a in index.found
        if t == "a" and "data-instance" in a
    }
    assert cells["db@prod/db.html"] == "inst phase-failed"  # pinned: no channel edge
    assert cells["web@prod/web.html"] == f"inst phase-ready chan-{channel_index('stable')}"
    assert cells["web@staging/web.html"] == f"inst phase-stalled chan-{channel_index('beta')}"
    assert channel_index("stable") != channel_index("beta")
    assert channel_index("team-x") == channel_index("team-x")


def test_timeline_folds_consecutive_changes_at_one_version() -> None:
    web = reports()[0]
    segments = version_segments(web.statuses["web"], web.entries_of("web"))
    assert [(s.version, s.phase, s.changes) for s in segments] == [
        ("6.5.0", "Ready", 2),
        ("6.6.0", "Ready", 1),
    ]
    assert segments[0].since == "2026-01-01T00:00:00Z"
    alone = version_segments(status("prod", "x", version=None, phase=Phase.FAILED), [])
    assert [(s.version, s.phase) for s in alone] == [("none", "Failed")]
    page = parse(build_site(reports())["prod/web.html"])
    items = [a["data-version"] for t, a in page.found if t == "li" and "data-version" in a]
    assert items == ["6.5.0", "6.6.0"]


@pytest.mark.parametrize(
    ("source", "channel", "label"),
    [
        ("channel:stable", "stable", "stable"),
        ("exact", None, "pinned"),
        ("range:^6.5", None, "range"),
        ("latest", None, "latest"),
    ],
)
def test_sources(source: str, channel: str | None, label: str) -> None:
    assert channel_of(source) == channel
    assert source_label(source) == label


def test_slugs_keep_plain_names_and_make_others_safe_and_distinct() -> None:
    assert slug("web") == "web" and slug("eu.prod-1") == "eu.prod-1"
    odd = [slug(n) for n in ("../x", "a/b", "a b", "a_b", ".hidden")]
    assert len(set(odd)) == len(odd)
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", s) for s in odd)
