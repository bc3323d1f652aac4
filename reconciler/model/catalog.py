"""Catalog objects: apps, channels, app versions, clusters and instances.

They are frozen values built by ``reconciler.catalog`` from a checkout. Every
object remembers the file it came from and the line of each top-level key, so
later stages (resolve, render, the daemon) can point a user at the exact line
without reading YAML again.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from reconciler.model.analysis import PrometheusAnalysis
from reconciler.model.builds import ImageBuild, ImageBuilds
from reconciler.model.migrations import Deprecation, MigrationCheck
from reconciler.model.placeholders import Path, placeholder_paths
from reconciler.model.problems import Problem
from reconciler.model.sizes import json_size
from reconciler.model.version import Version
from reconciler.model.waves import Waves


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an object was read from: a path relative to the catalog root and key lines."""

    file: str
    lines: Mapping[str, int] = field(default_factory=dict)

    def line(self, key: str | None = None) -> int | None:
        """Line of a top-level key, or of the document start when unknown."""
        if key is not None and key in self.lines:
            return self.lines[key]
        return self.lines.get("", 1)


@dataclass(frozen=True)
class Batch:
    """One rollout step: an absolute replica count or a percentage of replicas."""

    value: int
    percent: bool = False

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)

    def to_yaml(self) -> int | str:
        return str(self) if self.percent else self.value


@dataclass(frozen=True)
class Promotion:
    """An approval of one rollout: batches up to ``through`` of the rollout to ``to``.

    ``rollout promote`` writes it (``promoted: {to: 6.6.0, through: 2}``). It is
    bound to the target version, so it never opens the gate of a later release:
    ``partition`` stays the policy for every rollout of the instance.
    """

    to: str
    through: int


@dataclass(frozen=True)
class RolloutPlan:
    """A batch plan (SPEC section 4): batches, an optional partition and a pause.

    ``given`` names the keys the file actually set (``batches``, ``onFailure``...), so
    ``reconciler.rollout.merge_plans`` can let an instance file override a version's
    plan key by key without a default hiding the version's value.
    """

    batches: tuple[Batch, ...] = ()
    partition: int | None = None
    paused: bool = False
    on_failure: str = "hold"  # "hold" | "rollback"
    health_timeout_seconds: int = 300
    pause_seconds: int = 0
    # a Job manifest path relative to the version directory, or Prometheus queries
    analysis: str | PrometheusAnalysis | None = None
    promoted: Promotion | None = None  # only in an instance file
    given: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Parameter:
    """A parameter an app version accepts; ``required`` when it has no default."""

    name: str
    default: Any = None
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Migration:
    """A migration hook (SPEC section 5) as declared by a version."""

    name: str
    phase: str  # "pre" | "post" | "uninstall"
    scope: str = "app"  # "app" | "global"
    check: MigrationCheck = field(default_factory=MigrationCheck)
    job: str | None = None  # Job manifest path relative to the version directory
    python: str | None = None  # the name a Python migration is registered under
    undo: str | None = None  # Job manifest (or, with ``python``, true) that reverses it
    timeout_seconds: int = 600
    deprecated: Deprecation | None = None
    line: int | None = field(default=None, compare=False)  # of the entry in version.yaml

    def to_dict(self) -> dict[str, Any]:
        """The entry as written (defaults filled in): part of its checksum."""
        out: dict[str, Any] = {"name": self.name, "phase": self.phase, "scope": self.scope}
        if not self.check.empty:
            out["check"] = self.check.to_dict()
        for key, value in (("job", self.job), ("python", self.python), ("undo", self.undo)):
            if value is not None:
                out[key] = value
        out["timeoutSeconds"] = self.timeout_seconds
        if self.deprecated is not None:
            out["deprecated"] = self.deprecated.to_dict()
        return out


