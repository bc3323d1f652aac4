"""Text output of ``reconciler resolve``: a table, and with ``--explain`` the reasoning.

The table answers "what will each instance run"; the explanation answers
"why not that other version", listing every catalog version with the verdict
on it, so a person can debug a channel, a range or an ``upgradeFrom`` gap
without reading the catalog by hand. Rendered from ``Resolution`` values only
(the JSON output is ``Resolution.to_dict``), so both always agree.

Called by ``reconciler.commands`` for the text output of ``resolve``.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.resolution import Resolution
from reconciler.model.table import Paint, format_table
from reconciler.resolve.ranges import RangeSyntaxError, parse_range

__all__ = ["format_resolutions"]

_HEADER = ("INSTANCE", "APP", "SOURCE", "VERSION", "NOTE")


def format_resolutions(
    resolutions: Sequence[Resolution],
    *,
    explain: bool,
    wide: bool = False,
    headers: bool = True,
    paint: Paint | None = None,
) -> str:
    """The aligned table, followed by one block per instance when ``explain``.

    ``wide`` (``-o wide``) adds DEPLOYED and FILE (where the selection is written).
    """
    if not resolutions:
        return "no instances\n"
    text = _table(resolutions, wide=wide, headers=headers, paint=paint)
    if explain:
        text += "".join("\n" + _block(r) for r in resolutions)
    return text


def _table(
    resolutions: Sequence[Resolution], *, wide: bool, headers: bool, paint: Paint | None
) -> str:
    head: tuple[str, ...] = _HEADER[:-1] + ("DEPLOYED", "FILE") * wide + _HEADER[-1:]
    rows = []
    for r in resolutions:
        where = r.file if r.line is None else f"{r.file}:{r.line}"
        extra = (r.deployed or "-", where or "-") if wide else ()
        rows.append((r.instance, r.app, r.source, r.version or "-", *extra, _note(r)))
    return format_table(head, rows, gap=2, headers=headers, paint=paint) + "\n"


def _note(r: Resolution) -> str:
    """One line: the error, the guard that holds, the path, then warnings."""
    if r.error is not None:
        return f"error: {r.error}"
    notes = []
    if r.blocked:
        notes.append(f"{r.reason}: {r.message}")
    elif r.upgrade_path:
        notes.append("upgrade via " + " -> ".join(r.upgrade_path))
    elif r.deployed is not None and r.deployed != r.version:
        notes.append(f"from {r.deployed}")
    notes += [f"warning: {w}" for w in r.warnings]
    return "; ".join(notes)


def _block(r: Resolution) -> str:
    where = r.file if r.line is None else f"{r.file}:{r.line}"
    lines = [f"instance {r.instance} (app {r.app}, cluster {r.cluster})"]
    if where:
        lines[0] += f" at {where}"
    lines.append(f"  selector:  {_selector(r.source)}")
    if r.deployed is not None:
        lines.append(f"  deployed:  {r.deployed}")
    lines += _candidates(r)
    lines.append(f"  verdict:   {_verdict(r)}")
    if r.upgrade_path:
        lines.append(f"  path:      {r.deployed} -> " + " -> ".join(r.upgrade_path))
    lines += [f"  warning:   {w}" for w in r.warnings]
    if r.error is not None:
        lines.append(f"  error:     {r.error}")
    return "\n".join(lines) + "\n"


def _selector(source: str) -> str:
    """The source, plus what a range expands to when sugar was used."""
    if not source.startswith("range:"):
        return source
    expression = source.removeprefix("range:")
    try:
        normalized = parse_range(expression).normalized
    except RangeSyntaxError:
        return source
    return source if normalized == expression else f"{source}  (means {normalized})"


def _candidates(r: Resolution) -> list[str]:
    if not r.candidates:
        return ["  candidates: none"]
    width = max(len(c.version) for c in r.candidates)
    lines = ["  candidates:"]
    for c in r.candidates:
        chosen = c.kept and c.reason.startswith("chosen")
        mark = "*" if chosen else " "
        verdict = "chosen" if chosen else ("kept" if c.kept else "dropped")
        lines.append(f"    {mark} {c.version.ljust(width)}  {verdict.ljust(7)}  {c.reason}")
    return lines


def _verdict(r: Resolution) -> str:
    if r.version is None:
        return f"no version ({r.reason or 'ResolveFailed'})"
    if r.blocked:
        return f"{r.version}, blocked ({r.reason}): {r.message}"
    if r.upgrade_path:
        return f"{r.version}, deploying {r.upgrade_path[0]} first"
    return r.version
