"""An instance's rendered objects as a plan keeps them: compact JSON, decoded when read.

A pass renders every instance before it applies any (the check that no two
instances render the same object needs them all), so every rendered object of
the cluster is alive at once until the pass ends: as Python dicts, a
Deployment, a Service and a ConfigMap are about 7 KiB per instance, the
largest part of a first pass's peak memory at thousands of instances
(bench/scale.py). Kept as their JSON they are a fifth of that. What the pass
asks of every plan without needing the objects whole (their references, for
health, the lanes of concurrent applies and the one-owner check; their count,
for the status record) is kept beside it, so an object is decoded only where
it is used whole: the apply, a rollout's workloads, a diff.

Each read returns fresh dicts (as ``LiveState.get`` does): a caller may change
what it got without changing the plan.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any, overload

import orjson

from reconciler.kube.live import own_ref
from reconciler.model.changeset import ObjectRef
from reconciler.render import object_key

JsonObject = dict[str, Any]
ObjectKey = tuple[str, str, str, str]  # ``render.object_key``: group, kind, namespace, name


class RenderedObjects(Sequence[JsonObject]):
    """An immutable sequence of rendered objects, stored as one compact JSON array."""

    __slots__ = ("_data", "refs")

    _data: bytes
    refs: tuple[ObjectRef, ...]  # ``ObjectRef.of`` of each object, in order

    def __init__(self, data: bytes, refs: tuple[ObjectRef, ...]) -> None:
        self._data = data
        self.refs = refs

    @classmethod
    def pack(cls, objects: Sequence[JsonObject]) -> Sequence[JsonObject]:
        """``objects`` packed, or as a tuple when JSON would not give them back equal.

        Rendered objects come from YAML and are plain JSON values; anything else
        (a tuple, a key that is not a string, a date) is kept as it is rather than
        changed by a round trip, so packing never changes what a plan holds.
        """
        if isinstance(objects, RenderedObjects):
            return objects
        items = list(objects)
        if not items:
            return ()
        try:
            data = orjson.dumps(items)
        except TypeError:
            return tuple(items)
        if orjson.loads(data) != items:
            return tuple(items)
        refs = tuple(_ref(obj) for obj in items)
        if any(object_key(obj) != ref_key(ref) for obj, ref in zip(items, refs, strict=True)):
            return tuple(items)  # no kind or name: ``keys_of`` must read the objects
        # a copy of exactly its size: orjson's answer keeps the capacity it wrote into
        return cls(bytes(memoryview(data)), refs)

    def _decoded(self) -> list[JsonObject]:
        items: list[JsonObject] = orjson.loads(self._data)
        return items

    def __len__(self) -> int:
        return len(self.refs)

    def __iter__(self) -> Iterator[JsonObject]:
        return iter(self._decoded())

    def __reversed__(self) -> Iterator[JsonObject]:
        return reversed(self._decoded())

    @overload
    def __getitem__(self, index: int) -> JsonObject: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[JsonObject]: ...

    def __getitem__(self, index: int | slice) -> JsonObject | Sequence[JsonObject]:
        if isinstance(index, slice):
            return tuple(self._decoded()[index])
        return self._decoded()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RenderedObjects):
            return self._data == other._data or self._decoded() == other._decoded()
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == len(self) and list(other) == self._decoded()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a tuple of dicts: not hashable

    def __repr__(self) -> str:
        return f"RenderedObjects({self._decoded()!r})"

    @property
    def nbytes(self) -> int:
        """The size of the packed JSON (what the plan holds besides the references)."""
        return len(self._data)


def refs_of(objects: Sequence[JsonObject]) -> list[ObjectRef]:
    """``ObjectRef.of`` of each object, without decoding packed ones."""
    if isinstance(objects, RenderedObjects):
        return list(objects.refs)
    return [ObjectRef.of(obj) for obj in objects]


def keys_of(objects: Sequence[JsonObject]) -> list[ObjectKey]:
    """``render.object_key`` of each object, without decoding packed ones.

    Made of the references' strings, so what the daemon's memo keeps of a settled
    instance (its objects' keys, their health) holds one copy of each name.
    """
    if isinstance(objects, RenderedObjects):
        return [ref_key(ref) for ref in objects.refs]
    return [object_key(obj) for obj in objects]


def ref_key(ref: ObjectRef) -> ObjectKey:
    """``render.object_key`` of the object ``ref`` names, made of ``ref``'s strings."""
    group = _GROUPS.get(ref.api_version)
    if group is None:  # a pass asks for every object of every settled instance
        group = _GROUPS[ref.api_version] = sys.intern(ref.group)
    return (group, ref.kind, ref.namespace, ref.name)


_GROUPS: dict[str, str] = {}  # API version -> its group, interned (a few of them)


def _ref(obj: JsonObject) -> ObjectRef:
    """The object's reference (``live.own_ref``): the few distinct API versions, kinds and
    namespaces are interned, so the plans of thousands of instances share one string of
    each, and nothing of it keeps the dropped rendered dict's strings alive."""
    return own_ref(ObjectRef.of(obj))
