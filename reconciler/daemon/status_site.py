"""The status page read from status branches: shared by ``reconciler report`` and ``/ui``.

``read_report`` reads one cluster's branch with the ledger (a snapshot of the
records and one bounded ``git log``) into the value ``reconciler.status.report``
renders. ``StatusPages`` is the daemon's side: it renders its own branch on
request and keeps the pages until the branch head moves, so a page view costs one
``git rev-parse`` while nothing changed, and nothing at all when nobody looks
(rendering after every status commit would cost every pass, viewed or not).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from reconciler.model.status import Phase
from reconciler.source import StatusLedger, redact_url
from reconciler.status.report import (
    INDEX,
    NO_OPTIONS,
    ClusterReport,
    PageOptions,
    Pipeline,
    PipelineCard,
    PipelineWave,
    Soak,
    index_page,
    instance_page,
    status_page,
)
from reconciler.waves import BoardInstance, BoardWave

if TYPE_CHECKING:  # the daemon's loop imports this module for /ui
    from reconciler.daemon.loop import DaemonSettings

DEFAULT_HISTORY_LIMIT = 1000  # status commits read per cluster for the timelines
DEFAULT_TITLE = "Reconciler status"
UI_REFRESH = 30  # seconds: /ui reloads itself (a meta refresh; the CSP forbids scripts)


def read_report(
    ledger: StatusLedger, *, history_limit: int = DEFAULT_HISTORY_LIMIT, refresh: bool = True
) -> ClusterReport:
    """The records at the branch head and its latest ``history_limit`` changes (0: all).

    ``refresh`` fetches a remote branch first (the command); the daemon reads its
    mirror as its own pushes left it. The history is read without a second fetch,
    so both halves describe the same head unless another writer pushed meanwhile.
    """
    snap = ledger.snapshot(refresh=refresh)
    history = ledger.history(limit=history_limit, refresh=False) if snap.exists else []
    return ClusterReport(
        cluster=ledger.cluster,
        branch=ledger.branch,
        commit=snap.commit,
        statuses=snap.statuses,
        history=tuple(history),
        problems=tuple(str(p) for p in snap.problems),
        history_limit=history_limit,
    )


def ui_options(settings: DaemonSettings) -> PageOptions:
    """``/ui``'s links and refresh: ``--commit-url``, and the repository its commands name."""
    return PageOptions(
        commit_url=settings.commit_url, refresh=UI_REFRESH, repo=redact_url(settings.repo)
    )


def pipeline_of(app: str, version: str, board: Sequence[BoardWave], now: datetime) -> Pipeline:
    """The status page's pipeline for one release, from the wave gate's board.

    A card's soak is measured against the *next* wave's soak: that is the gate its
    Ready time counts toward (a wave's soak guards entry into it).
    """
    waves = []
    for index, wave in enumerate(board):
        after = board[index + 1] if index + 1 < len(board) else None
        waves.append(
            PipelineWave(
                name=wave.name,
                state=wave.state,
                message=wave.decision.message,
                soak=wave.soak,
                approval=wave.approval,
                max_failures=wave.max_failures,
                cards=tuple(_card(item, version, after, now) for item in wave.instances),
            )
        )
    return Pipeline(app, version, tuple(waves))


def _card(
    item: BoardInstance, version: str, after: BoardWave | None, now: datetime
) -> PipelineCard:
    seen = item.record
    if seen is None:
        return PipelineCard(item.cluster, item.instance, None)
    status = seen.status
    known = seen.since.year < datetime.max.year  # a hand-made commit: no time known
    soak = None
    if (
        after is not None
        and after.soak_seconds > 0
        and status.version == version
        and status.phase is Phase.READY
        and known
    ):
        ready_for = max(0.0, (now - seen.since).total_seconds())
        soak = Soak(ready_for, after.soak_seconds, after.name)
    return PipelineCard(
        item.cluster,
        item.instance,
        status.version or "none",
        str(status.phase),
        status.reason,
        seen.since.strftime("%Y-%m-%dT%H:%M:%SZ") if known else "",
        soak,
    )


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StatusPages:
    """The daemon's ``/ui``: the pages of its own status branch, cached per head commit.

    What is cached is the branch read (records and history) and the index page; an
    instance's page is rendered when asked for, so a cluster of thousands of
    instances costs one page of memory per request, not a site per status commit.
    Thread-safe: the HTTP server calls ``page`` from its executor threads while
    the loop records status; the ledger's lock serialises their Git reads.
    """

    def __init__(
        self,
        ledger: StatusLedger,
        *,
        history_limit: int = DEFAULT_HISTORY_LIMIT,
        title: str = DEFAULT_TITLE,
        clock: Callable[[], str] = now_stamp,
        options: PageOptions = NO_OPTIONS,
        pipelines: Callable[[], Sequence[Pipeline]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.options = options
        self._pipelines = pipelines
        self.history_limit = history_limit
        self.title = title
        self._clock = clock
        self._lock = threading.Lock()
        self._head: str | None = None
        self._read: _Read | None = None
        self.renders = 0  # how many times the branch was read (the cache is observable)

    def page(self, path: str) -> str | None:
        """The page at ``path`` (``index.html``, ``<cluster>/<instance>.html``), or None."""
        read = self._current()
        if path in ("", INDEX):
            if self._pipelines is None:
                return read.index
            # the waves move with every cluster's branch and with time (soak): drawn
            # per view from what the daemon's last pass read (cheap: no Git log)
            return index_page(
                [read.report],
                title=self.title,
                source=self.ledger.display,
                generated=self._clock(),
                options=self.options,
                pipelines=self._pipelines(),
            )
        name = read.instances.get(path)
        if name is None:
            return None
        status = read.report.statuses[name]
        return status_page(
            read.report, status, title=self.title, generated=read.generated, options=self.options
        )

    def _current(self) -> _Read:
        with self._lock:
            head = self.ledger.head(refresh=False)
            if self._read is None or head != self._head:
                report = read_report(self.ledger, history_limit=self.history_limit, refresh=False)
                generated = self._clock()
                index = index_page(
                    [report],
                    title=self.title,
                    source=self.ledger.display,
                    generated=generated,
                    options=self.options,
                )
                names = {instance_page(report.cluster, n): n for n in report.statuses}
                self._read = _Read(report, index, names, generated)
                self._head = report.commit
                self.renders += 1
            return self._read


@dataclass(frozen=True)
class _Read:
    report: ClusterReport
    index: str
    instances: dict[str, str]  # page path -> instance name
    generated: str


__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_TITLE",
    "UI_REFRESH",
    "StatusPages",
    "pipeline_of",
    "read_report",
    "ui_options",
]
