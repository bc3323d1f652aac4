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


def ledger_table(rows: Iterable[LedgerRow]) -> str:
    """A fixed-width table, oldest run first within each instance."""
    header = [
        "INSTANCE",
        "MIGRATION",
        "VERSION",
        "PHASE",
        "SCOPE",
        "OUTCOME",
        "STARTED",
        "DURATION",
        "CHECK",
        "MESSAGE",
    ]
    lines: list[list[str]] = [header]
    for row in rows:
        r = row.record
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
                r.message.splitlines()[0] if r.message else "",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)).rstrip()
        + ("  " + line[-1] if line[-1] else "")
        for line in lines
    )


__all__ = ["LedgerRow", "ledger_rows", "ledger_table"]
