"""Text from a catalog, a registry or a status branch, made safe to show on a terminal.

Anyone who can open a pull request writes text we print: a ``deprecated:`` note, a
tag, a condition message in a forged status record. Raw, an ``ESC[2J`` in it
clears the reader's screen, an OSC 52 sequence (``ESC]52;c;...BEL``) writes their
clipboard, a carriage return overwrites the line it is on. So every line for people
(the CLI's text output and the daemon's text log) goes through ``printable``: C0
control characters except newline and tab, DEL and the C1 range become visible
``\\xNN`` escapes; an escape sequence is defused by escaping its ESC, so the rest of
it reads as plain text. JSON and YAML outputs need none of this: their encoders
escape control characters themselves.

The CLI's own colour codes are the one exception, and only when colour is on: the
caller passes them as ``keep``, exact sequences that pass unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# an SGR or other CSI sequence (so a kept colour code is matched whole), or one
# control character: C0 but \t and \n, DEL, C1
_CONTROL = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, keep: Collection[str] = ()) -> str:
    """``text`` with every control character shown as ``\\xNN``, but the sequences in ``keep``."""
    if not _CONTROL.search(text):
        return text  # the common case: one scan, no copy

    def escape(match: re.Match[str]) -> str:
        found = match.group()
        if found in keep:
            return found
        return f"\\x{ord(found[0]):02x}{found[1:]}"

    return _CONTROL.sub(escape, text)
