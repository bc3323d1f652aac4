"""mkdocs hook: the command-line reference, generated from the parser at build time.

The reference page cannot drift from the code because it is never written by hand:
the marker ``<!-- cli-reference -->`` in CLI.md is replaced by every command's
``--help``, walked from ``reconciler.cli.build_parser`` (nested subcommands such as
``rollout promote`` included).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of a command already listed
                    continue
                seen.add(id(sub))
                found.append((name, sub))
    return found


def _walk(prefix: str, parser: argparse.ArgumentParser, out: list[str]) -> None:
    for name, sub in _subcommands(parser):
        full = f"{prefix} {name}"
        out.append(f"### `{full}`\n\n```text\n{sub.format_help().rstrip()}\n```\n")
        _walk(full, sub, out)


def reference() -> str:
    """Every command's help, as markdown sections, in the parser's order."""
    from reconciler.cli import build_parser

    os.environ.setdefault("COLUMNS", "100")  # argparse wraps to the terminal; fix it
    parser = build_parser()
    out = [f"```text\n{parser.format_help().rstrip()}\n```\n"]
    _walk("reconciler", parser, out)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, reference())
    return markdown
