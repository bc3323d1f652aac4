"""Compute a ``Preview``: plan the instances in scope at both commits and compare.

Called by ``reconciler preview`` (``reconciler.commands.preview``) and the
benchmark. The planning is the daemon's own (``plan_cluster``, ``check_catalog``)
so the preview says what a reconciler would do; only the deployed version is
assumed: the cluster is taken to run what the base resolves to, which is what a
reconciler following the base branch converged to.
"""

from __future__ import annotations

import difflib
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from reconciler.daemon.plan import InstancePlan, check_catalog, plan_cluster, plan_instance
from reconciler.migrations import Registry, upgrade_migrations
from reconciler.model.catalog import AppVersion, Catalog, Instance, Migration
from reconciler.model.errors import UsageError
from reconciler.model.images import ImageRefError, parse_image
from reconciler.model.problems import Problem
from reconciler.model.secrets import mask_secret_pair
from reconciler.model.version import parse_version
from reconciler.preview.guards import gate_warnings, inventory_notes, limit_warnings
from reconciler.preview.model import (
    ADDED,
    BUILDS,
    FAILING,
    OBJECTS,
    REMOVED,
    VERSION,
    InstanceChange,
    MigrationPreview,
    ObjectChanges,
    Preview,
    RolloutPreview,
    WorkloadPlan,
)
from reconciler.preview.scope import InstanceKey, Scope, Side, load_scope
from reconciler.preview.waveplan import wave_plans
from reconciler.render import object_key, object_ref
from reconciler.rollout import PlanError, merge_plans, plan_batches

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
Plans = dict[InstanceKey, InstancePlan]


def build_preview(
    repo: str | Path,
    base: str,
    head: str = "HEAD",
    *,
    clusters: Sequence[str] = (),
    diff: bool = False,
    registry: Registry | None = None,
) -> Preview:
    """What moving the catalog at ``repo`` from commit ``base`` to ``head`` would do."""
    with tempfile.TemporaryDirectory(prefix="reconciler-preview-") as tmp:
        scope = load_scope(Path(repo), base, head, Path(tmp))
        return compare(scope, clusters=clusters, diff=diff, registry=registry)


def compare(
    scope: Scope,
    *,
    clusters: Sequence[str] = (),
    diff: bool = False,
    registry: Registry | None = None,
) -> Preview:
    registry = registry or Registry.installed()
    known = sorted(set(scope.base.catalog.clusters) | set(scope.head.catalog.clusters))
    unknown = [c for c in clusters if c not in known]
    if unknown:
        raise UsageError(
            f'cluster "{unknown[0]}" is at neither commit (known: {", ".join(known) or "none"})'
        )
    chosen = tuple(sorted(set(clusters))) if clusters else tuple(known)
    base_cat, head_cat = scope.base.scoped(), scope.head.scoped()
    base_plans, head_plans = _plans(base_cat, chosen), _plans(head_cat, chosen)
    changes: list[InstanceChange] = []
    unchanged = 0
    keys = sorted(k for k in scope.instances if k[0] in chosen)
    for key in keys:
        change = _instance_change(key, scope, base_plans.get(key), head_plans.get(key), diff)
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    new, existing, fixed = _problem_delta(
        _in_clusters(check_catalog(base_cat, registry), chosen, known),
        _in_clusters(check_catalog(head_cat, registry), chosen, known),
    )
    return Preview(
        base_rev=scope.base.rev,
        base_commit=scope.base.commit,
        head_rev=scope.head.rev,
        head_commit=scope.head.commit,
        clusters=chosen,
        changes=tuple(changes),
        new_problems=new,
        existing_problems=existing,
        fixed_problems=fixed,
        warnings=(
            *_prune_guard(scope, chosen, changes),
            *limit_warnings(scope.base.catalog, scope.head.catalog, chosen),
            *inventory_notes(scope.base.catalog, scope.head.catalog, chosen),
            *gate_warnings(keys, base_plans, head_plans),
        ),
        unchanged=unchanged,
        waves=wave_plans(changes, head_cat) if head_cat.waves is not None else None,
    )


def _plans(catalog: Catalog, clusters: Iterable[str]) -> Plans:
    out: Plans = {}
    for cluster in clusters:
        if cluster in catalog.clusters:
            for plan in plan_cluster(catalog, cluster):
                out[(cluster, plan.name)] = plan
    return out


def _in_clusters(problems: list[Problem], chosen: Sequence[str], known: list[str]) -> list[Problem]:
    """Drop the problems of clusters left out by ``--cluster`` (apps' problems stay)."""
    if list(chosen) == known:
        return problems
    left_out = tuple(f"clusters/{c}/" for c in known if c not in chosen)
    return [p for p in problems if not p.file.startswith(left_out)]


