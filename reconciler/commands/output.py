"""Printing helpers shared by commands: JSON, YAML and aligned tables."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An aligned, kubectl-style table (no borders, two spaces between columns)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def eprint(message: str) -> None:
    print(message, file=sys.stderr)
