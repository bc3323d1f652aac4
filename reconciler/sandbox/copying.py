"""Copies and JSON of stored objects: the sandbox's hot paths.

Copies are five times cheaper than ``copy.deepcopy``.

The sandbox copies an object on every read and write (stored objects are never
shared with a caller that may change them), and at a few thousand instances those
copies were 40% of its CPU (a profile of ``bench/rollout.py``): ``deepcopy`` walks
each value in Python with a memo dict. Objects in the store are JSON-like (dicts,
lists, strings, numbers, booleans, None), which pickle round-trips exactly and in C,
shared references included, as ``deepcopy`` keeps them.
"""

from __future__ import annotations

import contextlib
import json
import pickle
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")
V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """Values computed from objects that are never changed in place (stored objects
    and the maps inside them), remembered by the object's identity.

    An entry holds its object, so the id cannot be reused while it is remembered;
    every lookup also checks ``is``. At most ``limit`` entries, the oldest forgotten
    first (a forgotten value only costs computing it again). Safe to share between
    the sandboxes of one process (tests run several, each on its own thread).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: dict[int, tuple[Any, V]] = {}

    def get(self, obj: Any) -> V | None:
        known = self._entries.get(id(obj))
        return known[1] if known is not None and known[0] is obj else None

    def pop(self, obj: Any) -> V | None:
        known = self._entries.pop(id(obj), None)
        return known[1] if known is not None and known[0] is obj else None

    def put(self, obj: Any, value: V) -> None:
        if len(self._entries) >= self.limit:
            # another thread may change the dict meanwhile: then forget nothing now
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                del self._entries[next(iter(self._entries))]
        self._entries[id(obj)] = (obj, value)


def clone(value: T) -> T:
    """A deep copy of a JSON-like value (any picklable value, in fact)."""
    copied: T = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copied


def to_json(value: Any) -> bytes:
    """Compact JSON bytes, as the API server's encoder writes them (no spaces).

    orjson encodes a large list more than ten times faster than ``json.dumps``
    (serializing lists was a tenth of the sandbox's CPU). It refuses what JSON
    from Kubernetes never holds but a test may store (integers beyond 64 bits,
    keys that are not strings): those take the standard encoder.
    """
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, separators=(",", ":")).encode()
