"""The status page's pipeline view: one release of an app crossing the waves.

Waves are columns, in order; each cluster's instance of the app is a card with the
version it runs, its phase, since when, and how far its soak has come (the time it
has been Ready on the release, against the soak the next wave asks). A halted wave
is drawn red with the clusters that halted it. The values here are what the page
needs, already decided: the daemon (``/ui``) and ``reconciler report`` ask the wave
gate (``reconciler.waves``) and convert its board into a ``Pipeline``; this module
only lays it out, escaping every value that came from Git, and uses no script (the
soak is a ``<progress>`` element).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler.model.waves import format_duration
from reconciler.status.report.style import phase_class

OPEN, WAITING, HALTED = "open", "waiting", "halted"


@dataclass(frozen=True)
class Soak:
    """How long a card has been Ready on the release, against the next wave's soak."""

    ready_for: float  # seconds
    needed: float  # seconds (> 0)
    wave: str  # the wave whose soak it is

    @property
    def done(self) -> bool:
        return self.ready_for >= self.needed

    @property
    def label(self) -> str:
        shown = min(self.ready_for, self.needed)
        return f"Ready {format_duration(shown)} of {format_duration(self.needed)}"


@dataclass(frozen=True)
class PipelineCard:
    cluster: str
    instance: str
    version: str | None  # None: no status record yet
    phase: str = ""
    reason: str = ""
    since: str = ""  # RFC 3339, the status commit since which it says what it says
    soak: Soak | None = None


@dataclass(frozen=True)
class PipelineWave:
    name: str
    state: str  # OPEN, WAITING or HALTED: this wave's gate for the release
    message: str  # what the gate says (what it waits for, who halted it)
    soak: str = ""  # as written in waves.yaml ("" none)
    approval: bool = False
    max_failures: int = 0
    cards: tuple[PipelineCard, ...] = ()


@dataclass(frozen=True)
class Pipeline:
    app: str
    version: str
    waves: tuple[PipelineWave, ...]

    @property
    def halted(self) -> bool:
        return any(w.state == HALTED for w in self.waves)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


# (cluster, instance) -> the link to its page, or None when the site has no page for it
Linker = Callable[[str, str], "str | None"]


def pipelines_section(pipelines: Sequence[Pipeline], link: Linker) -> str:
    """``<h2>Waves</h2>`` and a pipeline per app; empty when the catalog has no waves."""
    if not pipelines:
        return ""
    body = "\n".join(_pipeline(p, link) for p in pipelines)
    return f'<h2>Waves</h2>\n<div id="pipelines">\n{body}\n</div>'


def _pipeline(p: Pipeline, link: Linker) -> str:
    state = HALTED if p.halted else ""
    head = (
        f'<h3>{_e(p.app)} <span class="ver">{_e(p.version)}</span>'
        + (' <span class="badge halt">halted</span>' if state else "")
        + "</h3>"
    )
    columns = "".join(_wave(w, link) for w in p.waves)
    return (
        f'<section class="pipeline" data-app="{_e(p.app)}" data-version="{_e(p.version)}">'
        f'{head}<ol class="waves">{columns}</ol></section>'
    )


def _wave(w: PipelineWave, link: Linker) -> str:
    gates = [f"soak {w.soak}"] if w.soak else []
    gates += ["approval required"] if w.approval else []
    gates += [f"maxFailures {w.max_failures}"] if w.max_failures else []
    rules = f'<div class="rules">{_e(", ".join(gates))}</div>' if gates else ""
    cards = "".join(_card(c, link) for c in w.cards) or (
        '<div class="muted">no instance of the app: passed through</div>'
    )
    return (
        f'<li class="wave gate-{_e(w.state)}" data-wave="{_e(w.name)}" data-gate="{_e(w.state)}">'
        f'<div class="wave-head"><strong>{_e(w.name)}</strong> '
        f'<span class="badge">{_e(w.state)}</span></div>{rules}'
        f'<div class="gate">{_e(w.message)}</div>{cards}</li>'
    )


def _card(c: PipelineCard, link: Linker) -> str:
    who = f"{c.cluster}/{c.instance}"
    if c.version is None:
        inner = f'<span class="name">{_e(who)}</span><span class="phase">no record yet</span>'
        classes, phase = "card", ""
    else:
        reason = f" ({c.reason})" if c.reason else ""
        when = c.since.replace("T", " ", 1) if c.since else "-"
        inner = (
            f'<span class="ver">{_e(c.version)}</span>'
            f'<span class="phase">{_e(c.phase)}{_e(reason)}</span>'
            f'<span class="name">{_e(who)}</span>'
            f'<span class="when">since {_e(when)}</span>' + _soak(c.soak)
        )
        classes, phase = f"card {phase_class(c.phase)}", c.phase
    attrs = (
        f'class="{classes}" data-cluster="{_e(c.cluster)}" data-instance="{_e(c.instance)}" '
        f'data-version="{_e(c.version or "")}" data-phase="{_e(phase)}"'
    )
    href = link(c.cluster, c.instance)
    if href is None:
        return f"<div {attrs}>{inner}</div>"
    return f'<a {attrs} href="{href}">{inner}</a>'


def _soak(soak: Soak | None) -> str:
    if soak is None:
        return ""
    value = min(soak.ready_for, soak.needed)
    title = f"{soak.label} (the soak wave {soak.wave} asks)"
    return (
        f'<span class="soak" title="{_e(title)}"><progress max="{soak.needed:.0f}" '
        f'value="{value:.0f}">{_e(soak.label)}</progress> {_e(soak.label)}</span>'
    )


__all__ = [
    "HALTED",
    "OPEN",
    "WAITING",
    "Linker",
    "Pipeline",
    "PipelineCard",
    "PipelineWave",
    "Soak",
    "pipelines_section",
]
