"""The ledger as people read it: ``reconciler migrations`` rows from recorded statuses.

Each ``InstanceStatus`` on the status branch carries ``migrations``: the records
of that instance's ledger (SPEC section 5). This module turns them back into
``MigrationRecord`` values, keeping a broken entry visible as a problem rather
than hiding the rest, and formats the table the command prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.migrations import LedgerFormatError, MigrationRecord
from reconciler.model.table import Paint, format_table


@dataclass(frozen=True)
class LedgerRow:
    """One record of one instance's ledger."""

    instance: str
    record: MigrationRecord

    def to_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, **self.record.to_dict()}


def ledger_rows(
    instance: str, entries: Iterable[Mapping[str, Any]] | None
) -> tuple[list[LedgerRow], list[str]]:
    """Rows of ``instance``'s recorded migrations, and a message per unreadable entry."""
    rows: list[LedgerRow] = []
    problems: list[str] = []
    for index, entry in enumerate(entries or ()):
        try:
            rows.append(LedgerRow(instance, MigrationRecord.from_dict(entry)))
        except LedgerFormatError as e:
            problems.append(f"{instance}: migrations[{index}]: {e}")
    return rows, problems


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value >= 0.1 else f"{value * 1000:.0f}ms"


def ledger_table(
    rows: Iterable[LedgerRow],
    *,
    wide: bool = False,
    headers: bool = True,
    paint: Paint | None = None,
) -> str:
    """A fixed-width table, oldest run first within each instance.

    ``wide`` adds FROM (the version the change started from) and CHECKSUM, and
    prints a multi-line message whole (lines joined) instead of its first line.
    """
    header = ["INSTANCE", "MIGRATION", "VERSION", "PHASE", "SCOPE", "OUTCOME", "STARTED"]
    header += ["DURATION", "CHECK", *(["FROM", "CHECKSUM"] * wide), "MESSAGE"]
    lines: list[list[str]] = []
    for row in rows:
        r = row.record
        message = " ".join(r.message.split()) if wide else next(iter(r.message.splitlines()), "")
        extra = [r.from_version or "-", r.checksum[:19] or "-"] if wide else []
        lines.append(
            [
                row.instance,
                r.name,
                r.version,
                r.phase,
                r.scope,
                r.outcome,
                r.started_at,
                _seconds(r.duration),
                _seconds(r.check_duration),
                *extra,
                message,
            ]
        )
    return format_table(header, lines, gap=2, headers=headers, paint=paint)


__all__ = ["LedgerRow", "ledger_rows", "ledger_table"]
