"""What a preview found, as values: the report formats (text, markdown, JSON) render these.

Kept apart from the computation (``reconciler.preview.build``) so the three
formats agree by construction, like the daemon's change sets feed its logs,
status records and commit messages alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.model.problems import Problem

ADDED = "added"
REMOVED = "removed"
VERSION = "version"  # the version that runs changes
OBJECTS = "objects"  # same version, different objects (parameters, instance settings)
BUILDS = "builds"  # same version, other pinned image builds (SPEC section 8): a rollout
FAILING = "failing"  # the head cannot plan this instance (its reason says why)


@dataclass(frozen=True)
class ObjectChanges:
    """Rendered objects at the base against the head, named ``Kind/namespace/name``."""

    created: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    unchanged: int = 0
    diff: str = ""  # unified diff, Secrets masked (only when asked for)

    @property
    def total(self) -> int:
        return len(self.created) + len(self.changed) + len(self.deleted)

    def summary(self) -> str:
        if not self.total:
            return "no object changes"
        parts = [
            f"{n} {label}"
            for n, label in (
                (len(self.changed), "changed"),
                (len(self.created), "created"),
                (len(self.deleted), "deleted"),
            )
            if n
        ]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "created": list(self.created),
            "changed": list(self.changed),
            "deleted": list(self.deleted),
            "unchanged": self.unchanged,
        }
        if self.diff:
            out["diff"] = self.diff
        return out


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload's cumulative replica targets, batch by batch."""

    ref: str
    replicas: int | None  # None: a DaemonSet (one pod per node, counted in the cluster)
    targets: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"object": self.ref, "replicas": self.replicas, "targets": list(self.targets)}


@dataclass(frozen=True)
class RolloutPreview:
    """How the change would reach the cluster: in batches (SPEC section 4) or at once."""

    batched: bool
    reason: str  # why at once ("first install", ...) or where the plan comes from
    batches: tuple[str, ...] = ()
    workloads: tuple[WorkloadPlan, ...] = ()
    partition: int | None = None
    paused: bool = False
    on_failure: str = "hold"
    steps: tuple[str, ...] = ()  # the upgrade path, when it has more than one step

    def describe(self) -> str:
        if not self.batched:
            return f"applied at once ({self.reason})"
        text = (
            f"in batches [{', '.join(self.batches)}] ({self.reason}), onFailure {self.on_failure}"
        )
        if self.partition is not None:
            text += f", stops after batch {self.partition} until promoted (partition)"
        if self.paused:
            text += ", paused"
        if len(self.steps) > 1:
            text += f"; one rollout per upgrade step ({' -> '.join(self.steps)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batched": self.batched, "reason": self.reason}
        if self.batched:
            out.update(
                batches=list(self.batches),
                workloads=[w.to_dict() for w in self.workloads],
                partition=self.partition,
                paused=self.paused,
                onFailure=self.on_failure,
            )
        if self.steps:
            out["steps"] = list(self.steps)
        return out


@dataclass(frozen=True)
class MigrationPreview:
    """A migration the change would consider (its check and the ledger decide if it runs)."""

    name: str
    version: str  # the version that ships it
    phase: str
    scope: str
    check: str  # what its check looks at, or "no check: runs once"
    skipped: bool = False  # a deployedVersion filter rules it out already

    def describe(self) -> str:
        skipped = " (skipped: deployedVersion filter)" if self.skipped else ""
        return (
            f"{self.name} ({self.phase}, {self.scope}, from {self.version}): {self.check}{skipped}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "phase": self.phase,
            "scope": self.scope,
            "check": self.check,
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class InstanceChange:
    """What the change does to one instance of one cluster."""

    cluster: str
    instance: str
    app: str
    kind: str  # ADDED | REMOVED | VERSION | BUILDS | OBJECTS | FAILING
    from_version: str | None
    to_version: str | None
    via: str  # the selector at the head, e.g. "channel stable"
    why: str = ""  # what moved it, e.g. "channel stable moved 6.5.0 -> 6.6.0"
    objects: ObjectChanges = field(default_factory=ObjectChanges)
    rollout: RolloutPreview | None = None
    migrations: tuple[MigrationPreview, ...] = ()
    upgrade_path: tuple[str, ...] = ()
    error: str | None = None  # the head cannot apply it: "Reason: message"
    notes: tuple[str, ...] = ()
    # BUILDS: (image, long tag at the base, long tag at the head) of each image whose
    # build moves; an unpinned side is the tag the version names
    builds: tuple[tuple[str, str, str], ...] = ()

    def builds_text(self) -> str:
        """``web 2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1`` (comma-separated for several)."""
        return ", ".join(f"{image} {old} -> {new}" for image, old, new in self.builds)

    def headline(self) -> str:
        """``web: 6.5.0 -> 6.6.0 via channel stable`` (SPEC section 7's wording)."""
        name = self.instance
        if self.kind == ADDED:
            return f"{name}: added, installs {self.app} {self.to_version or '?'} via {self.via}"
        if self.kind == REMOVED:
            return f"{name}: removed, uninstalls {self.app} {self.from_version or '?'}"
        if self.kind == FAILING:
            return f"{name}: cannot be applied at the head"
        if self.kind == VERSION:
            return f"{name}: {self.from_version} -> {self.to_version} via {self.via}"
        if self.kind == BUILDS:
            return f"{name}: {self.to_version} builds {self.builds_text()}"
        return f"{name}: {self.from_version} (same version), objects change"

    def arrow(self) -> str:
        """``6.5.0 -> 6.6.0`` with a dash for the side that has none."""
        if self.kind == BUILDS:
            return f"{self.to_version} builds {self.builds_text()}"
        return f"{self.from_version or '-'} -> {self.to_version or '-'}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster,
            "instance": self.instance,
            "app": self.app,
            "change": self.kind,
            "from": self.from_version,
            "to": self.to_version,
            "via": self.via,
            "why": self.why,
            "objects": self.objects.to_dict(),
            "rollout": self.rollout.to_dict() if self.rollout is not None else None,
            "migrations": [m.to_dict() for m in self.migrations],
        }
        if self.upgrade_path:
            out["upgradePath"] = list(self.upgrade_path)
        if self.error is not None:
            out["error"] = self.error
        if self.notes:
            out["notes"] = list(self.notes)
        if self.builds:
            out["builds"] = [{"image": i, "from": a, "to": b} for i, a, b in self.builds]
        return out


