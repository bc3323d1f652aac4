"""Controllers, the garbage collector and namespaces facing pods that take their grace period.

https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/: a deleted pod is
Terminating until its kubelet is done. A ReplicaSet no longer counts it (its
replacement is created at once, ``status.replicas`` leaves it out), so a rolling
update goes on; a StatefulSet recreates a name only once the old pod is gone
(https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/); a DaemonSet
puts its new pod on a node once the old one left it; a Recreate Deployment starts new
pods only when all old ones are gone
(https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#recreate-deployment);
garbage collection and namespace deletion delete pods gracefully and wait for them
(https://kubernetes.io/docs/concepts/architecture/garbage-collection/).

Invariants are checked at every write (``SandboxHandle.observe``), not at poll times.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, eventually, http
from tests.sandbox.test_pod_termination import gone
from tests.sandbox.workloads import LINGER, rolled_out


class Cluster:
    def __init__(self, sandbox: SandboxHandle, api: client.ApiClient) -> None:
        self.sandbox = sandbox
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)

    def pods(self, selector: str) -> list[Any]:
        return list(self.core.list_namespaced_pod("default", label_selector=selector).items)

    def end_grace(self, selector: str) -> None:
        """Shorten the grace period of every terminating pod to 1 s (of the sandbox's scale)."""
        for p in self.pods(selector):
            if p.metadata.deletion_timestamp is not None:
                self.core.delete_namespaced_pod(p.metadata.name, "default", grace_period_seconds=1)


@pytest.fixture
def cluster(graceful_api: tuple[SandboxHandle, client.ApiClient]) -> Cluster:
    return Cluster(*graceful_api)


def lingering(body: dict[str, Any], grace: int = LINGER) -> dict[str, Any]:
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    return body


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    body = deployment(name, replicas=replicas)
    body["kind"] = "StatefulSet"
    body["spec"]["serviceName"] = name
    return lingering(body)


class Pods:
    """The pods with label ``app`` at every write: name -> (uid, terminating, labels, node)."""

    def __init__(self, sandbox: SandboxHandle, app: str) -> None:
        self.app = app
        self.now: dict[str, tuple[str, bool, dict[str, str], str]] = {}
        self.broken: list[str] = []
        sandbox.observe(self._on_event)

    def _on_event(self, event: StoredEvent) -> None:
        meta = event.obj["metadata"]
        if event.resource != ("", "pods") or (meta.get("labels") or {}).get("app") != self.app:
            return
        if event.type == "DELETED":
            self.now.pop(meta["name"], None)
        else:
            terminating = bool(meta.get("deletionTimestamp"))
            node = str((event.obj.get("spec") or {}).get("nodeName") or "")
            labels = dict(meta.get("labels") or {})
            self.now[meta["name"]] = (meta["uid"], terminating, labels, node)
        self.check()

    def check(self) -> None:
        """Subclasses: append to ``broken`` what must never be seen."""


def test_a_replicaset_replaces_a_terminating_pod_and_stops_counting_it(
    cluster: Cluster,
) -> None:
    cluster.apps.create_namespaced_deployment("default", lingering(deployment("web", 2)))
    rolled_out(cluster.apps, "web")
    victim = cluster.pods("app=web")[0]
    cluster.core.delete_namespaced_pod(victim.metadata.name, "default")

    def replaced() -> list[Any] | None:
        pods = cluster.pods("app=web")
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        return pods if len(pods) == 3 and len(live) == 2 else None

    eventually(replaced)  # the old pod lingers beside its replacement
    (rs,) = cluster.apps.list_namespaced_replica_set("default").items
    status = eventually(
        lambda: (
            s
            if (
                s := cluster.apps.read_namespaced_replica_set_status(rs.metadata.name, "default")
            ).status.ready_replicas
            == 2
            else None
        )
    ).status
    assert status.replicas == 2
    cluster.end_grace("app=web")
    eventually(lambda: gone(cluster.core, victim.metadata.name, victim.metadata.uid))


def test_a_rolling_update_finishes_while_old_pods_terminate(cluster: Cluster) -> None:
    cluster.apps.create_namespaced_deployment("default", lingering(deployment("web", 3)))
    rolled_out(cluster.apps, "web")
    old = {p.metadata.uid for p in cluster.pods("app=web")}
    cluster.apps.patch_namespaced_deployment(
        "web",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}},
    )
    rolled_out(cluster.apps, "web")
    lingering_old = [
        p
        for p in cluster.pods("app=web")
        if p.metadata.uid in old and p.metadata.deletion_timestamp is not None
    ]
    assert lingering_old  # rolled out with old pods still in their grace period
    cluster.end_grace("app=web")
    eventually(lambda: not any(p.metadata.uid in old for p in cluster.pods("app=web")))


