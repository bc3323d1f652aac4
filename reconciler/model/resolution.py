"""The result of choosing a version for one instance, explainable line by line.

``resolve`` returns a ``Resolution`` rather than raising, so one instance that
cannot be resolved never stops the others, and ``resolve --explain``, the
status record and the CLI's JSON are all rendered from the same value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Candidate:
    """One catalog version considered for an instance and the verdict on it."""

    version: str
    kept: bool
    reason: str  # e.g. "chosen: highest in range", "yanked", "outside range >=6.0.0 <7.0.0"

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "kept": self.kept, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Resolution:
    """Which version an instance should run, where that came from, and why.

    ``version`` is the target the selection names; ``next_version`` is what to
    deploy now (the first step of ``upgrade_path``, the deployed version when a
    guard holds the instance, or ``version``). ``reason`` is a kstatus reason
    (``DowngradeBlocked``, ``NoUpgradePath``, ``ResolveFailed``) when the
    instance cannot simply move to ``version``; ``error`` says why in words.
    """

    cluster: str
    instance: str
    app: str
    source: str  # "channel:<name>" | "exact" | "range:<expr>" | "latest"
    version: str | None = None
    deployed: str | None = None
    upgrade_path: tuple[str, ...] = ()  # versions to pass through, ending at ``version``
    error: str | None = None  # set when no version can be chosen at all
    reason: str | None = None  # kstatus reason when failed or blocked
    message: str | None = None  # why a resolved instance is blocked (names the gap)
    warnings: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = field(default=(), compare=False)
    file: str = ""
    line: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def blocked(self) -> bool:
        """Resolved, but a guard keeps the instance where it is (Stalled)."""
        return self.version is not None and self.reason is not None

    @property
    def next_version(self) -> str | None:
        if self.version is None:
            return None
        if self.blocked:
            return self.deployed
        if self.upgrade_path:
            return self.upgrade_path[0]
        return self.version

    def to_dict(self, *, explain: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster,
            "instance": self.instance,
            "app": self.app,
            "source": self.source,
        }
        if self.version is not None:
            out["version"] = self.version
        if self.error is not None:
            out["error"] = self.error
        if self.reason is not None:
            out["reason"] = self.reason
        if self.message is not None:
            out["message"] = self.message
        if self.deployed is not None:
            out["deployed"] = self.deployed
        if self.upgrade_path:
            out["upgradePath"] = list(self.upgrade_path)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if explain:
            out["candidates"] = [c.to_dict() for c in self.candidates]
        return out
