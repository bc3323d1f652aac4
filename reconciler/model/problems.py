"""Problems found in user input, each pointing at a file and line.

Validation never stops at the first problem: loaders collect ``Problem`` values
and the CLI prints them all, so a catalog author fixes everything in one round.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    """How bad a problem is; only errors make ``validate`` exit 1."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the catalog, located as precisely as we can.

    ``file`` is relative to the catalog root (POSIX separators) so that the
    same output is meaningful in CI logs, editors and pull-request comments.
    """

    file: str
    line: int | None
    severity: Severity
    message: str

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.severity is Severity.WARNING:
            return f"{where}: warning: {self.message}"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "severity": str(self.severity),
            "message": self.message,
        }


def error(file: str, line: int | None, message: str) -> Problem:
    return Problem(file, line, Severity.ERROR, message)


def warning(file: str, line: int | None, message: str) -> Problem:
    return Problem(file, line, Severity.WARNING, message)


def has_errors(problems: list[Problem] | tuple[Problem, ...]) -> bool:
    return any(p.is_error for p in problems)
