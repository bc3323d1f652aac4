"""How large a YAML/JSON value would be written out, counted without writing it.

Rendering bounds the size of what it builds (``render.MAX_OBJECT_BYTES``) before
building it: a 1 MB parameter used 1,000 times in one manifest, or one anchored
string aliased 10,000 times, is a few megabytes of catalog and gigabytes of
JSON. Counting walks the value once, shares nothing with the encoder, and stops
as soon as the count passes the caller's limit, so counting a bomb is as cheap
as counting a sane object. Aliased values are counted once per use, which is
what an encoder would write.
"""

from __future__ import annotations

from typing import Any

# what a key or scalar of no known size counts (a date, a key that is not a string)
_OTHER = 32


def json_size(value: Any, limit: int) -> int:
    """About how many characters ``value`` takes as compact JSON; past ``limit``, stops early.

    An estimate (string escapes are not counted), enough to tell a bounded object
    from one that would take gigabytes. Once the count passes ``limit``, the
    answer is some number above ``limit``.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, dict):
            total += 2 + 2 * len(item)  # braces, a colon and a comma per entry
            for key, child in item.items():
                total += len(key) + 2 if isinstance(key, str) else _scalar_size(key)
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += _scalar_size(item)
        if total > limit:
            return total
    return total


def _scalar_size(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 5
    if isinstance(value, int | float):
        # numbers from YAML are short (the reader refuses over 100 characters)
        return len(str(value)) if -(10**100) < value < 10**100 else _OTHER * 4
    return _OTHER


def text_size(value: Any, limit: int) -> int:
    """Characters of ``value`` written into a string (a string as itself, others as JSON)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (dict, list, tuple)):
        return json_size(value, limit)
    return _scalar_size(value)


__all__ = ["json_size", "text_size"]