@dataclass(frozen=True)
class WaveStep:
    """One wave's share of a release: its clusters and instances, and what they wait for."""

    wave: str
    clusters: tuple[str, ...]
    instances: int
    now: bool  # no earlier wave runs the app: starts with the change
    soak: str = ""  # as written, when it guards this wave
    approval: bool = False  # an approval commit is still needed

    def describe(self, *, counts: bool) -> str:
        shown = ""
        if counts:
            n = len(self.clusters)
            shown = f": {n} cluster{'s' * (n != 1)}, {self.instances} instance" + (
                "s" * (self.instances != 1)
            )
        if self.now:
            return f"{self.wave} now{shown}"
        if self.soak and self.approval:
            gate = f"after {self.soak} soak and an approval"
        elif self.soak:
            gate = f"after {self.soak}"
        elif self.approval:
            gate = "after an approval"
        else:
            gate = "after the earlier waves are Ready"
        return f"{self.wave} {gate}{shown}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "wave": self.wave,
            "clusters": list(self.clusters),
            "instances": self.instances,
            "now": self.now,
            "soak": self.soak or None,
            "approval": self.approval,
        }


@dataclass(frozen=True)
class WavePlan:
    """How one app's new version crosses the waves; ``error`` when waves.yaml is broken."""

    app: str
    version: str
    steps: tuple[WaveStep, ...] = ()
    error: str | None = None

    def describe(self) -> str:
        """``canary now: 2 clusters, 3 instances; eu after 1h soak and an approval; rest
        after 30m`` (the first step with its counts)."""
        if self.error is not None:
            return f"held everywhere: {self.error}"
        return "; ".join(s.describe(counts=i == 0) for i, s in enumerate(self.steps))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "app": self.app,
            "version": self.version,
            "plan": self.describe(),
            "steps": [s.to_dict() for s in self.steps],
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class Preview:
    """The whole answer: per cluster what changes, and the validation problems."""

    base_rev: str
    base_commit: str
    head_rev: str
    head_commit: str
    clusters: tuple[str, ...]  # the clusters looked at (both commits, or --cluster)
    changes: tuple[InstanceChange, ...]
    new_problems: tuple[Problem, ...] = ()
    existing_problems: tuple[Problem, ...] = ()  # on the base already, still on the head
    fixed_problems: tuple[Problem, ...] = ()  # on the base, gone at the head
    warnings: tuple[str, ...] = ()  # cluster-wide notes (e.g. the mass-prune guard)
    unchanged: int = 0  # instances the diff touched that end up the same
    waves: tuple[WavePlan, ...] | None = None  # None: the head has no waves.yaml

    @property
    def new_errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.new_problems if p.is_error)

    @property
    def anything_changes(self) -> bool:
        return bool(self.changes)

    def in_cluster(self, cluster: str) -> list[InstanceChange]:
        return [c for c in self.changes if c.cluster == cluster]

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": {"rev": self.base_rev, "commit": self.base_commit},
            "head": {"rev": self.head_rev, "commit": self.head_commit},
            "valid": not self.new_errors,
            "changes": self.anything_changes,
            "clusters": [
                {"cluster": c, "instances": [i.to_dict() for i in self.in_cluster(c)]}
                for c in self.clusters
            ],
            "problems": {
                "new": [p.to_dict() for p in self.new_problems],
                "existing": [p.to_dict() for p in self.existing_problems],
                "fixed": [p.to_dict() for p in self.fixed_problems],
            },
            "warnings": list(self.warnings),
        } | ({} if self.waves is None else {"waves": [w.to_dict() for w in self.waves]})