@dataclass(frozen=True)
class Template:
    """One parsed manifest document of a version, still holding ``${...}`` placeholders.

    Parsed once when the catalog is loaded, so rendering an instance is pure
    computation; ``data`` must be treated as read-only (render builds new values).
    """

    file: str  # relative to the catalog root
    index: int  # document number within the file, from 0
    data: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", ""))

    @cached_property
    def placeholder_paths(self) -> tuple[Path, ...] | None:
        """Where ``data`` holds placeholders (see :func:`placeholder_paths`), found once."""
        return placeholder_paths(self.data)

    @cached_property
    def size(self) -> int:
        """About how many characters ``data`` takes as JSON, aliases counted per use, found once.

        Rendering adds what its placeholders change to this, so it can bound an
        object's size before building it (``render.MAX_OBJECT_BYTES``). The walk
        is bounded: the reader caps a file's size and the nodes its aliases add.
        """
        return json_size(self.data, sys.maxsize)


@dataclass(frozen=True)
class App:
    name: str
    description: str = ""
    owners: tuple[str, ...] = ()
    origin: Origin = field(default_factory=lambda: Origin(""))


@dataclass(frozen=True)
class Channels:
    """The channel pointer file: channel name -> version string."""

    app: str
    channels: Mapping[str, str]
    origin: Origin = field(default_factory=lambda: Origin(""))
    channel_lines: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class AppVersion:
    app: str
    version: Version
    directory: str  # relative to the catalog root, e.g. apps/podinfo/versions/6.6.0
    upgrade_from: str | None = None
    yanked: bool = False
    deprecated: str | None = None
    images: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, Parameter] = field(default_factory=dict)
    rollout: RolloutPlan | None = None
    migrations: tuple[Migration, ...] = ()
    manifests: tuple[str, ...] = ()  # files relative to the catalog root, sorted
    templates: tuple[Template, ...] = ()  # parsed documents of ``manifests``
    migration_jobs: Mapping[str, Template] = field(default_factory=dict)  # migration name -> Job
    undo_jobs: Mapping[str, Template] = field(default_factory=dict)  # migration name -> undo Job
    # rollout analysis Jobs by their path (relative to the version directory): the one
    # version.yaml names and those instance files of the app name that this version has
    analysis_jobs: Mapping[str, Template] = field(default_factory=dict)
    origin: Origin = field(default_factory=lambda: Origin(""))
    valid: bool = True  # False when any file of this version has an error

    @cached_property
    def key(self) -> str:
        """The version as text: one string per version, which every plan, resolution
        and record of its instances shares (``str`` would make a new one per call)."""
        return str(self.version)


# ``inventory`` in cluster.yaml: where each instance's inventory is kept
INVENTORY_PER_INSTANCE = "perInstance"  # a ConfigMap each (the default)
INVENTORY_PER_NAMESPACE = "perNamespace"  # one ConfigMap per namespace holds them all


@dataclass(frozen=True)
class Cluster:
    name: str
    allowed_namespaces: tuple[str, ...] | None = None  # None: any namespace
    allow_cluster_scoped: bool = True
    # prune.maxRemovedInstances: how many instances one commit may uninstall
    max_removed: int | None = None  # an absolute count; None: use ``max_removed_percent``
    max_removed_percent: int = 50
    labels: Mapping[str, str] = field(default_factory=dict)  # what waves.yaml matchLabels see
    # where inventories are written (``kube.inventory_writes``)
    inventory: str = INVENTORY_PER_INSTANCE
    origin: Origin = field(default_factory=lambda: Origin(""))
    # False when cluster.yaml exists but cannot be read or is invalid: its limits are
    # unknown, so nothing may be written to the cluster (fail closed, never widen)
    valid: bool = True
    # True when the limits come from a cluster.yaml (read, or there and unreadable):
    # inventories then record the file, and a later commit may not drop it
    declared: bool = False


@dataclass(frozen=True, slots=True)
class Instance:
    """What one cluster runs of one app; exactly one of ``channel``/``version`` is set."""

    name: str
    cluster: str
    app: str
    namespace: str
    channel: str | None = None
    version: str | None = None  # an exact version, a range expression or "latest"
    parameters: Mapping[str, Any] = field(default_factory=dict)
    allow_downgrade: bool = False
    allow_prerelease: bool = False
    suspend: bool = False
    allow_empty_prune: bool = False
    rollout: RolloutPlan | None = None
    origin: Origin = field(default_factory=lambda: Origin(""))
    valid: bool = True  # False when the instance file has an error; keep its last good state

    @property
    def selector_key(self) -> str:
        """The key the selection came from, for pointing at its line."""
        return "channel" if self.channel is not None else "version"