def _problem_delta(
    base: list[Problem], head: list[Problem]
) -> tuple[tuple[Problem, ...], tuple[Problem, ...], tuple[Problem, ...]]:
    """(new on the head, already on the base, gone at the head).

    A problem is the same when its file, severity and message are: an edit above
    it moves its line without making it new.
    """

    def key(p: Problem) -> tuple[str, str, str]:
        return (p.file, p.severity.value, p.message)

    before = Counter(key(p) for p in base)
    after = Counter(key(p) for p in head)
    new: list[Problem] = []
    existing: list[Problem] = []
    seen: Counter[tuple[str, str, str]] = Counter()
    for p in head:
        seen[key(p)] += 1
        (existing if seen[key(p)] <= before[key(p)] else new).append(p)
    gone: Counter[tuple[str, str, str]] = Counter()
    fixed = []
    for p in base:
        gone[key(p)] += 1
        if gone[key(p)] > after[key(p)]:
            fixed.append(p)
    return tuple(new), tuple(existing), tuple(fixed)


# ---------------------------------------------------------------- one instance


def _instance_change(
    key: InstanceKey,
    scope: Scope,
    before: InstancePlan | None,
    after: InstancePlan | None,
    diff: bool,
) -> InstanceChange | None:
    cluster, name = key
    if before is None and after is None:
        return None  # at neither commit in the chosen clusters: nothing to say
    if before is None:
        assert after is not None
        return _added(cluster, after, scope.head, diff)
    if after is None:
        return _removed(cluster, before, scope.base, diff)
    b_version, h_version = before.resolution.version, after.resolution.version
    via = _selector(after.instance)
    if not after.ok:
        if not before.ok and (before.reason, before.message) == (after.reason, after.message):
            return None  # failing the same way at both commits: nothing new to say
        return InstanceChange(
            cluster,
            name,
            after.instance.app,
            FAILING,
            b_version,
            h_version,
            via,
            why=_why(before, after, scope),
            error=f"{after.reason}: {after.message}",
        )
    objects = _objects(before.objects if before.ok else (), after.objects, diff)
    if b_version == h_version and not objects.total and before.ok:
        return None
    notes = () if before.ok else (f"did not apply at the base ({before.reason})",)
    builds = _build_changes(before, after)
    if b_version == h_version and builds and before.ok and after.version is not None:
        # a rebuild of the running version rolls out like a version change (SPEC 8)
        return InstanceChange(
            cluster,
            name,
            after.instance.app,
            BUILDS,
            b_version,
            h_version,
            via,
            why=f"builds.yaml of {after.instance.app} moves the builds of {h_version}",
            objects=objects,
            rollout=_rollout(after.instance, after.version, after.objects, ()),
            builds=builds,
            notes=notes,
        )
    if b_version == h_version:
        reason = "same version: parameters or settings only"
        return InstanceChange(
            cluster,
            name,
            after.instance.app,
            OBJECTS,
            b_version,
            h_version,
            via,
            why=_why(before, after, scope),
            objects=objects,
            rollout=RolloutPreview(batched=False, reason=reason),
            notes=notes,
        )
    moved = plan_instance(scope.head.scoped(), after.instance, b_version, render=False)
    res = moved.resolution
    path = res.upgrade_path or ((h_version,) if h_version else ())
    error = None if moved.ok else f"{moved.reason}: {moved.message}"
    version = after.version
    return InstanceChange(
        cluster,
        name,
        after.instance.app,
        VERSION,
        b_version,
        h_version,
        via,
        why=_why(before, after, scope),
        objects=objects,
        rollout=_rollout(after.instance, version, after.objects, path) if version else None,
        migrations=_considered(scope.head.catalog, after.instance, path, b_version),
        upgrade_path=tuple(res.upgrade_path) if len(res.upgrade_path) > 1 else (),
        error=error,
        notes=notes,
    )


def _build_changes(before: InstancePlan, after: InstancePlan) -> tuple[tuple[str, str, str], ...]:
    """(image, base tag, head tag) for each image whose pinned build differs."""
    version = after.version
    if version is None or before.images == after.images:
        return ()
    out = []
    for image in sorted({*before.images, *after.images}):
        old, new = before.images.get(image), after.images.get(image)
        if old == new:
            continue
        named = _tag_of(version.images.get(image, ""))
        old_tag = old.split("@", 1)[0] if old else named
        new_tag = new.split("@", 1)[0] if new else named
        if old_tag == new_tag and old and new:  # the same tag pushed again: the digests
            old_tag, new_tag = old[: len(old_tag) + 20], new[: len(new_tag) + 20]
        out.append((image, old_tag, new_tag))
    return tuple(out)


