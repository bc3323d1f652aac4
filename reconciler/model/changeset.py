"""What one apply pass did to each object: the change set.

``reconciler.kube`` returns these values instead of logging as it goes (the
habit of fluxcd/pkg ``ssa/changeset.go``); the ``apply``/``diff`` commands, the
daemon's logs, status records and commit messages are all rendered from them.
``ObjectRef`` names a Kubernetes object the same way everywhere
(``Deployment/web/podinfo``), so errors and output read alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Action(StrEnum):
    """What happened to one object in one pass."""

    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, order=True, slots=True)
class ObjectRef:
    """The identity of a Kubernetes object; ``namespace`` is "" for cluster-scoped ones."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference of a Kubernetes object dict (missing fields become "")."""
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion") or ""),
            kind=str(obj.get("kind") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"

    def to_dict(self) -> dict[str, str]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObjectRef:
        return cls(
            api_version=str(data.get("apiVersion", "")),
            kind=str(data.get("kind", "")),
            namespace=str(data.get("namespace", "")),
            name=str(data.get("name", "")),
        )


# the actions that wrote to the cluster (``ChangeSetEntry.changed``)
CHANGING = frozenset({Action.CREATED, Action.CONFIGURED, Action.DELETED})


@dataclass(frozen=True, slots=True)
class ChangeSetEntry:
    """One object's outcome; ``message`` explains skipped and failed entries."""

    instance: str
    kind: str
    api_version: str
    namespace: str
    name: str
    action: Action
    message: str = ""

    @classmethod
    def for_ref(
        cls, instance: str, ref: ObjectRef, action: Action, message: str = ""
    ) -> ChangeSetEntry:
        return cls(instance, ref.kind, ref.api_version, ref.namespace, ref.name, action, message)

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.api_version, self.kind, self.namespace, self.name)

    @property
    def changed(self) -> bool:
        return self.action in CHANGING

    def __str__(self) -> str:
        text = f"{self.ref} {self.action}"
        return f"{text}: {self.message}" if self.message else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "kind": self.kind,
            "apiVersion": self.api_version,
            "namespace": self.namespace,
            "name": self.name,
            "action": str(self.action),
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangeSetEntry:
        return cls(
            instance=str(data.get("instance", "")),
            kind=str(data.get("kind", "")),
            api_version=str(data.get("apiVersion", "")),
            namespace=str(data.get("namespace", "")),
            name=str(data.get("name", "")),
            action=Action(data["action"]),
            message=str(data.get("message", "")),
        )


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """The ordered outcomes of a pass (apply order, then prune order)."""

    entries: tuple[ChangeSetEntry, ...] = field(default=())

    def __add__(self, other: ChangeSet) -> ChangeSet:
        return ChangeSet(self.entries + other.entries)

    @classmethod
    def of(cls, entries: Iterable[ChangeSetEntry]) -> ChangeSet:
        return cls(tuple(entries))

    @property
    def failed(self) -> bool:
        return any(e.action is Action.FAILED for e in self.entries)

    @property
    def changed(self) -> bool:
        return any(e.changed for e in self.entries)

    def for_instance(self, instance: str) -> ChangeSet:
        """One instance's entries; a scan of the whole set, so for one look-up only.

        A caller asking for every instance of a pass uses :meth:`by_instance`:
        calling this once per instance costs instances x entries.
        """
        return ChangeSet(tuple(e for e in self.entries if e.instance == instance))

    def by_instance(self) -> dict[str, ChangeSet]:
        """Each instance's entries (in order), indexed with one scan of the set."""
        grouped: dict[str, list[ChangeSetEntry]] = {}
        for entry in self.entries:
            grouped.setdefault(entry.instance, []).append(entry)
        return {name: ChangeSet(tuple(entries)) for name, entries in grouped.items()}

    def count(self, action: Action) -> int:
        return sum(1 for e in self.entries if e.action is action)

    def summary(self) -> str:
        """``3 created, 1 configured, 4 unchanged`` (only actions that occurred)."""
        parts = [f"{self.count(a)} {a}" for a in Action if self.count(a)]
        return ", ".join(parts) if parts else "no objects"

    def to_dict(self) -> dict[str, Any]:
        return {"entries": [e.to_dict() for e in self.entries]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangeSet:
        return cls(tuple(ChangeSetEntry.from_dict(e) for e in data.get("entries", ())))
