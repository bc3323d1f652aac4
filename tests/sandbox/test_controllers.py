"""Simulated controllers: workloads progress to ready after the controller delay.

Status fields follow https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#deployment-status,
https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#partitions and
https://kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions.
Failure injection: the ``sandbox.reconciler.dev/fail`` annotation and ``fail_images``.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client, config

from reconciler.sandbox.testing import running_sandbox
from tests.sandbox.helpers import deployment, eventually

FAIL = {"sandbox.reconciler.dev/fail": "true"}


def conditions(obj: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in obj.status.conditions or []}


def test_deployment_becomes_available(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment("default", deployment("web", replicas=3))
    dep = eventually(lambda: _observed(apps.read_namespaced_deployment_status("web", "default")))
    s = dep.status
    assert (s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas) == (3, 3, 3, 3)
    assert conditions(dep)["Available"] == ("True", "MinimumReplicasAvailable")
    assert conditions(dep)["Progressing"] == ("True", "NewReplicaSetAvailable")
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    dep = eventually(lambda: _observed(apps.read_namespaced_deployment_status("web", "default")))
    assert dep.status.observed_generation == 2 and dep.status.ready_replicas == 1


def _observed(obj: Any) -> Any:
    status = obj.status
    if status and status.observed_generation == obj.metadata.generation:
        return obj
    return None


def test_fail_annotation_on_template(apps: client.AppsV1Api) -> None:
    body = deployment("web")
    body["spec"]["template"]["metadata"]["annotations"] = FAIL
    apps.create_namespaced_deployment("default", body)
    dep = eventually(lambda: _observed(apps.read_namespaced_deployment_status("web", "default")))
    assert not dep.status.ready_replicas and dep.status.unavailable_replicas == 2
    assert conditions(dep)["Progressing"] == ("False", "ProgressDeadlineExceeded")
    assert conditions(dep)["Available"][0] == "False"


def test_fail_images_option() -> None:
    with running_sandbox(fail_images=["*:broken*"]) as sandbox:
        apps = client.AppsV1Api(config.new_client_from_config(str(sandbox.kubeconfig)))
        apps.create_namespaced_deployment("default", deployment("bad", image="nginx:broken-1"))
        apps.create_namespaced_deployment("default", deployment("good", image="nginx:1"))
        bad = eventually(
            lambda: _observed(apps.read_namespaced_deployment_status("bad", "default"))
        )
        good = eventually(
            lambda: _observed(apps.read_namespaced_deployment_status("good", "default"))
        )
        assert not bad.status.ready_replicas and good.status.ready_replicas == 2


def job(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "backoffLimit": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "m", "image": "busybox"}],
                }
            },
        },
    }


def test_jobs_complete_or_fail(api_client: client.ApiClient) -> None:
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job("default", job("ok"))
    batch.create_namespaced_job("default", job("bad", FAIL))
    ok = eventually(
        lambda: (j := batch.read_namespaced_job_status("ok", "default")).status.conditions and j
    )
    bad = eventually(
        lambda: (j := batch.read_namespaced_job_status("bad", "default")).status.conditions and j
    )
    assert conditions(ok)["Complete"][0] == "True" and ok.status.succeeded == 1
    assert ok.status.completion_time is not None
    assert conditions(bad)["Failed"] == ("True", "BackoffLimitExceeded") and bad.status.failed


def statefulset(image: str, partition: int, replicas: int = 4) -> dict[str, Any]:
    body = deployment("db", replicas=replicas, image=image)
    body["kind"] = "StatefulSet"
    body["spec"]["serviceName"] = "db"
    body["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": partition},
    }
    return body


def test_statefulset_partitioned_rollout(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_stateful_set("default", statefulset("db:1", partition=0))
    first = eventually(lambda: _observed(apps.read_namespaced_stateful_set_status("db", "default")))
    assert first.status.updated_replicas == 4 and first.status.ready_replicas == 4
    old_revision = first.status.current_revision
    assert old_revision == first.status.update_revision
    apps.replace_namespaced_stateful_set("db", "default", statefulset("db:2", partition=3))
    sts = eventually(lambda: _observed(apps.read_namespaced_stateful_set_status("db", "default")))
    assert sts.status.updated_replicas == 1 and sts.status.current_replicas == 3
    assert sts.status.current_revision == old_revision != sts.status.update_revision
    apps.patch_namespaced_stateful_set(
        "db", "default", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}}}}
    )
    sts = eventually(
        lambda: (
            (s := _observed(apps.read_namespaced_stateful_set_status("db", "default")))
            and s.status.updated_replicas == 3
            and s
        )
    )
    apps.patch_namespaced_stateful_set(
        "db", "default", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}
    )
    sts = eventually(
        lambda: (
            (s := _observed(apps.read_namespaced_stateful_set_status("db", "default")))
            and s.status.updated_replicas == 4
            and s
        )
    )
    assert sts.status.current_revision == sts.status.update_revision
    assert sts.status.ready_replicas == 4


def test_statefulset_failing_revision_stalls(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_stateful_set("default", statefulset("db:1", partition=0))
    eventually(lambda: _observed(apps.read_namespaced_stateful_set_status("db", "default")))
    body = statefulset("db:2", partition=0)
    body["spec"]["template"]["metadata"]["annotations"] = FAIL
    apps.replace_namespaced_stateful_set("db", "default", body)
    sts = eventually(lambda: _observed(apps.read_namespaced_stateful_set_status("db", "default")))
    assert sts.status.updated_replicas == 1 and sts.status.ready_replicas == 3


def test_daemonset_and_pod(api_client: client.ApiClient, apps: client.AppsV1Api) -> None:
    body = deployment("agent")
    body["kind"] = "DaemonSet"
    del body["spec"]["replicas"]
    apps.create_namespaced_daemon_set("default", body)
    ds = eventually(lambda: _observed(apps.read_namespaced_daemon_set_status("agent", "default")))
    assert ds.status.number_ready == 1 and ds.status.updated_number_scheduled == 1
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    pod = eventually(
        lambda: (p := core.read_namespaced_pod_status("p", "default")).status.conditions and p
    )
    assert pod.status.phase == "Running" and conditions(pod)["Ready"][0] == "True"
