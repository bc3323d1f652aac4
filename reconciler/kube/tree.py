"""One instance's live objects as a tree, each with its health: what ``reconciler get`` prints.

Like ``argocd app get`` or ``kubectl tree``: the objects the instance's inventory
lists (what it applied), each judged by :func:`reconciler.kube.health.evaluate`
(the daemon's own health rules), and below a workload the objects its controller
made from it: a Deployment's ReplicaSets and their Pods, the Pods of a
StatefulSet, DaemonSet or Job, a CronJob's Jobs. A child is found by its
``ownerReferences`` (the owner's uid), listed once per namespace, kind and
selector; a parent's health is never derived from its children, which only say
*why* (the Pod in ``CrashLoopBackOff`` under a Deployment that is not available).

The inventory is read with one GET in the instance's namespace (where Git puts
it), so a reconciler confined to some namespaces can still answer; only an
instance Git does not know is looked for with a list of every inventory.
Everything here reads; nothing writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.kube.health import Health, Verdict, evaluate
from reconciler.kube.inventory import Inventory, inventories_of, inventory_name, shared_name
from reconciler.model.changeset import ObjectRef

if TYPE_CHECKING:
    from reconciler.kube.client import KubeClient

JsonObject = dict[str, Any]

# owner kind -> the kinds its controller creates, owned by it
CHILD_KINDS: dict[str, tuple[tuple[str, str], ...]] = {
    "Deployment": (("apps/v1", "ReplicaSet"),),
    "ReplicaSet": (("v1", "Pod"),),
    "StatefulSet": (("v1", "Pod"),),
    "DaemonSet": (("v1", "Pod"),),
    "Job": (("v1", "Pod"),),
    "CronJob": (("batch/v1", "Job"),),
}
# container waiting reasons that do not go away by waiting (kubectl shows them as STATUS)
_STUCK = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
# how deep children go: Deployment -> ReplicaSet -> Pod, CronJob -> Job -> Pod
MAX_DEPTH = 3


@dataclass(frozen=True, slots=True)
class LiveNode:
    """One live object, its health with the reason, and the objects made from it."""

    ref: ObjectRef
    health: Health
    message: str = ""
    children: tuple[LiveNode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.ref.to_dict(),
            "health": str(self.health),
            "message": self.message,
            **({"children": [c.to_dict() for c in self.children]} if self.children else {}),
        }


@dataclass(frozen=True, slots=True)
class InstanceTree:
    """An instance's inventory and the live tree of its objects."""

    inventory: Inventory
    objects: tuple[LiveNode, ...] = field(default=())

    @property
    def health(self) -> Health:
        """The worst health of the inventory's objects (children only explain it)."""
        found = {o.health for o in self.objects}
        for worst in (Health.FAILED, Health.NOT_FOUND, Health.IN_PROGRESS):
            if worst in found:
                return worst
        return Health.CURRENT

    @property
    def not_current(self) -> int:
        return sum(1 for o in self.objects if o.health is not Health.CURRENT)

    def to_dict(self) -> dict[str, Any]:
        inv = self.inventory
        return {
            "instance": inv.instance,
            "cluster": inv.cluster,
            "namespace": inv.namespace,
            "app": inv.app,
            "version": inv.version,
            "sourceCommit": inv.source_commit,
            "health": str(self.health),
            "objects": [o.to_dict() for o in self.objects],
        }


def read_instance_inventory(
    client: KubeClient, cluster: str, instance: str, namespace: str
) -> Inventory | None:
    """The instance's inventory in ``namespace`` (one or two GETs), if it is there and ours.

    Trusted as :func:`reconciler.kube.inventory.trusted` trusts one: under its own
    name (its own ConfigMap, or its key of the namespace's shared one), for this
    cluster; a ConfigMap of that name that is not an inventory of ``cluster`` reads
    as none. Its own ConfigMap is looked at first, then the shared one.
    """
    for name in (inventory_name(instance), shared_name(cluster)):
        found = client.get(ObjectRef("v1", "ConfigMap", namespace, name))
        for inv in inventories_of(found) if found is not None else ():
            if inv.cluster == cluster and inv.instance == instance:
                return inv
    return None


def instance_tree(client: KubeClient, inventory: Inventory) -> InstanceTree:
    """GET every object the inventory lists, judge it, and find what was made from it."""
    children = _Children(client)
    nodes = []
    for ref in sorted(inventory.objects):
        obj = client.get(ref)
        if obj is None:
            nodes.append(LiveNode(ref, Health.NOT_FOUND, "not found (listed in the inventory)"))
            continue
        health, message = evaluate(obj)
        nodes.append(LiveNode(ref, health, message, children.of(obj, MAX_DEPTH)))
    return InstanceTree(inventory, tuple(nodes))