@dataclass
class AppEntry:
    """Everything the catalog holds for one app directory."""

    name: str
    app: App | None = None
    channels: Channels | None = None
    versions: dict[str, AppVersion] = field(default_factory=dict)
    # apps/<app>/builds.yaml: the pinned rebuilds of its images (SPEC section 8); only
    # entries the loader checked are in it, a broken one made its version invalid
    builds: ImageBuilds | None = None

    def builds_of(self, version: str) -> Mapping[str, ImageBuild]:
        """The pinned builds of one version's images (empty without builds.yaml)."""
        return self.builds.for_version(version) if self.builds is not None else {}

    # ``sorted_versions``'s last answer, with the versions it sorted (not compared: a cache)
    _sorted: tuple[tuple[AppVersion, ...], tuple[AppVersion, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def sorted_versions(self) -> list[AppVersion]:
        """The versions, lowest first.

        Resolving each instance asks for them several times, and SemVer's comparisons
        are slow: the order is kept while ``versions`` holds the very same objects (the
        loader replaces an entry to change it).
        """
        now = tuple(self.versions.values())
        cached = self._sorted
        if (
            cached is None
            or len(cached[0]) != len(now)
            or not all(map(operator.is_, cached[0], now))
        ):
            cached = self._sorted = (now, tuple(sorted(now, key=lambda v: v.version)))
        return list(cached[1])


@dataclass
class ClusterEntry:
    name: str
    cluster: Cluster
    instances: dict[str, Instance] = field(default_factory=dict)

    def removal_allowed(self, removed: int, total: int) -> bool:
        """May one commit uninstall ``removed`` of the ``total`` instances the cluster runs?

        SPEC section 3: more than half of them (or all of them) is refused unless
        ``prune.maxRemovedInstances`` allows it; a renamed ``instances/`` directory
        or an emptied catalog must not uninstall a whole cluster.
        """
        if removed == 0:
            return True
        cluster = self.cluster
        if cluster.max_removed is not None:
            return removed <= cluster.max_removed
        if removed >= total and cluster.max_removed_percent < 100:
            return False
        return removed * 100 <= total * cluster.max_removed_percent

    @property
    def namespaces(self) -> dict[str, str]:
        """Instance name -> the namespace Git gives it (where its inventory must live)."""
        return {name: inst.namespace for name, inst in self.instances.items() if inst.namespace}


@dataclass
class Catalog:
    """A loaded catalog checkout: apps, clusters and the problems found loading them.

    Objects whose files were broken are absent (or recorded in
    ``ClusterEntry.broken_instances``); ``problems`` says why. Callers decide
    whether errors are fatal: ``validate`` reports them, the daemon keeps the
    last good state of the affected instances and carries on with the rest.
    """

    root: str
    apps: dict[str, AppEntry] = field(default_factory=dict)
    clusters: dict[str, ClusterEntry] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    # files (relative paths) that have at least one error, for telling a broken
    # commit (CatalogInvalid) apart from a selection that cannot be met (ResolveFailed)
    files_with_errors: set[str] = field(default_factory=set)
    # waves.yaml (SPEC section 4b); None when the catalog has none: no wave holds anything
    waves: Waves | None = None

    def builds_of(self, version: AppVersion) -> Mapping[str, ImageBuild]:
        """The builds ``version``'s app's builds.yaml pins for it (SPEC section 8)."""
        entry = self.apps.get(version.app)
        return entry.builds_of(version.key) if entry is not None else {}

    def cluster_errors(self, cluster: str) -> list[str]:
        """The files of ``clusters/<cluster>/`` (or the directory itself) with errors, sorted.

        A commit with any of them removes no instance of the cluster: a renamed
        instance file or ``instances/`` directory is an "unexpected" error, and must
        never read as the deletion that uninstalls (SPEC section 3b).
        """
        top = f"clusters/{cluster}"
        return sorted(f for f in self.files_with_errors if f == top or f.startswith(top + "/"))

    def has_errors_in(self, *paths: str) -> bool:
        """True if any file equal to, or under the directory of, one of ``paths`` has errors."""
        for bad in self.files_with_errors:
            for path in paths:
                if bad == path or bad.startswith(path.rstrip("/") + "/"):
                    return True
        return False
