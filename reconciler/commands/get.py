"""``reconciler get INSTANCE``: one instance's live objects as a tree, with health.

What ``argocd app get`` or ``kubectl tree`` show: the objects the instance's
inventory lists, their health by the daemon's own rules and the reason for
anything not Current, and below each workload what its controller made
(``reconciler.kube.tree``). The catalog says where the instance lives (its
namespace, hence its inventory); the cluster says what runs.

Exit codes: 0 when every object of the inventory is Current, 1 when one is not
(or the instance is not installed), 2 for usage: an instance neither the
catalog nor the cluster knows (the known ones are named), a cluster the catalog
lacks, an unreachable cluster.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from reconciler.catalog import load_catalog
from reconciler.commands.connect import connect
from reconciler.commands.output import Style, is_data, print_data
from reconciler.daemon.plan import require_cluster
from reconciler.kube import (
    ClusterUnreachable,
    Health,
    InstanceTree,
    Inventory,
    KubeClient,
    LiveNode,
    instance_tree,
    read_instance_inventory,
    read_inventories,
)
from reconciler.kube.inventory import inventory_name, shared_name
from reconciler.model.catalog import INVENTORY_PER_NAMESPACE, ClusterEntry
from reconciler.model.errors import (
    EXIT_OK,
    EXIT_PROBLEMS,
    KubeError,
    ReconcilerError,
    UsageError,
)
from reconciler.model.table import format_table

HEADERS = ("NAMESPACE", "NAME", "HEALTH", "MESSAGE")
_HEALTH_COLOURS = {
    Health.CURRENT: "green",
    Health.IN_PROGRESS: "yellow",
    Health.FAILED: "red",
    Health.NOT_FOUND: "red",
}


def get_command(args: argparse.Namespace) -> int:
    """Print the instance's tree; exit 1 unless every inventory object is Current."""
    catalog = load_catalog(args.catalog)
    require_cluster(catalog, args.cluster)
    entry = catalog.clusters[args.cluster]
    with connect(args) as client:
        try:
            tree = _read(client, entry, args.cluster, args.instance)
        except ClusterUnreachable as e:
            raise UsageError(str(e)) from e
        except KubeError as e:  # a refused read (403, ...) stops the command: not an answer
            raise UsageError(f"get failed: {e}") from e
    if is_data(args.output):
        print_data(tree.to_dict(), args.output)
    else:
        print(render_tree(tree, Style.of(args)))
    return EXIT_OK if tree.health is Health.CURRENT else EXIT_PROBLEMS


def _read(client: KubeClient, entry: ClusterEntry, cluster: str, name: str) -> InstanceTree:
    instance = entry.instances.get(name)
    if instance is not None:
        inventory = read_instance_inventory(client, cluster, name, instance.namespace)
        if inventory is None:
            shared = (
                f" and no key {name} in {shared_name(cluster)}"
                if entry.cluster.inventory == INVENTORY_PER_NAMESPACE
                else ""
            )
            raise _NotInstalled(
                f"{name} is not installed on cluster {cluster}: no inventory "
                f"ConfigMap {inventory_name(name)}{shared} in namespace "
                f"{instance.namespace} (the daemon has not applied it yet, or it failed "
                f"before its first apply; see `reconciler status --cluster {cluster}`)"
            )
        return instance_tree(client, inventory)
    # deleted from Git but maybe still installed (pruned on the next pass): ask the cluster
    installed = _installed(client, entry, cluster)
    inventory = installed.get(name)
    if inventory is None:
        known = sorted(set(entry.instances) | set(installed))
        raise UsageError(
            f"no instance named {name} on cluster {cluster}; known: {', '.join(known) or 'none'}"
        )
    return instance_tree(client, inventory)


def _installed(client: KubeClient, entry: ClusterEntry, cluster: str) -> dict[str, Inventory]:
    """Inventories of the cluster; {} when this identity may not list them cluster-wide."""
    try:
        return dict(read_inventories(client, cluster, entry.namespaces))
    except ClusterUnreachable:
        raise
    except KubeError:
        return {}


class _NotInstalled(ReconcilerError):
    """The catalog has the instance but the cluster has no inventory of it (exit 1)."""

    reason = "NotInstalled"


def render_tree(tree: InstanceTree, style: Style) -> str:
    """The header line and a kubectl-style table whose NAME column draws the tree."""
    inv = tree.inventory
    commit = f", commit {inv.source_commit[:12]}" if inv.source_commit else ""
    health = style.paint(str(tree.health), _HEALTH_COLOURS[tree.health])
    head = (
        f"{inv.instance} on cluster {inv.cluster}: {inv.app} {inv.version or '?'}{commit}, "
        f"namespace {inv.namespace}: {health}"
    )
    if tree.not_current:
        head += f" ({tree.not_current} of {len(tree.objects)} objects not Current)"
    rows = [row for node in tree.objects for row in _rows(node, "", "")]

    def paint(header: str, text: str) -> str:
        colour = _HEALTH_COLOURS.get(Health(text)) if header == "HEALTH" else None
        return style.paint(text, colour) if colour else text

    body = format_table(HEADERS, rows, gap=2, paint=paint if style.colour else None)
    return head + "\n" + body


def _rows(node: LiveNode, lead: str, indent: str) -> Iterator[list[str]]:
    """``node`` and its children; ``lead`` is its branch, ``indent`` what its children get."""
    ref = node.ref
    yield [ref.namespace or "-", f"{lead}{ref.kind}/{ref.name}", str(node.health), node.message]
    last = len(node.children) - 1
    for i, child in enumerate(node.children):
        branch, more = ("└─ ", "   ") if i == last else ("├─ ", "│  ")
        yield from _rows(child, indent + branch, indent + more)