class _Children:
    """Owned objects by owner uid, listing each (namespace, kind, selector) once."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._lists: dict[tuple[str, str, str, str], list[JsonObject]] = {}

    def of(self, owner: Mapping[str, Any], depth: int) -> tuple[LiveNode, ...]:
        kinds = CHILD_KINDS.get(str(owner.get("kind", "")), ())
        meta = owner.get("metadata") or {}
        uid, namespace = meta.get("uid"), str(meta.get("namespace") or "")
        if depth <= 0 or not kinds or not uid or not namespace:
            return ()
        selector = match_labels_selector(owner)
        found: list[LiveNode] = []
        for api_version, kind in kinds:
            for child in self._list(namespace, api_version, kind, selector):
                if not _owned_by(child, uid):
                    continue
                below = self.of(child, depth - 1)
                if _retired(child) and not below:
                    continue  # an old ReplicaSet scaled to zero: history, not state
                health, message = child_verdict(child)
                found.append(LiveNode(ObjectRef.of(child), health, message, below))
        return tuple(sorted(found, key=lambda n: n.ref))

    def _list(self, namespace: str, api_version: str, kind: str, selector: str) -> list[JsonObject]:
        key = (namespace, api_version, kind, selector)
        if key not in self._lists:
            self._lists[key] = self.client.list(
                api_version, kind, namespace=namespace, label_selector=selector
            )
        return self._lists[key]


def match_labels_selector(owner: Mapping[str, Any]) -> str:
    """The owner's ``spec.selector.matchLabels`` as a label selector ("" lists all).

    Only narrows the list: children are matched by owner uid, so ignoring
    ``matchExpressions`` can only list more, never show a stranger.
    """
    selector = (owner.get("spec") or {}).get("selector")
    labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
    if not isinstance(labels, Mapping):
        return ""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(o, Mapping) and o.get("uid") == uid for o in owners)


def _retired(obj: Mapping[str, Any]) -> bool:
    if obj.get("kind") != "ReplicaSet":
        return False
    want = (obj.get("spec") or {}).get("replicas", 1)
    return not want and not (obj.get("status") or {}).get("replicas")


def child_verdict(obj: Mapping[str, Any]) -> Verdict:
    """A child's health with the reason ``kubectl get`` would show for it."""
    kind = obj.get("kind")
    if kind == "Pod" and not (obj.get("metadata") or {}).get("deletionTimestamp"):
        return pod_verdict(obj)
    if kind == "ReplicaSet":
        return _replicaset(obj)
    return evaluate(obj)


def _replicaset(obj: Mapping[str, Any]) -> Verdict:
    want = (obj.get("spec") or {}).get("replicas", 1)
    ready = (obj.get("status") or {}).get("readyReplicas", 0)
    generation = (obj.get("metadata") or {}).get("generation")
    observed = (obj.get("status") or {}).get("observedGeneration")
    if generation is not None and (observed is None or observed < generation):
        return Health.IN_PROGRESS, f"generation {generation} not observed yet"
    health = Health.CURRENT if ready >= want else Health.IN_PROGRESS
    return health, f"{ready}/{want} ready"


def pod_verdict(pod: Mapping[str, Any]) -> Verdict:
    """A Pod: Current when Ready (or Succeeded), Failed when a container is stuck."""
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    if phase == "Succeeded":
        return Health.CURRENT, "Succeeded"
    stuck = _container_problem(status.get("containerStatuses") or ())
    if phase == "Failed":
        return Health.FAILED, stuck or str(status.get("reason") or "phase Failed")
    if stuck:
        reason = stuck.split(":", 1)[0]
        return (Health.FAILED if reason in _STUCK else Health.IN_PROGRESS), stuck
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            if cond.get("status") == "True":
                return Health.CURRENT, phase
            return Health.IN_PROGRESS, f"{phase}, not ready"
    return Health.IN_PROGRESS, phase


def _container_problem(statuses: Sequence[Any]) -> str:
    """The first container's waiting or failed reason (with its message), else ""."""
    for container in statuses:
        if not isinstance(container, Mapping):
            continue
        state = container.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        reason = waiting.get("reason") or (
            terminated.get("reason") if terminated.get("exitCode") else ""
        )
        if reason and reason not in ("ContainerCreating", "PodInitializing"):
            message = waiting.get("message") or terminated.get("message") or ""
            name = container.get("name", "")
            return f"{reason}: container {name}" + (f": {message}" if message else "")
    return ""
