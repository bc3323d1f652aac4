"""Printing shared by commands: JSON or YAML data, aligned tables, colour on a terminal.

Output formats follow kubectl: every command that prints data takes
``-o json`` and ``-o yaml`` (the same document either way); commands that print
a table also take ``-o wide`` (more columns), ``-o name`` (one name a line, for
pipes) and ``--no-headers``. Colour follows https://no-color.org: only when
stdout is a terminal, never with ``NO_COLOR`` set to a non-empty value or
``--no-color``.

Text for people never carries raw control characters: ``printable_streams`` (the
CLI runs every command inside it) escapes them on stdout and stderr, whatever
printed them, and lets only our own colour codes through when colour is on. Data
(``-o json|yaml``) is written past it, as its encoders already escape.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from reconciler.model.printable import printable
from reconciler.model.table import Paint, format_table

DATA_FORMATS = ("json", "yaml")
TEXT_FORMATS = ("text", *DATA_FORMATS)
TABLE_FORMATS = ("text", "wide", "name", *DATA_FORMATS)

# ANSI SGR codes: the 8 basic colours every terminal has
_CODES = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36", "dim": "2"}
# words a table or line may carry, and the colour that reads right for them
_WORD_COLOURS = {
    "Ready": "green",
    "Progressing": "yellow",
    "Stalled": "red",
    "Failed": "red",
    "Suspended": "dim",
    "Removed": "dim",
    "Unknown": "yellow",
    "succeeded": "green",
    "notNeeded": "dim",
    "failed": "red",
    "error": "red",
    "warning": "yellow",
}
_COLOURED_COLUMNS = frozenset({"PHASE", "OUTCOME"})
# every escape sequence Style.paint writes
_OWN_SGR = frozenset({f"\x1b[{code}m" for code in (*_CODES.values(), "0")})


class PrintableStream(io.TextIOBase):
    """A text stream that shows control characters as ``\\xNN`` (``printable``) and
    writes the rest to ``inner``; ``keep`` are the sequences let through as they are."""

    def __init__(self, inner: TextIO, keep: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.inner = inner
        self._keep = keep

    def write(self, text: str) -> int:
        self.inner.write(printable(text, self._keep))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", None) or "utf-8"


def raw(stream: TextIO) -> TextIO:
    """``stream`` past ``PrintableStream``: for data whose encoder escapes, and for the
    terminal control a command means to send (``--watch`` clearing the screen, a
    progress line redrawn in place)."""
    return stream.inner if isinstance(stream, PrintableStream) else stream


def raw_stdout() -> TextIO:
    return raw(sys.stdout)


@contextlib.contextmanager
def printable_streams(no_color: bool = False) -> Iterator[None]:
    """stdout and stderr escape control characters until the block ends."""
    saved = sys.stdout, sys.stderr
    wrapped = []
    for stream in saved:
        keep = _OWN_SGR if colour_wanted(no_color, stream) else frozenset()
        wrapped.append(
            stream if isinstance(stream, PrintableStream) else PrintableStream(stream, keep)
        )
    sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        for stream in wrapped:
            with contextlib.suppress(ValueError, OSError):  # a closed pipe: nothing to flush
                stream.flush()
        sys.stdout, sys.stderr = saved


def print_json(data: Any) -> None:
    out = raw_stdout()
    json.dump(data, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def is_data(output: str) -> bool:
    """Whether ``-o`` asks for a document (json, yaml) rather than text for people."""
    return output in DATA_FORMATS


def format_data(data: Any, output: str) -> str:
    """``data`` as the JSON or YAML document ``-o json|yaml`` prints (ending in a newline)."""
    if output == "yaml":
        # round-trip through JSON: the same types either way (dates, enums become strings)
        return dump_yaml(json.loads(json.dumps(data, default=str)))
    return json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"


def print_data(data: Any, output: str) -> None:
    raw_stdout().write(format_data(data, output))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An aligned, kubectl-style table (no borders, two spaces between columns)."""
    return format_table(headers, rows, gap=2)


def eprint(message: str) -> None:
    print(message, file=sys.stderr)


def colour_wanted(no_color: bool = False, stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when the user said no (flag or ``NO_COLOR``)."""
    if no_color or os.environ.get("NO_COLOR", ""):
        return False
    out = sys.stdout if stream is None else stream
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


@dataclass(frozen=True)
class Style:
    """How a command decorates text for people: colour on or off, decided once."""

    colour: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace, stream: TextIO | None = None) -> Style:
        return cls(colour_wanted(bool(getattr(args, "no_color", False)), stream))

    def paint(self, text: str, colour: str) -> str:
        if not self.colour or not text:
            return text
        return f"\x1b[{_CODES[colour]}m{text}\x1b[0m"

    def word(self, text: str) -> str:
        """``text`` in the colour its meaning carries (``Ready`` green, ``Failed`` red)."""
        colour = _WORD_COLOURS.get(text)
        return self.paint(text, colour) if colour else text

    @property
    def cells(self) -> Paint | None:
        """The ``paint`` argument of ``format_table``: PHASE and OUTCOME columns by value."""
        if not self.colour:
            return None

        def paint(header: str, text: str) -> str:
            return self.word(text) if header in _COLOURED_COLUMNS else text

        return paint

    def diff_line(self, line: str) -> str:
        """A unified diff line coloured like ``git diff``."""
        if line.startswith(("+++", "---")):
            return self.paint(line, "dim") if self.colour else line
        if line.startswith("+"):
            return self.paint(line, "green")
        if line.startswith("-"):
            return self.paint(line, "red")
        if line.startswith("@@"):
            return self.paint(line, "cyan")
        return line


def table_options(args: argparse.Namespace) -> dict[str, Any]:
    """``wide``, ``headers`` and ``paint`` of a table command, from its arguments."""
    return {
        "wide": args.output == "wide",
        "headers": not getattr(args, "no_headers", False),
        "paint": Style.of(args).cells,
    }


def print_names(names: Sequence[str]) -> None:
    """``-o name``: one name a line, nothing else, ready for ``xargs`` or ``$(...)``."""
    for name in names:
        print(name)
