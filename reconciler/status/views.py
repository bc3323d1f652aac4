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
) -> str:
    """INSTANCE APP VERSION DESIRED PHASE AGE MESSAGE, one row per instance, sorted."""
    rows: list[tuple[str, ...]] = []
    for s in statuses:
        rows.append(
            (
                s.instance,
                s.app or "-",
                s.version or "-",
                s.desired_version or "-",
                str(s.phase),
                age(s.updated_at, now=now),
                _message(s),
            )
        )
    for u in unreadable:
        rows.append((u.instance, "-", "-", "-", "Unknown", "-", u.error))
    rows.sort(key=lambda r: r[0])
    header = ("INSTANCE", "APP", "VERSION", "DESIRED", "PHASE", "AGE", "MESSAGE")
    return format_table(header, rows)


def history_table(entries: Sequence[HistoryEntry]) -> str:
    """TIME INSTANCE VERSION PHASE SOURCE COMMIT SUMMARY, newest first."""
    rows = [
        (
            e.time,
            e.instance,
            e.version,
            e.phase,
            e.source_commit[:12],
            e.commit[:12],
            e.summary,
        )
        for e in entries
    ]
    header = ("TIME", "INSTANCE", "VERSION", "PHASE", "SOURCE", "COMMIT", "SUMMARY")
    return format_table(header, rows)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by three spaces; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)


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