class OneAtATime(Pods):
    """OrderedReady: never two pods terminating, never a name held by two uids."""

    def __init__(self, sandbox: SandboxHandle, app: str) -> None:
        super().__init__(sandbox, app)
        self.uids: dict[str, set[str]] = {}

    def check(self) -> None:
        terminating = [n for n, (_, t, _, _) in self.now.items() if t]
        if len(terminating) > 1:
            self.broken.append(f"two pods terminating at once: {terminating}")


def ready_db(cluster: Cluster, ready: int) -> Any:
    """The ``db`` StatefulSet's status once exactly ``ready`` of its pods are Ready."""

    def status() -> Any:
        found = cluster.apps.read_namespaced_stateful_set_status("db", "default").status
        return found if found.ready_replicas == ready else None

    return eventually(status)


def test_a_statefulset_recreates_a_name_only_once_the_old_pod_is_gone(
    cluster: Cluster,
) -> None:
    cluster.apps.create_namespaced_stateful_set("default", statefulset("db", 2))
    ready_db(cluster, 2)
    first = cluster.core.read_namespaced_pod("db-0", "default")
    cluster.core.delete_namespaced_pod("db-0", "default")
    status = ready_db(cluster, 1)
    assert status.replicas == 2  # a terminating pod still counts in status.replicas
    assert status.current_replicas == 1
    held = cluster.core.read_namespaced_pod("db-0", "default")
    assert held.metadata.uid == first.metadata.uid  # not replaced while it terminates
    cluster.end_grace("app=db")

    def recreated() -> Any:
        found = cluster.core.read_namespaced_pod("db-0", "default")
        return found if found.metadata.uid != first.metadata.uid else None

    assert recreated_pod(recreated).metadata.deletion_timestamp is None


def recreated_pod(check: Any) -> Any:
    def safe() -> Any:
        try:
            return check()
        except client.exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise

    return eventually(safe)


def test_an_ordered_statefulset_scales_down_one_terminated_pod_at_a_time(
    cluster: Cluster,
) -> None:
    cluster.apps.create_namespaced_stateful_set("default", statefulset("db", 3))
    ready_db(cluster, 3)
    watcher = OneAtATime(cluster.sandbox, "db")
    cluster.apps.patch_namespaced_stateful_set_scale("db", "default", {"spec": {"replicas": 1}})
    for name in ("db-2", "db-1"):
        eventually(
            lambda n=name: (
                cluster.core.read_namespaced_pod(n, "default").metadata.deletion_timestamp
            )
        )
        cluster.end_grace("app=db")
        eventually(lambda n=name: not any(p.metadata.name == n for p in cluster.pods("app=db")))
    assert [p.metadata.name for p in cluster.pods("app=db")] == ["db-0"]
    assert watcher.broken == []


class NodeHeldOnce(Pods):
    """A node never runs a new daemon pod while its old one is still terminating."""

    def check(self) -> None:
        nodes = [node for _, _, _, node in self.now.values() if node]
        twice = sorted({n for n in nodes if nodes.count(n) > 1})
        if twice:
            self.broken.append(f"two pods on {twice}")


def test_a_daemonset_replaces_a_node_pod_after_the_old_one_left(cluster: Cluster) -> None:
    body = lingering(deployment("agent", 1))
    body["kind"] = "DaemonSet"
    del body["spec"]["replicas"]
    cluster.apps.create_namespaced_daemon_set("default", body)
    nodes = len(cluster.core.list_node().items)
    eventually(
        lambda: (
            cluster.apps.read_namespaced_daemon_set_status("agent", "default").status.number_ready
            == nodes
        )
    )
    watcher = NodeHeldOnce(cluster.sandbox, "agent")
    victim = cluster.pods("app=agent")[0]
    cluster.core.delete_namespaced_pod(victim.metadata.name, "default")
    eventually(
        lambda: (
            cluster.apps.read_namespaced_daemon_set_status("agent", "default").status.number_ready
            == nodes - 1
        )
    )
    cluster.end_grace("app=agent")
    eventually(
        lambda: (
            len(cluster.pods("app=agent")) == nodes
            and cluster.apps.read_namespaced_daemon_set_status(
                "agent", "default"
            ).status.number_ready
            == nodes
        )
    )
    assert not any(p.metadata.uid == victim.metadata.uid for p in cluster.pods("app=agent"))
    assert watcher.broken == []  # never two pods on one node


