"""Aligned text tables, the one layout every command's table uses.

``status``, ``history``, ``migrations``, ``resolve`` and ``run --once`` print
kubectl-style tables from different layers (``status``, ``migrations``,
``resolve``, ``commands``); they share this pure function so that
``--no-headers`` and colour behave the same everywhere. Colour is the caller's
choice, passed in as ``paint``: it is applied to a cell's text *after* the
column width was measured on the plain text, so ANSI escapes never break the
alignment (the classic bug of colouring before ``ljust``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reconciler.model.printable import printable

# (column header, cell text) -> the text to print (e.g. wrapped in ANSI colour codes)
Paint = Callable[[str, str], str]


def format_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    gap: int = 3,
    headers: bool = True,
    paint: Paint | None = None,
) -> str:
    """Left-aligned columns ``gap`` spaces apart; the last column is not padded.

    Widths include the header even when ``headers`` is False, so a table looks
    the same with and without ``--no-headers`` (scripts cutting columns by
    position see identical offsets).
    """
    last = len(header) - 1
    # escaped before measuring: a cell from a catalog or record keeps its column
    rows = [[printable(str(value)) for value in row] for row in rows]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(last)]
    lines = []
    for row in [header, *rows] if headers else rows:
        cells = []
        for i, value in enumerate(row):
            text = str(value)
            shown = paint(header[i], text) if paint is not None and row is not header else text
            pad = "" if i == last else " " * (widths[i] - len(text))
            cells.append(shown + pad)
        lines.append((" " * gap).join(cells).rstrip())
    return "\n".join(lines)
