"""The only code that talks to Kubernetes: connect, apply, diff, prune, health, inventory.

Callers (the ``diff``/``apply`` commands and the daemon) use this API:

- ``KubeClient.connect(kubeconfig=None, context=None, max_requests_in_flight=8)``
  connects like kubectl; the client may be shared by threads, at most
  ``max_requests_in_flight`` requests in flight across all of them.
- ``LiveState(client, cluster)`` is one pass's cached view (one list per kind);
  share it across the instances of a pass. Given a ``WatchCache(client)``
  (``watchcache.py``, kept across the long-running daemon's passes) it lists a
  kind only the first time and reads a snapshot of the watched store after.
- ``apply_instance(client, InstanceTarget(...), ApplyOptions(...), live) -> InstanceResult``
  applies, reverts drift, prunes and records the inventory; ``result.changes`` is
  the ``ChangeSet``.
- ``diff_instance(client, target, options, live) -> list[ObjectDiff]``.
- ``remove_instance(client, live, inventory)`` uninstalls an
  instance deleted from Git.
- ``read_deployed_versions(client, cluster, instances) -> dict[str, str]``.
- ``wait_healthy(client, refs, timeout) -> HealthReport``; ``evaluate(obj)``.
- ``instance_tree(client, inventory) -> InstanceTree``: the live objects and what
  their controllers made, each with its health (``reconciler get``).
- ``set_partition``/``release_partition``: a StatefulSet's batch during a rollout.
- ``KubeJobRunner(client).run_job(job, timeout)``: a migration Job to its end.

Only this package imports ``kubernetes``; its errors become ``reconciler.kube.errors``.
"""

from reconciler.kube.apply import (
    ApplyOptions,
    InstanceResult,
    InstanceTarget,
    apply_instance,
    inventory_written,
    place_objects,
)
from reconciler.kube.client import FIELD_MANAGER, KubeClient, RetryPolicy
from reconciler.kube.diff import ObjectDiff, diff_instance
from reconciler.kube.errors import ClusterUnreachable, ConflictError, KubeApiError
from reconciler.kube.health import Health, HealthReport, ObjectHealth, evaluate, wait_healthy
from reconciler.kube.inventory import Inventory, read_deployed_versions, read_inventories
from reconciler.kube.jobs import KubeJobRunner
from reconciler.kube.limits import Limits, read_refused
from reconciler.kube.live import LiveState
from reconciler.kube.prune import EMPTY_RENDER, PRUNE_REFUSED, remove_instance
from reconciler.kube.rollout import (
    ROLLOUT_FIELD_MANAGER,
    partition_for,
    release_partition,
    set_partition,
)
from reconciler.kube.rollout_driver import KubeRolloutDriver, workloads_of
from reconciler.kube.tree import InstanceTree, LiveNode, instance_tree, read_instance_inventory

__all__ = [
    "EMPTY_RENDER",
    "FIELD_MANAGER",
    "PRUNE_REFUSED",
    "ROLLOUT_FIELD_MANAGER",
    "ApplyOptions",
    "ClusterUnreachable",
    "ConflictError",
    "Health",
    "HealthReport",
    "InstanceResult",
    "InstanceTarget",
    "InstanceTree",
    "Inventory",
    "KubeApiError",
    "KubeClient",
    "KubeJobRunner",
    "KubeRolloutDriver",
    "Limits",
    "LiveNode",
    "LiveState",
    "ObjectDiff",
    "ObjectHealth",
    "RetryPolicy",
    "apply_instance",
    "diff_instance",
    "evaluate",
    "instance_tree",
    "inventory_written",
    "partition_for",
    "place_objects",
    "read_deployed_versions",
    "read_instance_inventory",
    "read_inventories",
    "read_refused",
    "release_partition",
    "remove_instance",
    "set_partition",
    "wait_healthy",
    "workloads_of",
]