class NoMix(Pods):
    """Recreate: no pod of the new template while a pod of the old one exists."""

    def check(self) -> None:
        hashes = {labels.get("pod-template-hash") for _, _, labels, _ in self.now.values()}
        if len(hashes) > 1:
            self.broken.append(f"old and new pods at once: {sorted(self.now)}")


def test_recreate_starts_new_pods_once_the_old_ones_are_gone(cluster: Cluster) -> None:
    body = lingering(deployment("web", 2))
    body["spec"]["strategy"] = {"type": "Recreate"}
    cluster.apps.create_namespaced_deployment("default", body)
    rolled_out(cluster.apps, "web")
    watcher = NoMix(cluster.sandbox, "web")
    cluster.apps.patch_namespaced_deployment(
        "web",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}},
    )
    eventually(
        lambda: (
            len(cluster.pods("app=web")) == 2
            and all(p.metadata.deletion_timestamp for p in cluster.pods("app=web"))
        )
    )
    cluster.end_grace("app=web")
    rolled_out(cluster.apps, "web")
    assert watcher.broken == []


@pytest.mark.parametrize("policy", ["Foreground", "Background"])
def test_garbage_collection_deletes_pods_gracefully(cluster: Cluster, policy: str) -> None:
    cluster.apps.create_namespaced_deployment("default", lingering(deployment("web", 2)))
    rolled_out(cluster.apps, "web")
    (rs,) = cluster.apps.list_namespaced_replica_set("default").items
    # the Deployment would make a new ReplicaSet: it goes first, orphaning its ReplicaSet
    cluster.apps.delete_namespaced_deployment("web", "default", propagation_policy="Orphan")
    eventually(
        lambda: (
            not cluster.apps.read_namespaced_replica_set(
                rs.metadata.name, "default"
            ).metadata.owner_references
        )
    )
    cluster.apps.delete_namespaced_replica_set(
        rs.metadata.name, "default", propagation_policy=policy
    )
    pods = eventually(
        lambda: (
            found
            if (found := cluster.pods("app=web"))
            and all(p.metadata.deletion_timestamp for p in found)
            else None
        )
    )
    assert {p.metadata.deletion_grace_period_seconds for p in pods} == {LINGER}
    names = {r.metadata.name for r in cluster.apps.list_namespaced_replica_set("default").items}
    # foreground: the owner waits for its pods; background: it went first
    assert (rs.metadata.name in names) == (policy == "Foreground")
    cluster.end_grace("app=web")
    eventually(lambda: not cluster.pods("app=web"))
    eventually(lambda: not cluster.apps.list_namespaced_replica_set("default").items)


def test_namespace_deletion_waits_for_terminating_pods(cluster: Cluster) -> None:
    cluster.core.create_namespace({"metadata": {"name": "team"}})
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "terminationGracePeriodSeconds": LINGER,
            "containers": [{"name": "app", "image": "nginx:1.27"}],
        },
    }
    cluster.core.create_namespaced_pod("team", body)
    eventually(lambda: cluster.core.read_namespaced_pod("web", "team").status.phase == "Running")
    cluster.core.delete_namespace("team")

    def waiting() -> Any:
        ns = cluster.core.read_namespace("team")
        conditions = {c.type: c for c in ns.status.conditions or []}
        remaining = conditions.get("NamespaceContentRemaining")
        return remaining if remaining is not None and remaining.status == "True" else None

    remaining = eventually(waiting)
    assert remaining.message == "Some resources are remaining: pods. has 1 resource instances"
    assert cluster.core.read_namespaced_pod("web", "team").metadata.deletion_timestamp
    cluster.core.delete_namespaced_pod("web", "team", grace_period_seconds=1)
    eventually(lambda: http(cluster.sandbox, "GET", "/api/v1/namespaces/team")[0] == 404)
