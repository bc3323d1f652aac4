"""``--watch`` for the commands that read the status branch (``status``, ``rollout status``).

Both re-read the branch from Git every ``--interval`` (a fetch for a URL, so a
laptop follows a daemon that pushes elsewhere) and print again only when what
they show changed, so a quiet cluster prints nothing new. On a terminal the
screen is cleared before a redraw, like ``watch(1)``; off a terminal (a log, a
pipe) views are simply appended, so the file reads as a history.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from reconciler.commands.output import raw_stdout

# (text to print, key deciding "changed", finished)
View = tuple[str, object, bool]

CLEAR = "\x1b[H\x1b[2J"
_sleep = time.sleep  # looked up at call time, so a test can stand in for the wait


def follow(
    view: Callable[[], View],
    *,
    watch: bool,
    interval: float,
    clear: bool = False,
    separator: str = "",
    sleep: Callable[[float], None] | None = None,
) -> None:
    """Print ``view()``; with ``watch``, again whenever its key changes, until finished.

    ``clear`` redraws in place (terminals only); otherwise ``separator`` goes
    between two views. Ctrl-C ends a watch (``KeyboardInterrupt``, exit 130).
    """
    last: object = None
    first = True
    while True:
        text, key, finished = view()
        if first or key != last:
            if not first:
                # the one control sequence meant for the terminal: past the escaping
                (raw_stdout() if clear else sys.stdout).write(CLEAR if clear else separator)
            sys.stdout.write(text)
            sys.stdout.flush()
            last, first = key, False
        if not watch or finished:
            return
        (sleep or _sleep)(interval)
