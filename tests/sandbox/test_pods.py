"""Pod status shape, failure injection and container logs of the simulated kubelet.

https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/ (phase, container
states waiting/running/terminated, conditions PodScheduled/Initialized/ContainersReady/
Ready), https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus
(podIP, containerStatuses fields) and
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#read-log-of-the-specified-pod
(``GET /api/v1/namespaces/{namespace}/pods/{name}/log``, ``container``, ``tailLines``).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.pods import pod_log, pod_status
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from tests.sandbox.helpers import eventually, http


def make_pod(name: str, *images: str, annotations: dict[str, str] | None = None) -> dict:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"containers": containers}}


def settled(core: client.CoreV1Api, name: str) -> client.V1Pod:
    """The pod once its containers left ``ContainerCreating`` (and, if healthy, are Ready)."""

    def check() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, "default")
        statuses = pod.status.container_statuses or []
        waiting = [s.state.waiting.reason for s in statuses if s.state.waiting]
        if not statuses or "ContainerCreating" in waiting:
            return None
        if not waiting and not all(s.ready for s in statuses):
            return None  # running, readiness not reported yet
        return pod

    return eventually(check)


def conditions(pod: client.V1Pod) -> dict[str, str]:
    return {c.type: c.status for c in pod.status.conditions}


def test_healthy_pod_status_shape(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", make_pod("web", "nginx:1.27"))
    pod = settled(core, "web")
    s = pod.status
    assert s.phase == "Running" and s.pod_ip.startswith("10.244.")
    assert [ip.ip for ip in s.pod_ips] == [s.pod_ip] and s.start_time is not None
    assert conditions(pod) == {
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    (c,) = s.container_statuses
    assert (c.name, c.image, c.ready, c.restart_count, c.started) == (
        "c0",
        "nginx:1.27",
        True,
        0,
        True,
    )
    assert c.state.running.started_at is not None and c.state.waiting is None


def test_crash_loop_by_image_glob() -> None:
    with running_sandbox(fail_images=["*:broken*"]) as sandbox:
        core = client.CoreV1Api(config.new_client_from_config(str(sandbox.kubeconfig)))
        core.create_namespaced_pod("default", make_pod("bad", "app:broken-1"))
        core.create_namespaced_pod("default", make_pod("good", "app:1"))
        bad, good = settled(core, "bad"), settled(core, "good")
    (c,) = bad.status.container_statuses
    assert bad.status.phase == "Running" and not c.ready and c.restart_count == 1
    assert c.state.waiting.reason == "CrashLoopBackOff"
    assert c.last_state.terminated.reason == "Error" and c.last_state.terminated.exit_code == 1
    assert conditions(bad)["Ready"] == "False" and conditions(bad)["ContainersReady"] == "False"
    ready = next(x for x in bad.status.conditions if x.type == "Ready")
    assert ready.reason == "ContainersNotReady" and "[c0]" in ready.message
    assert conditions(good)["Ready"] == "True"


def test_image_pull_backoff_by_annotation(core: client.CoreV1Api) -> None:
    marked = make_pod(
        "pull", "app:1", annotations={"sandbox.reconciler.dev/fail": "ImagePullBackOff"}
    )
    core.create_namespaced_pod("default", marked)
    pod = settled(core, "pull")
    (c,) = pod.status.container_statuses
    assert pod.status.phase == "Pending" and c.state.waiting.reason == "ImagePullBackOff"
    assert (
        c.restart_count == 0
        and not c.ready
        and c.state.waiting.message == ('Back-off pulling image "app:1"')
    )


def test_settled_status_is_stable() -> None:
    pod = {"metadata": {"name": "p", "uid": "u1"}, "spec": {"containers": [{"name": "c"}]}}
    for failure in ("", "CrashLoopBackOff", "ImagePullBackOff"):
        first = pod_status(pod, failure, {})
        assert pod_status(pod, failure, first) == first


def test_pod_log_and_tail_lines(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    lines = "migrating 1/2\nmigrating 2/2\ndone"
    core.create_namespaced_pod(
        "default", make_pod("job", "tool:1", annotations={"sandbox.reconciler.dev/log": lines})
    )
    settled(core, "job")
    log = core.read_namespaced_pod_log("job", "default")
    assert log.splitlines() == [
        "[sandbox] container c0 started (image tool:1)",
        "migrating 1/2",
        "migrating 2/2",
        "done",
    ]
    assert core.read_namespaced_pod_log("job", "default", tail_lines=2) == "migrating 2/2\ndone\n"
    status, body = http(sandbox, "GET", "/api/v1/namespaces/default/pods/job/log?tailLines=x")
    assert status == 400 and "tailLines" in body["message"]


def test_crashing_container_log_ends_with_exit() -> None:
    pod = make_pod("p", "a:1", annotations={"sandbox.reconciler.dev/fail": "CrashLoopBackOff"})
    pod["metadata"]["uid"] = "u"
    pod["status"] = pod_status(pod, "CrashLoopBackOff", {})
    assert pod_log(pod, None, 1) == "[sandbox] container c0 exited with code 1 (Error)\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/two/log", "a container name must be specified for pod two, choose one of: [c0 c1]"),
        ("/two/log?container=nope", "container nope is not valid for pod two"),
        ("/nope/log", 'pods "nope" not found'),
    ],
)
def test_pod_log_errors(
    sandbox: SandboxHandle, core: client.CoreV1Api, path: str, message: str
) -> None:
    core.create_namespaced_pod("default", make_pod("two", "a:1", "b:1"))
    settled(core, "two")
    status, body = http(sandbox, "GET", "/api/v1/namespaces/default/pods" + path)
    assert status in (400, 404) and body["message"] == message


def test_log_of_waiting_container_is_refused(core: client.CoreV1Api) -> None:
    marked = make_pod(
        "pull", "app:1", annotations={"sandbox.reconciler.dev/fail": "ImagePullBackOff"}
    )
    core.create_namespaced_pod("default", marked)
    settled(core, "pull")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("pull", "default")
    assert err.value.status == 400
    assert "is waiting to start: trying and failing to pull image" in err.value.body


def test_log_is_only_a_pod_subresource(sandbox: SandboxHandle) -> None:
    status, _ = http(sandbox, "GET", "/api/v1/namespaces/default/configmaps/x/log")
    assert status == 404