def _tag_of(ref: str) -> str:
    try:
        return parse_image(ref).tag or "latest"
    except ImageRefError:
        return ref


def _added(cluster: str, plan: InstancePlan, side: Side, diff: bool) -> InstanceChange:
    inst, res = plan.instance, plan.resolution
    error = None if plan.ok else f"{plan.reason}: {plan.message}"
    version = res.version
    return InstanceChange(
        cluster,
        inst.name,
        inst.app,
        ADDED,
        None,
        version,
        _selector(inst),
        why=f"new instance file {inst.origin.file}",
        objects=_objects((), plan.objects, diff),
        rollout=RolloutPreview(batched=False, reason="first install"),
        migrations=_considered(side.catalog, inst, (version,) if version else (), None)
        if plan.ok
        else (),
        error=error,
    )


def _removed(cluster: str, plan: InstancePlan, side: Side, diff: bool) -> InstanceChange:
    inst, version = plan.instance, plan.version
    uninstall: list[Migration] = (
        [m for m in version.migrations if m.phase == "uninstall"] if version else []
    )
    notes = ["then the undo of every migration its ledger records as applied, newest first"]
    if not plan.ok:
        notes.insert(0, f"it did not apply at the base ({plan.reason}): its objects are unknown")
    return InstanceChange(
        cluster,
        inst.name,
        inst.app,
        REMOVED,
        plan.resolution.version,
        None,
        _selector(inst),
        why=f"instance file {inst.origin.file} deleted",
        objects=_objects(reversed(plan.objects), (), diff),
        migrations=tuple(_migration(m, str(version.key) if version else "?") for m in uninstall),
        notes=tuple(notes),
    )


def _selector(inst: Instance) -> str:
    if inst.channel is not None:
        return f"channel {inst.channel}"
    text = (inst.version or "").strip()
    if text == "latest":
        return "latest"
    try:
        parse_version(text)
    except ValueError:
        return f'range "{text}"'
    return f"version {text}"


def _why(before: InstancePlan, after: InstancePlan, scope: Scope) -> str:
    """What moved the instance: its selector, its channel, or the versions its range sees."""
    b_inst, h_inst = before.instance, after.instance
    b_ver, h_ver = before.resolution.version, after.resolution.version
    if _selector(b_inst) != _selector(h_inst):
        return f"instance file changed {_selector(b_inst)} -> {_selector(h_inst)}"
    if h_inst.channel is not None:
        channel = h_inst.channel
        b_target = _channel_target(scope.base.catalog, b_inst.app, channel)
        h_target = _channel_target(scope.head.catalog, h_inst.app, channel)
        if b_target != h_target:
            return f"channel {channel} moved {b_target or 'nowhere'} -> {h_target or 'nowhere'}"
    if b_ver != h_ver and h_ver is not None:
        entry = scope.base.catalog.apps.get(b_inst.app)
        if entry is None or h_ver not in entry.versions:
            return f"{_selector(h_inst)} now chooses {h_ver}, new in this change"
        old = scope.head.catalog.apps.get(h_inst.app)
        if b_ver and old is not None and b_ver in old.versions and old.versions[b_ver].yanked:
            return f"{b_ver} was yanked; {_selector(h_inst)} now chooses {h_ver}"
        return f"{_selector(h_inst)} now chooses {h_ver}"
    if b_inst != h_inst:
        return f"instance file {h_inst.origin.file} changed"
    return f"app {h_inst.app} changed"


def _channel_target(catalog: Catalog, app: str, channel: str) -> str | None:
    entry = catalog.apps.get(app)
    if entry is None or entry.channels is None:
        return None
    return entry.channels.channels.get(channel)


def _objects(
    before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]], diff: bool
) -> ObjectChanges:
    old = {object_key(o): o for o in before}
    new = {object_key(o): o for o in after}
    created = [k for k in new if k not in old]
    deleted = [k for k in old if k not in new]
    changed = [k for k in new if k in old and old[k] != new[k]]
    text = ""
    if diff:
        text = "".join(_unified(old.get(k), new.get(k)) for k in [*changed, *created, *deleted])
    return ObjectChanges(
        created=tuple(object_ref(new[k]) for k in created),
        changed=tuple(object_ref(new[k]) for k in changed),
        deleted=tuple(object_ref(old[k]) for k in deleted),
        unchanged=sum(1 for k in new if k in old and old[k] == new[k]),
        diff=text,
    )


