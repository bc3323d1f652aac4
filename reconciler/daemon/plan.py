"""Compose catalog -> resolve -> render into one plan per instance, and full validation.

This is the part of a reconcile pass that needs no cluster: the ``resolve``,
``render`` and ``validate`` commands call it directly, ``apply`` and the daemon
call it with the versions read from the cluster's inventories. Each instance is
planned on its own, so a broken file or an unmet selection turns into a named
reason on that instance only (``CatalogInvalid``, ``ResolveFailed``,
``DowngradeBlocked``, ``NoUpgradePath``) and never stops the others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol

from reconciler.daemon.rendered import RenderedObjects, keys_of
from reconciler.migrations import Registry, check_migrations, migration_checksum
from reconciler.model.catalog import AppVersion, Catalog, Instance
from reconciler.model.errors import UsageError
from reconciler.model.gcpause import gc_paused
from reconciler.model.problems import Problem, Severity
from reconciler.model.resolution import Resolution
from reconciler.model.rollout import release_key
from reconciler.render import render_instance
from reconciler.resolve import RangeSyntaxError, parse_range, resolve_instance, selector_source
from reconciler.rollout import PlanError, merge_plans

CATALOG_INVALID = "CatalogInvalid"
RESOLVE_FAILED = "ResolveFailed"

ObjectKey = tuple[str, str, str, str]  # ``render.object_key``: group, kind, namespace, name


NO_IMAGES: Mapping[str, str] = MappingProxyType({})  # read-only: shared by every plan


@dataclass(frozen=True, slots=True)
class InstancePlan:
    """What one instance should run now, its objects, and why not when it cannot."""

    instance: Instance
    resolution: Resolution
    version: AppVersion | None = None  # the version to deploy now (``resolution.next_version``)
    # kept packed (``RenderedObjects``): a pass holds every instance's plan at once
    objects: Sequence[dict[str, Any]] = ()
    problems: tuple[Problem, ...] = ()
    reason: str | None = None  # kstatus reason when the instance cannot proceed
    message: str | None = None
    # the image builds ``builds.yaml`` pins for ``version`` (image -> "tag@digest"),
    # which ``objects`` run (SPEC section 8); empty when none are pinned
    images: Mapping[str, str] = field(default_factory=dict)
    # the instance's name, kept at hand: a pass asks each plan for it dozens of times
    name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "objects", RenderedObjects.pack(self.objects))
        object.__setattr__(self, "name", self.instance.name)

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def release(self) -> str | None:
        """The version and builds to run, as one key (``release_key``); None without one."""
        if self.version is None:
            return None
        return release_key(self.version.key, self.images)


def plan_fingerprint(plan: InstancePlan) -> str:
    """A digest of what a plan would do: equal digests mean the inputs did not change.

    The daemon's backoff keys on it: a failing instance is retried early only
    when a commit changed what it would apply (or why it cannot), its migration
    hooks included (a fixed Job of a failed migration is a new input).
    """
    version = plan.version
    data = {
        "version": plan.resolution.next_version,
        "reason": plan.reason,
        "message": plan.message,
        "objects": list(plan.objects),
        "suspend": plan.instance.suspend,
        "migrations": [migration_checksum(version, m) for m in version.migrations]
        if version is not None
        else [],
    }
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def cluster_names(catalog: Catalog) -> list[str]:
    return sorted(catalog.clusters)


def require_cluster(catalog: Catalog, cluster: str) -> None:
    if cluster not in catalog.clusters:
        known = ", ".join(cluster_names(catalog)) or "none"
        raise UsageError(f'cluster "{cluster}" is not in the catalog (known: {known})')


class Kept(Protocol):
    """A plan an earlier pass made (the daemon's ``memo.Reused``) and its objects' keys,
    which the plan no longer carries (made when asked: only the one-owner check needs
    them)."""

    @property
    def plan(self) -> InstancePlan: ...

    @property
    def keys(self) -> tuple[ObjectKey, ...]: ...


def plan_cluster(
    catalog: Catalog,
    cluster: str,
    deployed: Mapping[str, str] | None = None,
    *,
    render: bool = True,
    reuse: Mapping[str, Kept] | None = None,
) -> list[InstancePlan]:
    """Plan every instance of ``cluster``, sorted by name (``render=False``: resolve only).

    ``reuse`` maps an instance to a plan made before (the daemon's ``PassMemo``: its
    inputs did not change); such an instance is neither resolved nor rendered again,
    yet still counts in the check that no two instances render the same object.

    The reused plans passed that check together: the memo keeps only instances of
    the pass before, each of which passed it there, beside all the others (an
    instance it refused is not kept). When every instance is reused (the no-op
    pass), no pair is new and the check is skipped: removing instances cannot make
    two of them clash. Any other plan is checked against all, reused ones included.
    """
    require_cluster(catalog, cluster)
    deployed = deployed or {}
    entry = catalog.clusters[cluster]
    instances = entry.instances
    if not entry.cluster.valid:
        # cluster.yaml holds the limits; without them nothing may be written (fail closed)
        message = _first_error(catalog, entry.cluster.origin.file)
        return [
            _failed(instances[name], deployed.get(name), CATALOG_INVALID, message)
            for name in sorted(instances)
        ]
    reuse = reuse or {}
    plans = [
        reuse[name].plan
        if name in reuse
        else plan_instance(catalog, instances[name], deployed.get(name), render=render)
        for name in sorted(instances)
    ]
    if len(reuse) == len(instances) and all(name in reuse for name in instances):
        return plans  # checked together by the pass that kept them (see above)
    return _one_owner_per_object(plans, reuse)


def _one_owner_per_object(
    plans: list[InstancePlan], reuse: Mapping[str, Kept] | None = None
) -> list[InstancePlan]:
    """Refuse instances that render the same object: two owners would fight every pass.

    Caught offline (``validate``, ``render``), before apply: each instance involved
    becomes ``CatalogInvalid`` naming the object and the other instance.
    """
    reuse = reuse or {}
    first: dict[ObjectKey, str] = {}  # each object's first owner: no list per object
    shared: dict[ObjectKey, list[str]] = {}  # objects of more than one instance
    for plan in plans:
        kept = reuse.get(plan.name)
        for key in kept.keys if kept is not None else keys_of(plan.objects):
            owner = first.setdefault(key, plan.name)
            if owner != plan.name:
                shared.setdefault(key, [owner]).append(plan.name)
    if not shared:
        return plans
    out = []
    for plan in plans:
        clash = next((k for k, names in shared.items() if plan.name in names), None)
        if clash is None:
            out.append(plan)
            continue
        others = " and ".join(sorted(set(shared[clash]) - {plan.name}))
        _group, kind, namespace, name = clash
        what = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
        message = (
            f"{what} is also rendered by instance {others}; an object can have only one "
            "owning instance"
        )
        inst = plan.instance
        problem = Problem(inst.origin.file, inst.origin.line("app"), Severity.ERROR, message)
        out.append(
            replace(
                plan,
                objects=(),
                problems=(*plan.problems, problem),
                reason=CATALOG_INVALID,
                message=f"{inst.origin.file}: {message}",
            )
        )
    return out


def _first_error(catalog: Catalog, *paths: str) -> str:
    for problem in catalog.problems:
        if problem.is_error and any(
            problem.file == p or problem.file.startswith(p.rstrip("/") + "/") for p in paths
        ):
            return str(problem)
    return "the catalog has errors"


def _failed(instance: Instance, deployed: str | None, reason: str, message: str) -> InstancePlan:
    resolution = Resolution(
        cluster=instance.cluster,
        instance=instance.name,
        app=instance.app,
        source=selector_source(instance),
        deployed=deployed,
        error=message,
        reason=reason,
        file=instance.origin.file,
        line=instance.origin.line(),
    )
    return InstancePlan(instance, resolution, reason=reason, message=message)


def plan_instance(
    catalog: Catalog, instance: Instance, deployed: str | None = None, *, render: bool = True
) -> InstancePlan:
    """Resolve and render one instance; never raises for catalog content."""
    file = instance.origin.file
    if not instance.valid:
        return _failed(instance, deployed, CATALOG_INVALID, _first_error(catalog, file))
    entry = catalog.apps.get(instance.app)
    resolution = resolve_instance(instance, entry, deployed=deployed)
    if not resolution.ok:
        # A channel selection fails *because* of a broken commit only when the channels
        # file could not be loaded at all; otherwise the selection itself is wrong
        # (e.g. a typo in the channel name) and must be reported as such.
        channels_file = f"apps/{instance.app}/channels.yaml"
        broken = (
            instance.channel is not None
            and entry is not None
            and entry.channels is None
            and catalog.has_errors_in(channels_file)
        )
        reason = CATALOG_INVALID if broken else (resolution.reason or RESOLVE_FAILED)
        message = _first_error(catalog, channels_file) if broken else (resolution.error or "")
        return InstancePlan(instance, resolution, reason=reason, message=message)
    if resolution.blocked:
        return InstancePlan(
            instance, resolution, reason=resolution.reason, message=resolution.message
        )
    assert entry is not None and resolution.next_version is not None
    version = entry.versions[resolution.next_version]
    if not version.valid:
        # its own files, or a broken entry of the app's builds.yaml (SPEC section 8)
        message = _first_error(catalog, version.directory, f"apps/{version.app}/builds.yaml")
        return InstancePlan(instance, resolution, version, reason=CATALOG_INVALID, message=message)
    missing = _missing_analysis(instance, version) if deployed not in (None, version.key) else None
    if missing is not None:
        return InstancePlan(
            instance,
            resolution,
            version,
            problems=(missing,),
            reason=CATALOG_INVALID,
            message=str(missing),
        )
    # most versions pin no builds: their plans share one empty mapping, not one dict each
    images = {
        n: f"{b.tag}@{b.digest}" for n, b in entry.builds_of(version.key).items()
    } or NO_IMAGES
    if not render:
        return InstancePlan(instance, resolution, version, images=images)
    rendered = render_instance(catalog, instance, version)
    if not rendered.ok:
        first = next(p for p in rendered.problems if p.is_error)
        return InstancePlan(
            instance,
            resolution,
            version,
            problems=rendered.problems,
            reason=CATALOG_INVALID,
            message=str(first),
        )
    return InstancePlan(
        instance, resolution, version, rendered.objects, rendered.problems, images=images
    )


def _missing_analysis(instance: Instance, version: AppVersion) -> Problem | None:
    """The instance file's ``rollout.analysis`` when ``version`` has no such Job file.

    The path is relative to the directory of the version rolled to, so whether it
    exists depends on the resolved version (a version.yaml's own path is checked
    when the version is loaded, a path no version has when the instance is). Asked
    only when the version changes: a first install applies at once and runs none,
    but a rollout without the Job could not verify a batch.
    """
    try:
        settings = merge_plans(version.rollout, instance.rollout)
    except PlanError:
        return None  # reported by validation of the plan itself
    if (
        settings is None
        or not settings.analysis_job
        or settings.analysis_job in version.analysis_jobs
    ):
        return None
    return Problem(
        instance.origin.file,
        instance.origin.line("rollout.analysis"),
        Severity.ERROR,
        f'rollout analysis job "{settings.analysis_job}" is not a Job file of '
        f"{version.app} {version.key} (looked for {version.directory}/{settings.analysis_job})",
    )


@dataclass
class _Problems:
    items: list[Problem] = field(default_factory=list)
    seen: set[Problem] = field(default_factory=set)

    def add(self, problem: Problem) -> None:
        if problem not in self.seen:
            self.seen.add(problem)
            self.items.append(problem)


def check_catalog(
    catalog: Catalog,
    registry: Registry | None = None,
    *,
    declared: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Every problem of the catalog: loading, ranges, migrations, resolution and rendering.

    ``registry`` holds the Python migrations a catalog may name (default: the
    installed ones); ``declared`` those the checkout's own package registers, a
    warning rather than an error when not installed (``validate
    --allow-uninstalled-migrations``, pre-commit's hook).
    """
    # resolving and rendering every instance; what survives is the catalog's own caches
    # (placeholder paths, sorted versions), kept with it: see ``model.gcpause``
    with gc_paused(keeps=True):
        return _check_catalog(catalog, registry, declared)


def _check_catalog(
    catalog: Catalog, registry: Registry | None, declared: Mapping[str, str] | None
) -> list[Problem]:
    out = _Problems()
    for problem in catalog.problems:
        out.add(problem)
    for problem in check_migrations(catalog, registry or Registry.installed(), declared):
        out.add(problem)
    for entry in catalog.apps.values():
        for version in entry.versions.values():
            if version.upgrade_from is not None:
                try:
                    parse_range(version.upgrade_from)
                except RangeSyntaxError as e:
                    out.add(
                        Problem(
                            version.origin.file,
                            version.origin.line("upgradeFrom"),
                            Severity.ERROR,
                            f"upgradeFrom: {e}",
                        )
                    )
    for cluster in cluster_names(catalog):
        for plan in plan_cluster(catalog, cluster):
            _plan_problems(plan, out)
    return sorted(out.items, key=lambda p: (p.file, p.line or 0, p.message))


def _plan_problems(plan: InstancePlan, out: _Problems) -> None:
    res = plan.resolution
    for warning in res.warnings:
        out.add(Problem(res.file, res.line, Severity.WARNING, warning))
    if not plan.instance.valid:
        return  # its file's own problems are already reported
    if not res.ok and plan.reason != CATALOG_INVALID:
        out.add(Problem(res.file, res.line, Severity.ERROR, res.error or "cannot resolve"))
    for problem in plan.problems:
        out.add(problem)
