"""Changes that loosen a guard, said up front in ``reconciler preview``.

A pull request that widens a cluster's limits (``cluster.yaml`` removed or
renamed, more namespaces, cluster-scoped objects allowed, a higher prune limit)
may render no different object, yet decides what every later commit may do to
the cluster (SPEC section 3b). Likewise, one that removes a rollout gate, moves
it later, lowers the number of batches or approves a version other than the one
that would roll changes no rendered object, so the object diff never shows it;
yet it decides how far the next release goes unattended (SPEC section 4, "gates
re-arm"). ``compare`` in ``reconciler.preview.build`` adds these lines to the
preview's warnings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.daemon.plan import InstancePlan
from reconciler.kube.inventory import inventory_name, shared_name
from reconciler.model.catalog import INVENTORY_PER_NAMESPACE, Catalog, Cluster
from reconciler.preview.scope import InstanceKey
from reconciler.rollout import PlanError, RolloutSettings, merge_plans


def gate_warnings(
    keys: Sequence[InstanceKey],
    base: Mapping[InstanceKey, InstancePlan],
    head: Mapping[InstanceKey, InstancePlan],
) -> list[str]:
    """One line per instance whose rollout guard the change loosens."""
    out: list[str] = []
    for key in keys:
        after = head.get(key)
        if after is None or not after.ok:
            continue  # a head that cannot plan it rolls nothing; its problems say why
        before = base.get(key)
        if before is not None and not before.ok:
            before = None
        old = _settings(before) if before is not None else None
        new = _settings(after)
        name = f"{key[0]}/{key[1]}"
        out.extend(f"{name}: {line}" for line in _loosened(old, new))
        target = after.version.key if after.version is not None else None
        promoted = new.promoted if new is not None else None
        was = old.promoted if old is not None else None
        if promoted is not None and promoted != was and promoted.to != target:
            out.append(
                f"{name}: the change approves {promoted.to} (rollout.promoted), but the "
                f"instance rolls to {target or 'no version'}: the approval is inert and "
                "that rollout stops at its partition"
            )
    return out


def _loosened(old: RolloutSettings | None, new: RolloutSettings | None) -> list[str]:
    if old is None:
        return []
    lines = []
    old_gate, new_gate = _policy(old), _policy(new)
    if old_gate is not None and new_gate is None:
        lines.append(
            f"the change removes the rollout gate (partition {old_gate}): every later "
            "release rolls through all its batches without a promotion"
        )
    elif old_gate is not None and new_gate is not None and new_gate > old_gate:
        lines.append(
            f"the change moves the rollout gate from after batch {old_gate} to after batch "
            f"{new_gate}: more replicas move before anyone approves"
        )
    old_n, new_n = len(old.batches), len(new.batches) if new is not None else 0
    if new_n < old_n:
        lines.append(
            f"the change lowers rollout.batches from {old_n} to "
            f"{new_n or 'none (every change applies at once)'}"
        )
    return lines


def _policy(settings: RolloutSettings | None) -> int | None:
    """The partition as policy: ``None`` when it gates nothing (absent or past the end)."""
    if settings is None or settings.partition is None:
        return None
    return settings.partition if settings.partition < len(settings.batches) else None


def _settings(plan: InstancePlan) -> RolloutSettings | None:
    version = plan.version.rollout if plan.version is not None else None
    try:
        return merge_plans(version, plan.instance.rollout)
    except PlanError:
        return None  # validation reports a broken plan


def limit_warnings(base: Catalog, head: Catalog, clusters: Sequence[str]) -> list[str]:
    """One line per way the change widens a cluster's limits."""
    out: list[str] = []
    for name in clusters:
        before, after = base.clusters.get(name), head.clusters.get(name)
        if before is None or after is None or not before.cluster.declared:
            continue
        out.extend(f"{name}: {line}" for line in _widened(before.cluster, after.cluster))
    return out


def inventory_notes(base: Catalog, head: Catalog, clusters: Sequence[str]) -> list[str]:
    """One line per cluster whose ``cluster.yaml`` moves its inventories to the other
    layout: nothing of the instances is applied or removed, but the next pass writes
    every inventory in its new place and deletes the old ones, which a reviewer should
    know before a ConfigMap they look for by name goes."""
    out: list[str] = []
    for name in clusters:
        before, after = base.clusters.get(name), head.clusters.get(name)
        if before is None or after is None:
            continue
        old, new = before.cluster, after.cluster
        if not (old.valid and new.valid) or old.inventory == new.inventory:
            continue
        own = inventory_name("<instance>")
        if new.inventory == INVENTORY_PER_NAMESPACE:
            where = (
                f"one ConfigMap per namespace, {shared_name(name)}; their own "
                f"ConfigMaps {own} are deleted"
            )
        else:
            where = f"a ConfigMap each, {own}; the shared ones {shared_name(name)} are deleted"
        out.append(
            f"{name}: the change moves the inventories of its {len(after.instances)} "
            f"instance(s) at the next pass (inventory: {old.inventory} -> {new.inventory}) "
            f"into {where}. No object of theirs is applied or removed"
        )
    return out


def _widened(old: Cluster, new: Cluster) -> list[str]:
    if not new.declared:
        return [
            f"the change removes {old.origin.file}: limits are never dropped, so the "
            "reconciler applies nothing to this cluster (CatalogInvalid) until it is back; "
            "to allow more, edit the limits in the file"
        ]
    if not new.valid and old.valid:
        return [
            f"the change leaves {old.origin.file} unreadable (renamed, or invalid): the "
            "reconciler applies nothing to this cluster (CatalogInvalid) until it is fixed"
        ]
    if not new.valid or not old.valid:
        return []  # the head's validation errors say why; nothing is applied meanwhile
    lines = []
    if old.allowed_namespaces is not None:
        if new.allowed_namespaces is None:
            lines.append("the change allows every namespace (allowedNamespaces removed)")
        else:
            added = [p for p in new.allowed_namespaces if p not in old.allowed_namespaces]
            if added:
                lines.append(f"the change allows more namespaces: {', '.join(added)}")
    if new.allow_cluster_scoped and not old.allow_cluster_scoped:
        lines.append("the change allows cluster-scoped objects (allowClusterScoped: true)")
    widened = _prune_widened(old, new)
    if widened:
        lines.append(widened)
    return lines


def _prune_widened(old: Cluster, new: Cluster) -> str | None:
    """The prune limit raised; a switch between a count and a percentage is named too,
    since only the cluster's size tells which allows more."""
    before, after = _prune_text(old), _prune_text(new)
    if old.max_removed is not None and new.max_removed is not None:
        raised = new.max_removed > old.max_removed
    elif old.max_removed is None and new.max_removed is None:
        raised = new.max_removed_percent > old.max_removed_percent
    else:
        return (
            f"the change moves prune.maxRemovedInstances from {before} to {after}: "
            "check it does not let one commit uninstall more instances"
        )
    if not raised:
        return None
    return (
        f"the change raises prune.maxRemovedInstances from {before} to {after}: one "
        "commit may uninstall more instances"
    )


def _prune_text(cluster: Cluster) -> str:
    if cluster.max_removed is not None:
        return str(cluster.max_removed)
    return f"{cluster.max_removed_percent}%"
