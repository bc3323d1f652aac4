"""Limits are never dropped by a commit (SPEC section 3b).

``clusters/<cluster>/cluster.yaml`` is optional, so a checkout without it reads as
"no limits". A commit that deletes it would then open the cluster to any
namespace and any cluster-scoped object, and a reviewer sees only a deleted file.
The cluster remembers instead: every inventory records the limits file its
objects were applied under (``Inventory.limits``). A pass whose checkout has no
``cluster.yaml`` while an inventory says the objects were applied under one
applies nothing to the cluster and removes nothing: every instance is
``Stalled``/``CatalogInvalid``, naming the file, exactly as for an unreadable
``cluster.yaml``. Lifting limits takes an explicit ``cluster.yaml`` that allows
more, which ``reconciler preview`` flags.

The record lives in the cluster, not in the daemon, so a restart or another
replica remembers it too. A pass with a ``cluster.yaml`` brings every inventory's
record up to date first (one write per instance, only when it differs), so
limits added by a commit that changed no instance are remembered as well.
The daemon's pass (``daemon.passes``) and ``reconciler apply`` call ``keep_limits``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from reconciler.kube import Inventory, KubeClient, LiveState
from reconciler.kube.prune import write_inventory
from reconciler.model.catalog import Catalog
from reconciler.model.errors import KubeError
from reconciler.model.problems import Problem, Severity

log = logging.getLogger("reconciler.daemon")


def keep_limits(
    catalog: Catalog,
    cluster: str,
    client: KubeClient,
    live: LiveState,
    owns: Callable[[str], bool] | None = None,
) -> Catalog:
    """``catalog``, or a copy in which ``cluster`` is invalid because its limits vanished.

    ``owns(name)`` False (``--shards``) leaves another replica's inventories to it.
    """
    entry = catalog.clusters[cluster]
    inventories = live.inventories()
    if entry.cluster.declared:
        if entry.cluster.valid:
            source = entry.cluster.origin.file
            behind = (n for n, i in inventories.items() if i.limits != source)
            for name in sorted(behind):  # almost always none: nothing to sort every pass
                if owns is None or owns(name):
                    inventory = inventories[name]
                    _remember(client, live, replace(inventory, limits=source), inventory)
        return catalog
    under = sorted({i.limits for i in inventories.values() if i.limits})
    if not under:
        return catalog
    rel = entry.cluster.origin.file
    holders = sorted(name for name, i in inventories.items() if i.limits)
    shown = ", ".join(holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")
    problem = Problem(
        rel,
        None,
        Severity.ERROR,
        f"cluster.yaml is gone, but the cluster's objects were applied under the limits "
        f"of {', '.join(under)} (the inventories of {shown} say so): limits are never "
        "dropped by a commit, so nothing is applied to or removed from this cluster until "
        "it is back (to allow more, commit a cluster.yaml that says so)",
    )
    invalid = replace(entry.cluster, valid=False, declared=True)
    return replace(
        catalog,
        clusters={**catalog.clusters, cluster: replace(entry, cluster=invalid)},
        problems=[*catalog.problems, problem],
        files_with_errors={*catalog.files_with_errors, rel},
    )


def _remember(client: KubeClient, live: LiveState, inventory: Inventory, old: Inventory) -> None:
    """Record the limits on one inventory; a failure is retried by the next pass."""
    try:
        write_inventory(client, live, inventory, old)
    except KubeError as e:
        log.warning(
            "%s: could not record its limits file on the inventory (next pass retries): %s",
            inventory.instance,
            e,
            extra={"cluster": inventory.cluster},
        )
