"""Deployments own ReplicaSets that own Pods, and roll over time as a real cluster does.

https://kubernetes.io/docs/concepts/workloads/controllers/deployment/ (ReplicaSets named
``<deployment>-<pod-template-hash>``, the ``deployment.kubernetes.io/revision``
annotation, ``maxSurge``/``maxUnavailable``, ``Recreate``, pausing, ``revisionHistoryLimit``,
``progressDeadlineSeconds``: "Kubernetes marks a Deployment as progressing when ... the
Deployment is scaling up its newest ReplicaSet ... [it] may get stuck trying to deploy its
newest ReplicaSet without ever completing ... reason: ProgressDeadlineExceeded") and
https://kubernetes.io/docs/reference/kubectl/generated/kubectl_rollout/ (``kubectl rollout
status|history|undo|restart``).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.testing import SandboxHandle
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.sandbox.helpers import deployment, eventually
from tests.sandbox.workloads import (
    conditions,
    fast_sandbox,
    pods_of,
    ready,
    rolled_out,
    rolling,
)

KUBECTL = shutil.which("kubectl")


class PodCensus:
    """Every pod of one app at every write: how many exist, how many are Ready.

    A terminating pod (``deletionTimestamp`` set) no longer counts: the Deployment and
    ReplicaSet controllers leave it out of ``status.replicas``, so maxSurge bounds the
    pods that are not being deleted, while old ones linger for their grace period
    (https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/).
    """

    def __init__(self, sandbox: SandboxHandle, app: str, core: client.CoreV1Api) -> None:
        self.app = app
        self.pods: dict[str, tuple[bool, str]] = {  # name -> (ready, pod-template-hash)
            p.metadata.name: (ready(p), p.metadata.labels["pod-template-hash"])
            for p in pods_of(core, f"app={app}")
        }
        self.samples: list[tuple[int, int, frozenset[str]]] = []
        sandbox.observe(self._on_event)

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource != ("", "pods"):
            return
        meta = event.obj["metadata"]
        labels = meta.get("labels") or {}
        if labels.get("app") != self.app:
            return
        if event.type == "DELETED" or meta.get("deletionTimestamp"):
            self.pods.pop(meta["name"], None)
        else:
            status = event.obj.get("status") or {}
            is_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            self.pods[meta["name"]] = (is_ready, str(labels.get("pod-template-hash", "")))
        ready_count = sum(1 for r, _ in self.pods.values() if r)
        hashes = frozenset(h for _, h in self.pods.values())
        self.samples.append((len(self.pods), ready_count, hashes))


def _replicasets(apps: client.AppsV1Api, app: str) -> list[Any]:
    items = apps.list_namespaced_replica_set("default", label_selector=f"app={app}").items
    return sorted(items, key=lambda rs: int(rs.metadata.annotations[REVISION]))


REVISION = "deployment.kubernetes.io/revision"


def test_deployment_owns_a_replicaset_that_owns_ready_pods() -> None:
    with fast_sandbox() as (_, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_deployment("default", deployment("web", replicas=3))
        d = rolled_out(apps, "web")
        assert d.metadata.annotations[REVISION] == "1"
        assert conditions(d)["Available"] == ("True", "MinimumReplicasAvailable")
        assert conditions(d)["Progressing"] == ("True", "NewReplicaSetAvailable")
        (rs,) = _replicasets(apps, "web")
        pod_hash = rs.metadata.labels["pod-template-hash"]
        assert rs.metadata.name == f"web-{pod_hash}"
        assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": pod_hash}
        (owner,) = rs.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "Deployment",
            "web",
            d.metadata.uid,
            True,
        )
        pods = pods_of(core, "app=web")
        assert len(pods) == 3 and all(ready(p) for p in pods)
        for pod in pods:
            assert pod.metadata.name.startswith(f"web-{pod_hash}-")
            assert pod.metadata.owner_references[0].uid == rs.metadata.uid
            assert pod.spec.node_name in {"node-1", "node-2", "node-3"}
        assert {p.spec.node_name for p in pods} == {"node-1", "node-2", "node-3"}  # spread
        apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
        eventually(lambda: len(pods_of(core, "app=web")) == 1)
        assert rolled_out(apps, "web").status.ready_replicas == 1


def test_generation_only_rises_one_step_per_template_change() -> None:
    """``metadata.generation`` counts changes of the spec
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/#object-spec-and-status,
    https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#deployment-status:
    ``observedGeneration`` follows it). The controller writes the revision annotation
    through the status subresource, with the status, so neither its annotation nor a
    status write moves the generation, and no event of the watch stream ever shows it
    lower than one before it (an ``observedGeneration == generation`` gate relies on it)."""
    with fast_sandbox() as (sandbox, api):
        apps = client.AppsV1Api(api)
        seen: list[int] = []

        def on_event(event: StoredEvent) -> None:
            if event.resource == ("apps", "deployments") and event.type != "DELETED":
                seen.append(int(event.obj["metadata"]["generation"]))

        sandbox.observe(on_event)
        apps.create_namespaced_deployment("default", rolling("web", 2, "app:1"))
        d = rolled_out(apps, "web")
        assert (d.metadata.generation, d.metadata.annotations[REVISION]) == (1, "1")
        for want, image in ((2, "app:2"), (3, "app:3")):
            template = {"spec": {"containers": [{"name": "app", "image": image}]}}
            apps.patch_namespaced_deployment("web", "default", {"spec": {"template": template}})
            d = rolled_out(apps, "web")
            assert d.metadata.generation == d.status.observed_generation == want
            assert d.metadata.annotations[REVISION] == str(want)
        assert seen == sorted(seen) and set(seen) == {1, 2, 3}, seen
        # who wrote the annotation, and how: the controller, through /status
        (writer,) = [m for m in d.metadata.managed_fields if REVISION in str(m.fields_v1 or {})]
        assert writer.operation == "Update" and writer.subresource == "status"


@pytest.mark.parametrize(("surge", "unavailable"), [(1, 0), (0, 1), ("50%", "25%")])
def test_rolling_update_stays_within_surge_and_unavailable(surge: Any, unavailable: Any) -> None:
    replicas = 4
    max_total = replicas + (2 if surge == "50%" else surge)
    min_ready = replicas - (1 if unavailable == "25%" else unavailable)
    with fast_sandbox() as (sandbox, api):
        apps = client.AppsV1Api(api)
        apps.create_namespaced_deployment(
            "default", rolling("web", replicas, "app:1", surge, unavailable)
        )
        rolled_out(apps, "web")
        census = PodCensus(sandbox, "web", client.CoreV1Api(api))
        apps.patch_namespaced_deployment(
            "web",
            "default",
            {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}},
        )
        d = rolled_out(apps, "web")
        assert d.metadata.annotations[REVISION] == "2"
        old, new = _replicasets(apps, "web")
        assert (old.spec.replicas, new.spec.replicas) == (0, replicas)
        assert new.spec.template.spec.containers[0].image == "app:2"
    assert census.samples, "the rollout wrote nothing"
    assert max(total for total, _, _ in census.samples) <= max_total
    assert min(ready_count for _, ready_count, _ in census.samples) >= min_ready
    assert any(len(hashes) == 2 for _, _, hashes in census.samples)  # old and new side by side


def test_stuck_rollout_stays_available_until_its_progress_deadline() -> None:
    with fast_sandbox(fail_images=["*:broken"]) as (_, api):
        apps = client.AppsV1Api(api)
        body = rolling("web", 3, "app:1", 1, 1)
        body["spec"]["progressDeadlineSeconds"] = 1
        apps.create_namespaced_deployment("default", body)
        rolled_out(apps, "web")
        patch = {
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:broken"}]}}}
        }
        apps.patch_namespaced_deployment("web", "default", patch)
        started = time.monotonic()
        stuck = eventually(
            lambda: (
                (
                    d := apps.read_namespaced_deployment_status("web", "default")
                ).status.updated_replicas
                and d
            )
        )
        assert conditions(stuck)["Progressing"][0] == "True"  # not failed before the deadline
        assert conditions(stuck)["Available"] == ("True", "MinimumReplicasAvailable")
        expired = eventually(
            lambda: (
                conditions(d := apps.read_namespaced_deployment_status("web", "default"))[
                    "Progressing"
                ]
                == ("False", "ProgressDeadlineExceeded")
                and d
            )
        )
        assert time.monotonic() - started >= 0.9
        assert conditions(expired)["Available"] == ("True", "MinimumReplicasAvailable")
        assert expired.status.available_replicas == 2  # old pods keep serving
        assert expired.status.unavailable_replicas


def test_paused_deployment_waits_and_resumes() -> None:
    with fast_sandbox() as (_, api):
        apps = client.AppsV1Api(api)
        apps.create_namespaced_deployment("default", deployment("web", replicas=2, image="app:1"))
        rolled_out(apps, "web")
        apps.patch_namespaced_deployment("web", "default", {"spec": {"paused": True}})
        image = {
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}
        }
        apps.patch_namespaced_deployment("web", "default", image)

        def paused_and_observed() -> Any:
            d = apps.read_namespaced_deployment_status("web", "default")
            observed = d.status.observed_generation == d.metadata.generation
            paused = conditions(d)["Progressing"] == ("Unknown", "DeploymentPaused")
            return d if observed and paused else None

        eventually(paused_and_observed)
        time.sleep(0.2)  # ten controller delays: a paused Deployment still has not rolled
        assert len(_replicasets(apps, "web")) == 1  # nothing rolled
        apps.patch_namespaced_deployment("web", "default", {"spec": {"paused": False}})
        assert rolled_out(apps, "web").metadata.annotations[REVISION] == "2"


def test_recreate_never_runs_old_and_new_pods_together() -> None:
    with fast_sandbox() as (sandbox, api):
        apps = client.AppsV1Api(api)
        body = deployment("web", replicas=3, image="app:1")
        body["spec"]["strategy"] = {"type": "Recreate"}
        apps.create_namespaced_deployment("default", body)
        rolled_out(apps, "web")
        census = PodCensus(sandbox, "web", client.CoreV1Api(api))
        image = {
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}
        }
        apps.patch_namespaced_deployment("web", "default", image)
        rolled_out(apps, "web")
    assert all(len(hashes) <= 1 for _, _, hashes in census.samples)
    assert any(total == 0 for total, _, _ in census.samples)  # everything down in between


def test_revision_history_limit_deletes_old_replicasets() -> None:
    with fast_sandbox() as (_, api):
        apps = client.AppsV1Api(api)
        body = deployment("web", replicas=1, image="app:1")
        body["spec"]["revisionHistoryLimit"] = 1
        apps.create_namespaced_deployment("default", body)
        rolled_out(apps, "web")
        for version in (2, 3, 4):
            image = {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "app", "image": f"app:{version}"}]}
                    }
                }
            }
            apps.patch_namespaced_deployment("web", "default", image)
            rolled_out(apps, "web")
        rss = eventually(lambda: len(r := _replicasets(apps, "web")) == 2 and r)
        assert [rs.metadata.annotations[REVISION] for rs in rss] == ["3", "4"]


def test_deleting_a_deployment_collects_replicasets_and_pods() -> None:
    """https://kubernetes.io/docs/concepts/architecture/garbage-collection/#cascading-deletion"""
    with fast_sandbox() as (_, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_deployment("default", deployment("web", replicas=2))
        rolled_out(apps, "web")
        apps.delete_namespaced_deployment("web", "default")
        eventually(lambda: not pods_of(core, "app=web") and not _replicasets(apps, "web"))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_rollout_status_history_undo_restart() -> None:
    timing = Timing(pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.02, pod_start=0.05)
    with fast_sandbox(timing) as (sandbox, api):
        apps = client.AppsV1Api(api)

        def kubectl(*args: str) -> str:
            done = subprocess.run(
                [str(KUBECTL), "--kubeconfig", str(sandbox.kubeconfig), "-n", "default", *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        apps.create_namespaced_deployment("default", deployment("web", replicas=2, image="app:1"))
        assert "successfully rolled out" in kubectl(
            "rollout", "status", "deployment/web", "--timeout=30s"
        )
        kubectl("set", "image", "deployment/web", "app=app:2")
        assert "successfully rolled out" in kubectl(
            "rollout", "status", "deployment/web", "--timeout=30s"
        )
        history = kubectl("rollout", "history", "deployment/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
        kubectl("rollout", "undo", "deployment/web")
        kubectl("rollout", "status", "deployment/web", "--timeout=30s")
        d = rolled_out(apps, "web")
        assert d.spec.template.spec.containers[0].image == "app:1"
        assert d.metadata.annotations[REVISION] == "3"
        assert len(_replicasets(apps, "web")) == 2  # the rollback reused revision 1's set
        kubectl("rollout", "restart", "deployment/web")
        kubectl("rollout", "status", "deployment/web", "--timeout=30s")
        assert rolled_out(apps, "web").metadata.annotations[REVISION] == "4"
