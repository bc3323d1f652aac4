"""``dump_status``'s bytes, written without PyYAML's representer for the usual records.

A first pass over 10,000 instances writes 10,000 records; PyYAML's representer
(pure Python, about 35 nodes per record) cost more than everything else the
ledger does for them. Status records are small block mappings of strings,
numbers, lists and mappings, so ``dump_record`` lays them out itself and asks
PyYAML only how to write a scalar it cannot prove plain (remembered per value:
``'True'``, a quoted message, a timestamp). Anything else, or anything long
enough for PyYAML to fold, goes to ``dump_status`` whole. The output is
byte-for-byte ``dump_status``'s (tests compare them on generated records), so
blob ids do not depend on which path wrote a record.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from reconciler.model.status import InstanceStatus
from reconciler.status import dump_status

try:  # the same dumper as reconciler.status.records
    from yaml import CSafeDumper as _Dumper
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]

# Starts with a letter, then letters, digits and ``_./+-``, or a colon followed by
# one of those: PyYAML writes such a string plain unless it reads back as a bool
# or null (checked below); it never reads back as a number or a timestamp.
_PLAIN = re.compile(r"[A-Za-z](?:[A-Za-z0-9_./+-]|:(?=[A-Za-z0-9_./+-]))*\Z")
_NOT_PLAIN = frozenset(
    ["yes", "no", "true", "false", "on", "off", "null"]
)  # compared lowercased: PyYAML's bool and null words
_SHORT = 100  # a plain key stays a simple key (PyYAML's limit is 128)
_LONGEST = 200  # far from the emitter's width (1000): no folding at any depth
_MEMO_LIMIT = 50_000
# how PyYAML writes each string as a key and as a value, and other scalars (few)
_keys: dict[str, str] = {}
_values: dict[str, str] = {}
_others: dict[tuple[type, object, bool], str] = {}


class _Unusual(Exception):
    """A record this writer does not lay out; ``dump_status`` does."""


def dump_record(status: InstanceStatus) -> bytes:
    """The file content for ``status``, identical to ``dump_status(status)``."""
    try:
        out: list[str] = []
        _mapping(status.to_dict(), "", out)
        return "".join(out).encode("utf-8")
    except _Unusual:
        return dump_status(status)


def _mapping(data: dict[Any, Any], pad: str, out: list[str], first: str | None = None) -> None:
    """Block mapping at indent ``pad``; ``first`` replaces the first line's indent ("- ")."""
    for key, value in data.items():
        head = (first if first is not None else pad) + _scalar(key, key=True) + ":"
        first = None
        if type(value) is dict:
            if value:
                out.append(head + "\n")
                _mapping(value, pad + "  ", out)
            else:
                out.append(head + " {}\n")
        elif type(value) is list:
            if value:
                out.append(head + "\n")
                _sequence(value, pad, out)  # PyYAML's sequences in mappings are indentless
            else:
                out.append(head + " []\n")
        else:
            out.append(head + " " + _scalar(value) + "\n")


def _sequence(items: list[Any], pad: str, out: list[str]) -> None:
    for item in items:
        if type(item) is dict:
            if item:
                _mapping(item, pad + "  ", out, first=pad + "- ")
            else:
                out.append(pad + "- {}\n")
        elif type(item) is list:
            raise _Unusual  # a sequence in a sequence: rare, left to PyYAML
        else:
            out.append(pad + "- " + _scalar(item) + "\n")


def _scalar(value: object, *, key: bool = False) -> str:
    if type(value) is str:
        cache = _keys if key else _values
        text = cache.get(value)
        if text is None:
            text = _string(value, key=key)
            if len(cache) >= _MEMO_LIMIT:
                cache.clear()
            cache[value] = text
        return text
    if type(value) not in (int, bool, float) and value is not None:
        raise _Unusual
    memo_key = (type(value), value, key)
    text = _others.get(memo_key)
    if text is None:
        text = _others[memo_key] = _ask_pyyaml(value, key=key)
    return text


def _string(value: str, *, key: bool) -> str:
    if len(value) <= _SHORT and _PLAIN.match(value) and value.lower() not in _NOT_PLAIN:
        return value
    if len(value) > _LONGEST or "\n" in value:
        raise _Unusual
    return _ask_pyyaml(value, key=key)


def _ask_pyyaml(value: object, *, key: bool) -> str:
    """How PyYAML writes ``value`` as a mapping's key or value."""
    data = {value: 0} if key else {"k": value}
    text = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1000,
    )
    if key:
        if not text.endswith(": 0\n") or "\n" in text[:-1] or text.startswith("?"):
            raise _Unusual
        return text[: -len(": 0\n")]
    if not text.startswith("k: ") or "\n" in text[:-1]:
        raise _Unusual
    return text[len("k: ") : -1]
