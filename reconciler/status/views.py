"""What ``reconciler status`` and ``reconciler history`` print, rendered from values.

``HistoryEntry`` is one status commit as ``history`` reads it from trailers; the
table functions lay out records and entries like ``flux get`` or
``argocd app list`` do. JSON output uses ``to_dict``/``status_json`` so scripts
and the text tables see the same data.
"""

from __future__ import annotations

import time
from calendar import timegm
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.model.status import InstanceStatus
from reconciler.model.table import Paint, format_table


@dataclass(frozen=True)
class HistoryEntry:
    """One status change: a commit on the status branch, read from its trailers."""

    commit: str
    time: str  # committer date, ISO 8601 as Git prints it (%cI)
    cluster: str
    instance: str
    phase: str
    version: str
    source_commit: str
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "cluster": self.cluster,
            "instance": self.instance,
            "version": self.version,
            "phase": self.phase,
            "summary": self.summary,
            "commit": self.commit,
            "sourceCommit": self.source_commit,
        }


@dataclass(frozen=True)
class UnreadableStatus:
    """A status file that exists but cannot be parsed: shown, never fatal."""

    instance: str
    file: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "app": None,
            "version": None,
            "phase": "Unknown",
            "file": self.file,
            "error": self.error,
        }


def status_table(
    statuses: Iterable[InstanceStatus],
    unreadable: Iterable[UnreadableStatus] = (),
    *,
    now: float | None = None,
    wide: bool = False,
    headers: bool = True,
    paint: Paint | None = None,
) -> str:
    """INSTANCE APP VERSION DESIRED PHASE AGE MESSAGE, one row per instance, sorted.

    ``wide`` (``-o wide``) adds SOURCE, COMMIT (the catalog commit), OBJECTS and
    BUILDS (the pinned image builds that run, SPEC section 8) before MESSAGE, like
    kubectl's extra columns.
    """
    rows: list[tuple[str, ...]] = []
    for s in statuses:
        builds = ",".join(f"{n}={b.split('@', 1)[0]}" for n, b in sorted(s.images.items()))
        extra = (
            (s.source or "-", s.source_commit[:12] or "-", str(s.objects), builds or "-")
            if wide
            else ()
        )
        rows.append(
            (
                s.instance,
                s.app or "-",
                s.version or "-",
                s.desired_version or "-",
                str(s.phase),
                age(s.updated_at, now=now),
                *extra,
                _message(s),
            )
        )
    for u in unreadable:
        rows.append((u.instance, "-", "-", "-", "Unknown", "-", *(("-",) * 4 * wide), u.error))
    rows.sort(key=lambda r: r[0])
    header: tuple[str, ...] = ("INSTANCE", "APP", "VERSION", "DESIRED", "PHASE", "AGE")
    header += ("SOURCE", "COMMIT", "OBJECTS", "BUILDS") * wide + ("MESSAGE",)
    return format_table(header, rows, headers=headers, paint=paint)


def history_table(
    entries: Sequence[HistoryEntry],
    *,
    wide: bool = False,
    headers: bool = True,
    paint: Paint | None = None,
) -> str:
    """TIME INSTANCE VERSION PHASE SOURCE COMMIT SUMMARY, newest first.

    ``wide`` adds CLUSTER and prints whole commit ids instead of 12 characters.
    """
    cut = 40 if wide else 12
    rows = [
        (
            e.time,
            *((e.cluster,) * wide),
            e.instance,
            e.version,
            e.phase,
            e.source_commit[:cut],
            e.commit[:cut],
            e.summary,
        )
        for e in entries
    ]
    header = ("TIME", *(("CLUSTER",) * wide), "INSTANCE", "VERSION", "PHASE", "SOURCE", "COMMIT")
    return format_table((*header, "SUMMARY"), rows, headers=headers, paint=paint)


def age(stamp: str, *, now: float | None = None) -> str:
    """``kubectl``-style age (``45s``, ``12m``, ``3h``, ``5d``) of an RFC 3339 UTC stamp."""
    try:
        then = timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "-"
    seconds = max(0, int((time.time() if now is None else now) - then))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 120 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _message(status: InstanceStatus) -> str:
    text = status.message
    if not text:
        ready = status.condition("Ready")
        text = ready.message if ready is not None else ""
    if status.reason and status.reason not in text:
        text = f"{status.reason}: {text}" if text else status.reason
    return " ".join(text.split())
