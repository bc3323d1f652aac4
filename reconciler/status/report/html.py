"""The status page as HTML: an index (clusters x apps) and a page per instance.

``build_site`` returns every page of the site as text keyed by its path relative
to the site's root, so ``reconciler report`` writes them to a directory and the
daemon serves them from memory at ``/ui`` with the same relative links. Every
value that came from Git (names, versions, messages, reasons) goes through
``_e`` before it reaches the markup, and every page carries a Content Security
Policy that forbids scripts, so a record that slips a tag into a message shows
as text and could not run even if the escaping were forgotten.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import quote

import reconciler
from reconciler.model.migrations import LedgerFormatError, MigrationRecord
from reconciler.model.rollout import RollingState, RolloutRecord
from reconciler.model.status import InstanceStatus, Phase
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.model.words import plural, readable
from reconciler.status import progress
from reconciler.status.next_steps import next_command
from reconciler.status.progress import batch_rows
from reconciler.status.report.model import INDEX, ClusterReport, instance_page
from reconciler.status.report.pipeline import Pipeline, pipelines_section
from reconciler.status.report.style import UNKNOWN, channel_index, phase_class, stylesheet
from reconciler.status.views import HistoryEntry

# no script at all, styles only inline, nothing fetched: the page works offline
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"
NO_APP = "(no app)"
# what the index draws at most; past it "and N more" (the summary counts them all):
# a branch stuffed with 20,000 records made the page 5 MB and 8 s to render
INDEX_INSTANCES = 2000
INDEX_ITEMS = 200  # rollouts and unreadable files listed on the index


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _href(path: str, *, up: int = 0) -> str:
    """A relative link to ``path`` (made of slugs), quoted and escaped for an attribute."""
    return _e("../" * up + quote(path))


def _when(stamp: str) -> str:
    """``2026-11-23T15:46:38Z`` -> ``2026-11-23 15:46:38Z``: easier to scan in a column."""
    return stamp.replace("T", " ", 1) if stamp else "-"


@dataclass(frozen=True)
class PageOptions:
    """How the pages link out and refresh; none of it comes from the records.

    ``commit_url``: where a commit id links to, e.g.
    ``https://github.com/org/catalog/commit/`` (the id is appended) or a template
    with ``{commit}`` (GitLab: ``https://gitlab.com/org/catalog/-/commit/{commit}``);
    empty: ids are plain text. ``refresh``: seconds after which the browser reloads
    the page (``/ui``: a meta refresh, as the Content Security Policy forbids
    scripts); 0: never (a static report). ``repo``: the ``--repo`` the problems
    panel's commands name (empty: none, the checkout's default).
    """

    commit_url: str = ""
    refresh: int = 0
    repo: str = ""

    def commit(self, sha: str, *, short: int = 12) -> str:
        """``sha`` shortened, as a link when ``commit_url`` is set (escaped either way)."""
        text = _e(sha[:short]) if short else _e(sha)
        if not self.commit_url or not _COMMIT_ID.match(sha):
            return text
        base = self.commit_url
        url = base.replace("{commit}", sha) if "{commit}" in base else base.rstrip("/") + "/" + sha
        return f'<a class="commit" href="{_e(url)}">{text}</a>'


_COMMIT_ID = re.compile(r"^[0-9a-f]{7,64}$")
NO_OPTIONS = PageOptions()


@dataclass(frozen=True)
class _Cell:
    cluster: str
    status: InstanceStatus


def build_site(
    reports: Sequence[ClusterReport],
    *,
    title: str = "Status",
    source: str = "",
    generated: str = "",
    options: PageOptions = NO_OPTIONS,
    pipelines: Sequence[Pipeline] = (),
) -> dict[str, str]:
    """Every page: ``index.html`` and ``<cluster>/<instance>.html`` for each record.

    ``source`` (the repository as people may see it) and ``generated`` (a time
    stamp) only label the pages; rendering is otherwise a pure function of the
    reports (and of ``pipelines``, the releases crossing the waves, when the catalog
    has a ``waves.yaml``), so the daemon can cache the pages per status-branch commit.
    """
    pages = {
        INDEX: index_page(
            reports,
            title=title,
            source=source,
            generated=generated,
            options=options,
            pipelines=pipelines,
        )
    }
    for report in reports:
        for name in sorted(report.statuses):
            status = report.statuses[name]
            path = instance_page(report.cluster, name)
            pages[path] = status_page(
                report, status, title=title, generated=generated, options=options
            )
    return pages


def _page(title: str, body: str, *, generated: str, refresh: int = 0) -> str:
    stamp = f" at {_e(_when(generated))}" if generated else ""
    reload = f'<meta http-equiv="refresh" content="{int(refresh)}">\n' if refresh > 0 else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">\n'
        f"{reload}"
        f'<meta name="generator" content="reconciler {_e(reconciler.__version__)}">\n'
        f"<title>{_e(title)}</title>\n<style>\n{stylesheet()}</style>\n</head>\n<body>\n"
        f"{body}\n"
        f"<footer>Generated by reconciler {_e(reconciler.__version__)}{stamp} from the status "
        "branches (read-only). The same data: <code>reconciler status</code>, "
        "<code>reconciler history</code>.</footer>\n</body>\n</html>\n"
    )


# ---------------------------------------------------------------- the index


def index_page(
    reports: Sequence[ClusterReport],
    *,
    title: str,
    source: str,
    generated: str,
    options: PageOptions = NO_OPTIONS,
    pipelines: Sequence[Pipeline] = (),
) -> str:
    """Summary, problems, the waves' pipelines, the clusters x apps matrix, channels,
    rollouts in progress, unreadable files."""
    live = [
        _Cell(r.cluster, s)
        for r in reports
        for s in r.statuses.values()
        if s.phase is not Phase.REMOVED
    ]
    drawn = sorted(live, key=lambda c: (c.cluster, _app(c), c.status.instance))[:INDEX_INSTANCES]
    parts = [
        '<header class="top">',
        f"<h1>{_e(title)}</h1>",
        f'<div class="muted">{_e(source)}</div>' if source else "",
        "</header>",
        "<main>",
        _summary(live, sum(len(r.problems) for r in reports)),
        _attention(reports, options),
        _legend(live),
        pipelines_section(pipelines, _linker(reports)),
        "<h2>Versions</h2>",
        _matrix(reports, drawn, options),
        _more(len(live) - len(drawn), "instances", "reconciler status lists them all"),
        _channels(live),
        _rollouts(reports),
        _problems(reports),
        "</main>",
    ]
    body = "\n".join(p for p in parts if p)
    return _page(title, body, generated=generated, refresh=options.refresh)


def _more(hidden: int, what: str, where: str) -> str:
    if hidden <= 0:
        return ""
    return f'<p class="muted more">and {hidden} more {what}, not shown here ({where}).</p>'


def _linker(reports: Sequence[ClusterReport]) -> Callable[[str, str], str | None]:
    """Links from pipeline cards to the instance pages this site has (not other clusters')."""
    known = {(r.cluster, name) for r in reports for name in r.statuses}

    def link(cluster: str, instance: str) -> str | None:
        return _href(instance_page(cluster, instance)) if (cluster, instance) in known else None

    return link


def _summary(cells: Sequence[_Cell], unreadable: int) -> str:
    counts: dict[str, int] = {}
    for cell in cells:
        counts[str(cell.status.phase)] = counts.get(str(cell.status.phase), 0) + 1
    if unreadable:
        counts[UNKNOWN] = unreadable
    order = [p.value for p in Phase] + [UNKNOWN]
    badges = [
        f'<span class="badge {phase_class(p)}" data-phase="{_e(p)}">{counts[p]} {_e(p)}</span>'
        for p in order
        if counts.get(p)
    ]
    total = f"{len(cells)} instance{'s' * (len(cells) != 1)}"
    return f'<div class="summary" id="summary"><span>{total}</span>{"".join(badges)}</div>'


def _legend(cells: Sequence[_Cell]) -> str:
    phases = [
        f'<span class="{phase_class(p.value)}"><span class="swatch"></span> {_e(p.value)}</span>'
        for p in Phase
        if p is not Phase.REMOVED
    ]
    channels = sorted({c for cell in cells if (c := channel_of(cell.status.source))})
    chans = [
        f'<span class="chan-{channel_index(c)}"><span class="chanswatch"></span> '
        f"channel {_e(c)}</span>"
        for c in channels
    ]
    return f'<div class="legend" id="legend">{"".join(phases + chans)}</div>'


def _matrix(reports: Sequence[ClusterReport], cells: Sequence[_Cell], options: PageOptions) -> str:
    if not reports:
        return '<p class="empty">No cluster: no status branch found.</p>'
    apps = sorted({_app(c) for c in cells})
    head = "".join(_cluster_header(r, options) for r in reports)
    grouped: dict[tuple[str, str], list[_Cell]] = {}
    for cell in sorted(cells, key=lambda c: c.status.instance):
        grouped.setdefault((cell.cluster, _app(cell)), []).append(cell)
    rows = []
    for app in apps:
        tds = []
        for report in reports:
            mine = grouped.get((report.cluster, app), [])
            inner = "".join(_instance_link(c) for c in mine)
            tds.append(
                f'<td data-cluster="{_e(report.cluster)}"><div class="cell">{inner}</div></td>'
                if mine
                else f'<td class="empty" data-cluster="{_e(report.cluster)}">&ndash;</td>'
            )
        head_cell = f'<th class="app" scope="row">{_e(app)}</th>'
        rows.append(f'<tr data-app="{_e(app)}">{head_cell}{"".join(tds)}</tr>')
    if not apps:
        span = len(reports) + 1
        rows.append(f'<tr><td class="empty" colspan="{span}">No instance recorded yet.</td></tr>')
    return (
        '<table class="matrix" id="matrix">\n'
        f'<thead><tr><th scope="col">App</th>{head}</tr></thead>\n'
        f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table>"
    )


def _app(cell: _Cell) -> str:
    return cell.status.app or NO_APP


def _cluster_header(report: ClusterReport, options: PageOptions) -> str:
    if report.commit is None:
        detail = f'<div class="muted">no branch {_e(report.branch)} yet</div>'
    else:
        detail = (
            f'<div class="muted mono" title="{_e(report.branch)} at {_e(report.commit)}">'
            f"{_e(report.branch)} @ {options.commit(report.commit)}</div>"
        )
    return f'<th scope="col" data-cluster="{_e(report.cluster)}">{_e(report.cluster)}{detail}</th>'


def _instance_link(cell: _Cell) -> str:
    s = cell.status
    channel = channel_of(s.source)
    classes = [phase_class(str(s.phase))]
    if channel:
        classes.append(f"chan-{channel_index(channel)}")
    moving = s.desired_version and s.desired_version != s.version
    desired = f'<span class="desired">&rarr; {_e(s.desired_version)}</span>' if moving else ""
    tip = f"{s.instance}: {s.phase}" + (f" ({s.reason})" if s.reason else "")
    link = _href(instance_page(cell.cluster, s.instance))
    return (
        f'<a class="inst {" ".join(classes)}" href="{link}" '
        f'title="{_e(tip)}" data-instance="{_e(s.instance)}" data-phase="{_e(s.phase)}">'
        f'<span class="ver">{_e(s.version or "none")}</span>'
        f'<span class="phase">{_e(s.phase)}</span>'
        f'<span class="name">{_e(s.instance)}</span>'
        f'<span class="chan">{_e(source_label(s.source))}</span>'
        f"{desired}</a>"
    )


def _rollouts(reports: Sequence[ClusterReport]) -> str:
    """Rollouts that did not succeed yet: in flight, waiting at a gate, failed."""
    items = []
    for report in reports:
        for name in sorted(report.statuses):
            s = report.statuses[name]
            record = s.rollout
            if record is None or record.state is RollingState.SUCCEEDED:
                continue
            link = _href(instance_page(report.cluster, name))
            items.append(
                f'<div class="rollout {phase_class(str(s.phase))}">'
                f'<a href="{link}">{_e(report.cluster)}/{_e(name)}</a> '
                f"{_e(s.app)} {_e(record.label)} "
                f'<span class="badge">{_e(readable(record.state))}</span>'
                f"{_batches(record)}</div>"
            )
    if not items:
        return ""
    more = _more(len(items) - INDEX_ITEMS, "rollouts", "each instance's page has its own")
    shown = "\n".join(items[:INDEX_ITEMS])
    return f'<h2>Rollouts</h2>\n<div id="rollouts">{shown}</div>{more}'


def _attention(reports: Sequence[ClusterReport], options: PageOptions) -> str:
    """Stalled and Failed instances, and rollouts at a gate: why, and the command to run."""
    rows = []
    for report in reports:
        for name in sorted(report.statuses):
            s = report.statuses[name]
            gate = s.rollout is not None and s.rollout.state is RollingState.WAITING
            if s.phase not in (Phase.STALLED, Phase.FAILED) and not gate:
                continue
            why = readable(s.reason) if s.reason else "waiting for promotion"
            link = _href(instance_page(report.cluster, name))
            command = next_command(report.cluster, s, options.repo)
            rows.append(
                f'<tr class="{phase_class(str(s.phase))}" data-cluster="{_e(report.cluster)}" '
                f'data-instance="{_e(name)}">'
                f'<td><a href="{link}">{_e(report.cluster)}/{_e(name)}</a></td>'
                f'<td><span class="badge">{_e(s.phase)}</span> {_e(why)}</td>'
                f"<td>{_e(s.message)}</td><td><code>{_e(command)}</code></td></tr>"
            )
    if not rows:
        return ""
    return (
        '<h2>Needs attention</h2>\n<table class="grid" id="attention"><thead><tr>'
        "<th>Instance</th><th>Why</th><th>Message</th><th>Next command</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


@dataclass(frozen=True)
class ChannelRow:
    """A channel of an app, the version it points to, and the instances behind it.

    The target is the newest ``desiredVersion`` among the records that follow the
    channel: the page reads status branches only, and each record says what the
    channel named at the catalog commit it was made from.
    """

    app: str
    channel: str
    target: str
    following: int
    behind: tuple[tuple[str, str, str], ...]  # (cluster, instance, version it runs)


def channel_rows(cells: Sequence[_Cell]) -> list[ChannelRow]:
    """One row per (app, channel) followed by some instance, sorted."""
    groups: dict[tuple[str, str], list[_Cell]] = {}
    for cell in cells:
        channel = channel_of(cell.status.source)
        if channel is not None:
            groups.setdefault((_app(cell), channel), []).append(cell)
    rows = []
    for (app, channel), members in sorted(groups.items()):
        wanted = [c.status.desired_version for c in members if c.status.desired_version]
        target = max(wanted, key=_version_key, default="")
        behind = tuple(
            (c.cluster, c.status.instance, c.status.version or "none")
            for c in sorted(members, key=lambda c: (c.cluster, c.status.instance))
            if target and _older(c.status.version, target)
        )
        rows.append(ChannelRow(app, channel, target, len(members), behind))
    return rows


def _version_key(text: str) -> tuple[int, object]:
    try:
        return (1, parse_version(text))
    except (VersionSyntaxError, ValueError, TypeError):
        return (0, text)


def _older(version: str | None, target: str) -> bool:
    if not version:
        return True
    a, b = _version_key(version), _version_key(target)
    if a[0] != b[0]:
        return version != target
    return bool(a[1] < b[1])  # type: ignore[operator]


def _channels(cells: Sequence[_Cell]) -> str:
    rows = []
    for row in channel_rows(cells):
        behind = (
            ", ".join(
                f'<a href="{_href(instance_page(cluster, name))}">{_e(cluster)}/{_e(name)}</a> '
                f"runs {_e(version)}"
                for cluster, name, version in row.behind
            )
            if row.behind
            else '<span class="muted">none</span>'
        )
        rows.append(
            f'<tr data-channel-app="{_e(row.app)}" data-channel="{_e(row.channel)}">'
            f'<td>{_e(row.app)}</td><td><span class="chan-{channel_index(row.channel)}">'
            f'<span class="chanswatch"></span> {_e(row.channel)}</span></td>'
            f"<td><strong>{_e(row.target or '-')}</strong></td>"
            f"<td>{plural(row.following, 'instance')}</td>"
            f'<td class="behind">{"newer version available: " if row.behind else ""}{behind}</td>'
            "</tr>"
        )
    if not rows:
        return ""
    return (
        '<h2>Channels</h2>\n<table class="grid" id="channels"><thead><tr><th>App</th>'
        "<th>Channel</th><th>Points to</th><th>Following</th><th>Running something older</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _problems(reports: Sequence[ClusterReport]) -> str:
    rows = [
        f"<li><strong>{_e(r.cluster)}</strong>: {_e(problem)}</li>"
        for r in reports
        for problem in r.problems
    ]
    if not rows:
        return ""
    more = _more(len(rows) - INDEX_ITEMS, "unreadable files", "reconciler status names them")
    shown = "".join(rows[:INDEX_ITEMS])
    return f'<h2>Unreadable status files</h2>\n<ul id="problems">{shown}</ul>{more}'


# ---------------------------------------------------------------- an instance


def status_page(
    report: ClusterReport,
    status: InstanceStatus,
    *,
    title: str,
    generated: str,
    options: PageOptions = NO_OPTIONS,
) -> str:
    """Facts, conditions, the rollout and its batches, migrations, the version timeline."""
    s = status
    entries = report.entries_of(s.instance)
    parts = [
        '<header class="top">',
        f'<div><a href="{_href(INDEX, up=1)}">{_e(title)}</a> / {_e(report.cluster)} / '
        f"{_e(s.instance)}</div>",
        f'<h1 id="instance">{_e(s.instance)} '
        f'<span class="badge {phase_class(str(s.phase))}" id="phase">{_e(s.phase)}</span></h1>',
        "</header>",
        "<main>",
        _facts(report, s, options),
        _message(s),
        "<h2>Versions over time</h2>",
        _timeline(s, entries, truncated=report.truncated),
        _conditions(s),
        _rollout(s.rollout),
        _migrations(s),
        "<h2>Status changes</h2>",
        _history(entries, options),
        "</main>",
    ]
    page_title = f"{s.instance} on {report.cluster} - {title}"
    body = "\n".join(p for p in parts if p)
    return _page(page_title, body, generated=generated, refresh=options.refresh)


def _facts(report: ClusterReport, s: InstanceStatus, options: PageOptions) -> str:
    rows = [
        ("Cluster", _e(report.cluster)),
        ("App", _e(s.app or "-")),
        ("Version", f"<strong>{_e(s.version or 'none')}</strong>"),
        ("Desired", _e(s.desired_version or "-")),
        ("Source", _e(s.source or "-")),
        ("Catalog commit", f'<span class="mono">{_source_commit(s.source_commit, options)}</span>'),
        ("Objects", _e(s.objects)),
        ("Updated", _e(_when(s.updated_at))),
        ("Status branch", f'<span class="mono">{_e(report.branch)}</span>'),
    ]
    if s.reason:
        rows.insert(3, ("Reason", _e(readable(s.reason))))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<dl class="facts" id="facts">{body}</dl>'


def _source_commit(sha: str, options: PageOptions) -> str:
    """The whole id (a ``-dirty`` one of a watched checkout stays text: no such commit)."""
    return options.commit(sha, short=0) if sha else "-"


def _message(s: InstanceStatus) -> str:
    text = s.message
    if not text:
        ready = s.condition("Ready")
        text = ready.message if ready is not None else ""
    if not text:
        return ""
    return f'<div class="message {phase_class(str(s.phase))}" id="message">{_e(text)}</div>'


@dataclass(frozen=True)
class Segment:
    """A run of consecutive status changes at one version: a step of the timeline."""

    version: str
    since: str
    phase: str
    changes: int


def version_segments(status: InstanceStatus, entries: Sequence[HistoryEntry]) -> list[Segment]:
    """The versions the instance ran, oldest first, from its status changes (newest first).

    Consecutive changes at one version fold into one step whose phase is the last
    one recorded; with no change in the history read, the record itself is the step.
    """
    segments: list[Segment] = []
    for entry in reversed(entries):
        version = entry.version or "none"
        if segments and segments[-1].version == version:
            last = segments[-1]
            segments[-1] = Segment(last.version, last.since, entry.phase, last.changes + 1)
        else:
            segments.append(Segment(version, entry.time, entry.phase, 1))
    if not segments:
        segments.append(Segment(status.version or "none", status.updated_at, str(status.phase), 1))
    return segments


def _timeline(s: InstanceStatus, entries: Sequence[HistoryEntry], *, truncated: bool) -> str:
    items = [
        f'<li class="{phase_class(seg.phase)}" data-version="{_e(seg.version)}">'
        f'<span class="ver">{_e(seg.version)}</span>'
        f'<span class="when">since {_e(_when(seg.since))}</span>'
        f'<span class="when">{_e(seg.phase)}, {seg.changes} change{"s" * (seg.changes != 1)}'
        "</span></li>"
        for seg in version_segments(s, entries)
    ]
    note = ""
    if truncated:
        note = (
            '<p class="muted">From the latest status commits of the cluster only; '
            f"<code>reconciler history {_e(s.instance)}</code> shows all.</p>"
        )
    return f'<ol class="timeline" id="timeline">{"".join(items)}</ol>{note}'


def _conditions(s: InstanceStatus) -> str:
    if not s.conditions:
        return ""
    rows = "".join(
        f"<tr><td>{_e(c.type)}</td><td>{_e(c.status)}</td><td>{_e(c.reason)}</td>"
        f"<td>{_e(_when(c.last_transition_time))}</td><td>{_e(c.message)}</td></tr>"
        for c in s.conditions
    )
    return (
        '<h2>Conditions</h2>\n<table class="grid" id="conditions"><thead><tr><th>Type</th>'
        "<th>Status</th><th>Reason</th><th>Since</th><th>Message</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


_BATCH_CLASSES = {
    progress.DONE: "done",
    progress.IN_FLIGHT: "in-flight",
    progress.WAITING: "waiting",
    progress.PAUSED: "paused",
    progress.PENDING: "pending",
    progress.FAILED: "failed",
    progress.ROLLED_BACK: "rolled-back",
    progress.ABANDONED: "abandoned",
}


def _batches(record: RolloutRecord) -> str:
    items = [
        f'<li class="{_BATCH_CLASSES.get(row["state"], "pending")}" data-batch="{row["batch"]}">'
        f"batch {row['batch']}/{record.batches}"
        + ("" if row["target"] is None else f" &middot; {plural(row['target'], 'replica')}")
        + f" &middot; {_e(row['state'])}</li>"
        for row in batch_rows(record)
    ]
    return f'<ol class="batches">{"".join(items)}</ol>'


def _rollout(record: RolloutRecord | None) -> str:
    if record is None:
        return ""
    r = record.replicas
    gate = "none" if record.partition is None else f"after batch {record.partition}"
    facts = [
        ("Rollout", _e(record.label)),
        ("State", _e(readable(record.state)) + (" (paused)" if record.paused else "")),
        ("Batch", f"{record.batch}/{record.batches} ({_e(readable(record.batch_state))})"),
        ("Partition", _e(gate)),
        ("Replicas", f"{r.updated}/{r.desired} updated, {r.ready}/{r.desired} ready"),
        ("Started", _e(_when(record.started_at))),
        ("Updated", _e(_when(record.updated_at))),
    ]
    if record.message:
        facts.append(("Message", _e(record.message)))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return (
        f'<h2>Rollout</h2>\n<div class="rollout" id="rollout"><dl class="facts">{body}</dl>'
        f"{_batches(record)}</div>"
    )


def _migrations(s: InstanceStatus) -> str:
    if not s.migrations:
        return ""
    rows = []
    for index, raw in enumerate(s.migrations):
        try:
            m = MigrationRecord.from_dict(raw)
        except LedgerFormatError as e:
            rows.append(f'<tr><td colspan="7">migrations[{index}]: {_e(e)}</td></tr>')
            continue
        rows.append(
            f'<tr class="outcome-{_e(m.outcome)}"><td>{_e(m.name)}</td><td>{_e(m.version)}</td>'
            f"<td>{_e(m.phase)}</td><td>{_e(m.scope)}</td><td>{_e(m.outcome)}</td>"
            f"<td>{_e(_when(m.started_at))}</td><td>{_e(m.message)}</td></tr>"
        )
    return (
        '<h2>Migrations</h2>\n<table class="grid" id="migrations"><thead><tr><th>Migration</th>'
        "<th>Version</th><th>Phase</th><th>Scope</th><th>Outcome</th><th>Started</th>"
        f"<th>Message</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _history(entries: Iterable[HistoryEntry], options: PageOptions) -> str:
    rows = "".join(
        f'<tr class="{phase_class(e.phase)}"><td>{_e(_when(e.time))}</td>'
        f'<td><strong>{_e(e.version)}</strong></td><td><span class="badge">{_e(e.phase)}</span>'
        f'</td><td>{_e(e.summary)}</td><td class="mono">{options.commit(e.commit)}</td></tr>'
        for e in entries
    )
    if not rows:
        return '<p class="muted">No status change of this instance in the history read.</p>'
    return (
        '<table class="grid" id="history"><thead><tr><th>Time</th><th>Version</th>'
        f"<th>Phase</th><th>What happened</th><th>Commit</th></tr></thead><tbody>{rows}"
        "</tbody></table>"
    )


# ---------------------------------------------------------------- sources


def channel_of(source: str) -> str | None:
    """``channel:stable`` -> ``stable``; None for a pinned version, a range or ``latest``."""
    if source.startswith("channel:"):
        return source.split(":", 1)[1] or None
    return None


def source_label(source: str) -> str:
    """What a matrix cell says about how its version was chosen."""
    channel = channel_of(source)
    if channel is not None:
        return channel
    if source == "exact":
        return "pinned"
    if source.startswith("range:"):
        return "range"
    return source


__all__ = [
    "CSP",
    "NO_OPTIONS",
    "ChannelRow",
    "PageOptions",
    "Segment",
    "build_site",
    "channel_of",
    "channel_rows",
    "index_page",
    "source_label",
    "status_page",
    "version_segments",
]