def _unified(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """One object's unified diff, Secret values masked (``*** (changed)`` where they differ)."""
    masked_before, masked_after = mask_secret_pair(before, after)
    ref = object_ref(after or before or {})

    def lines(obj: Mapping[str, Any] | None) -> list[str]:
        if obj is None:
            return []
        text = yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False)
        return text.splitlines(keepends=True)

    return "".join(
        difflib.unified_diff(
            lines(masked_before),
            lines(masked_after),
            fromfile=f"a/{ref}" if before is not None else "/dev/null",
            tofile=f"b/{ref}" if after is not None else "/dev/null",
        )
    )


def _rollout(
    inst: Instance,
    version: AppVersion,
    objects: Sequence[Mapping[str, Any]],
    steps: Sequence[str],
) -> RolloutPreview:
    try:
        settings = merge_plans(version.rollout, inst.rollout)
    except PlanError as e:
        return RolloutPreview(batched=False, reason=f"the rollout plan is invalid: {e}")
    if settings is None:
        return RolloutPreview(batched=False, reason="no rollout.batches in version or instance")
    source = "instance file" if inst.rollout and "batches" in inst.rollout.given else "version"
    workloads = []
    for obj in objects:
        if obj.get("kind") not in WORKLOAD_KINDS or obj.get("apiVersion") != "apps/v1":
            continue
        if obj.get("kind") == "DaemonSet":
            workloads.append(WorkloadPlan(object_ref(obj), None))
            continue
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        count = replicas if isinstance(replicas, int) else 1
        try:
            targets = plan_batches(count, settings.batches)
        except PlanError:
            targets = ()
        workloads.append(WorkloadPlan(object_ref(obj), count, targets))
    return RolloutPreview(
        batched=True,
        reason=f"plan from the {source}",
        batches=tuple(str(b) for b in settings.batches),
        workloads=tuple(workloads),
        partition=settings.partition,
        paused=settings.paused,
        on_failure=settings.on_failure,
        steps=tuple(steps),
    )


def _considered(
    catalog: Catalog, inst: Instance, path: Sequence[str], deployed: str | None
) -> tuple[MigrationPreview, ...]:
    entry = catalog.apps.get(inst.app)
    if entry is None:
        return ()
    steps = [entry.versions[k] for k in path if k in entry.versions]
    found = (
        _migration(c.migration, c.version, skipped=c.filtered_out, note=c.filter_note)
        for c in upgrade_migrations(steps, deployed)
    )
    return tuple(replace(m, check=_for_instance(m.check, inst)) for m in found)


def _for_instance(text: str, inst: Instance) -> str:
    """A check's object names as this instance's check would look them up."""
    return text.replace("${instance.name}", inst.name).replace(
        "${instance.namespace}", inst.namespace
    )


def _migration(
    m: Migration, version: str, *, skipped: bool = False, note: str = ""
) -> MigrationPreview:
    parts = []
    for label, ref in (
        ("objectMissing", m.check.object_missing),
        ("objectExists", m.check.object_exists),
    ):
        if ref is not None:
            parts.append(f"{label} {ref.kind}/{ref.name}")
    if m.check.field_equals is not None:
        fe = m.check.field_equals
        parts.append(f"fieldEquals {fe.ref.kind}/{fe.ref.name} {fe.path}={fe.value!r}")
    if note:
        parts.append(note)
    check = "; ".join(parts) or "no check: runs once"
    return MigrationPreview(m.name, version, m.phase, m.scope, check, skipped)


def _prune_guard(scope: Scope, chosen: Sequence[str], changes: list[InstanceChange]) -> list[str]:
    """The cluster guards of SPEC section 3, said up front: a removal would be refused
    because the cluster's directory has errors, or because it removes too many."""
    out = []
    for cluster in chosen:
        entry = scope.base.catalog.clusters.get(cluster)
        removed = sum(1 for c in changes if c.cluster == cluster and c.kind == REMOVED)
        if entry is None or not removed or cluster not in scope.head.catalog.clusters:
            continue
        errors = scope.head.catalog.cluster_errors(cluster)
        if errors:
            out.append(
                f"{cluster}: the head has validation errors in clusters/{cluster}/ "
                f"({', '.join(errors[:3])}): the reconciler removes none of the {removed} "
                "instance(s) shown as removed (CatalogInvalid) until they are fixed"
            )
        elif not entry.removal_allowed(removed, len(entry.instances)):
            out.append(
                f"{cluster}: removing {removed} of {len(entry.instances)} instances exceeds the "
                "cluster's prune limit: the reconciler would remove none (PruneRefused) unless "
                "cluster.yaml prune.maxRemovedInstances allows it or it runs with "
                "--allow-mass-prune"
            )
    return out


__all__ = ["build_preview", "compare"]
