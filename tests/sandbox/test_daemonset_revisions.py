"""The sandbox's DaemonSets keep revisions and honour ``OnDelete`` as a real cluster does.

https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/: "With OnDelete
update strategy, after you update a DaemonSet template, new DaemonSet pods will only
be created when you manually delete old DaemonSet pods." The revision bookkeeping
follows the controller (kubernetes/kubernetes pkg/controller/daemon/update.go
``snapshot``/``constructHistory``, util/daemonset_util.go ``CreatePodTemplate``): a
ControllerRevision ``<name>-<hash>`` labelled ``controller-revision-hash: <hash>``
per template, the bare hash on every pod, and a template that comes back renumbers
its old revision as the newest (what ``kubectl rollout history daemonset`` shows).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.sandbox.helpers import deployment, eventually
from tests.sandbox.workloads import fast_sandbox, pods_of, ready

HASH = "controller-revision-hash"


def _agent(image: str, strategy: str) -> dict[str, Any]:
    body = deployment("agent", image=image)
    body["kind"] = "DaemonSet"
    del body["spec"]["replicas"]
    body["spec"]["updateStrategy"] = {"type": strategy}
    return body


def _settled(apps: client.AppsV1Api, updated: int) -> Any:
    def check() -> Any:
        ds = apps.read_namespaced_daemon_set_status("agent", "default")
        s = ds.status
        ok = (
            s.observed_generation == ds.metadata.generation
            and s.number_ready == s.desired_number_scheduled == 3
            and (s.updated_number_scheduled or 0) == updated
        )
        return ds if ok else None

    return eventually(check)


def _revisions(apps: client.AppsV1Api) -> dict[str, tuple[int, str]]:
    items = apps.list_namespaced_controller_revision("default").items
    return {r.metadata.name: (r.revision, r.metadata.labels[HASH]) for r in items}


def test_on_delete_replaces_only_deleted_pods_from_the_current_revision() -> None:
    with fast_sandbox(
        Timing(pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.02, nodes=3)
    ) as (_, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_daemon_set("default", _agent("agent:1", "OnDelete"))
        _settled(apps, 3)
        [(first, (number, digest))] = _revisions(apps).items()
        assert (first, number) == (f"agent-{digest}", 1)
        assert {p.metadata.labels[HASH] for p in pods_of(core, "app=agent")} == {digest}

        apps.patch_namespaced_daemon_set(
            "agent", "default", {"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "agent:2"}]}}}},
        )  # fmt: skip
        ds = _settled(apps, 0)  # observed: the new template changed no pod
        assert {p.spec.containers[0].image for p in pods_of(core, "app=agent")} == {"agent:1"}
        new = next(h for n, (r, h) in _revisions(apps).items() if r == 2)
        victim = sorted(pods_of(core, "app=agent"), key=lambda p: p.spec.node_name)[0]
        core.delete_namespaced_pod(victim.metadata.name, "default")

        def replaced() -> Any:
            # the victim lingers for its grace period: wait for its successor
            pods = [p for p in pods_of(core, "app=agent") if p.metadata.uid != victim.metadata.uid]
            on_node = [p for p in pods if p.spec.node_name == victim.spec.node_name]
            return pods if len(pods) == 3 and on_node and ready(on_node[0]) else None

        pods = eventually(replaced)
        by_node = {
            p.spec.node_name: (p.spec.containers[0].image, p.metadata.labels[HASH]) for p in pods
        }
        assert by_node.pop(victim.spec.node_name) == ("agent:2", new)
        assert set(by_node.values()) == {("agent:1", digest)}
        ds = _settled(apps, 1)
        assert ds.status.number_available == 3 and ds.status.desired_number_scheduled == 3

        # back to the first template: no third revision, the first one is the newest now
        apps.patch_namespaced_daemon_set(
            "agent", "default", {"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "agent:1"}]}}}},
        )  # fmt: skip
        _settled(apps, 2)
        assert _revisions(apps) == {first: (3, digest), f"agent-{new}": (2, new)}
