"""Graceful pod deletion, as https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/
describes it: a DELETE of a scheduled pod marks it (``deletionTimestamp``,
``deletionGracePeriodSeconds``) and answers 200 with it; the kubelet stops its
containers (``Killing``), and the pod goes once its grace period is over. ``gracePeriodSeconds:
0`` (a force deletion), an unscheduled pod and an ended pod go at once; a second DELETE
may only shorten the grace period; finalizers still hold the object after it.

A pod that must be seen Terminating asks for a long grace period (``LINGER`` seconds,
scaled by the sandbox's ``pod_grace_scale``), and the test ends it with a shorter one.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.termination import mark_terminating, plan_pod_delete, requested_grace
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http
from tests.sandbox.workloads import LINGER

NS = "/api/v1/namespaces/default"


@pytest.fixture
def graceful(
    graceful_api: tuple[SandboxHandle, client.ApiClient],
) -> tuple[SandboxHandle, client.CoreV1Api]:
    sandbox, api = graceful_api
    return sandbox, client.CoreV1Api(api)


def pod(name: str, grace: int | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], **spec},
    }
    if grace is not None:
        body["spec"]["terminationGracePeriodSeconds"] = grace
    return body


def running(core: client.CoreV1Api, name: str) -> client.V1Pod:
    def check() -> client.V1Pod | None:
        found = core.read_namespaced_pod(name, "default")
        statuses = found.status.container_statuses or []
        return found if statuses and all(s.state.running for s in statuses) else None

    return eventually(check)


def gone(core: client.CoreV1Api, name: str, uid: str) -> bool:
    try:
        return str(core.read_namespaced_pod(name, "default").metadata.uid) != uid
    except ApiException as e:
        return e.status == 404


def killing(sandbox: SandboxHandle, name: str) -> list[str]:
    query = f"fieldSelector=involvedObject.name%3D{name},involvedObject.kind%3DPod"
    status, listed = http(sandbox, "GET", f"{NS}/events?{query}")
    assert status == 200
    return [e["message"] for e in listed["items"] if e["reason"] == "Killing"]


def test_a_running_pod_is_marked_and_stopped_then_goes(
    graceful: tuple[SandboxHandle, client.CoreV1Api],
) -> None:
    sandbox, core = graceful
    core.create_namespaced_pod("default", pod("web", grace=LINGER))
    uid = running(core, "web").metadata.uid
    before = datetime.now(UTC).replace(microsecond=0)
    status, answer = http(sandbox, "DELETE", f"{NS}/pods/web")
    assert status == 200 and answer["kind"] == "Pod"
    meta = answer["metadata"]
    assert meta["deletionGracePeriodSeconds"] == LINGER
    # the time after which the pod may be killed: now plus its grace period
    stamp = datetime.strptime(meta["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    assert (stamp.replace(tzinfo=UTC) - before).total_seconds() >= LINGER

    def stopping() -> client.V1Pod | None:
        found = core.read_namespaced_pod("web", "default")
        ready = {c.type: c.status for c in found.status.conditions}["Ready"]
        return found if ready == "False" else None

    stopped = eventually(stopping)
    assert stopped.metadata.deletion_timestamp is not None
    assert all(not s.ready for s in stopped.status.container_statuses)
    assert eventually(lambda: killing(sandbox, "web")) == ["Stopping container app"]
    # a second DELETE without a shorter grace period changes nothing
    status, again = http(sandbox, "DELETE", f"{NS}/pods/web")
    assert status == 200
    assert again["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    assert again["metadata"]["deletionGracePeriodSeconds"] == LINGER
    # a shorter one moves the deadline back by the difference
    status, shorter = http(sandbox, "DELETE", f"{NS}/pods/web", {"gracePeriodSeconds": 1})
    assert status == 200 and shorter["metadata"]["deletionGracePeriodSeconds"] == 1
    moved = datetime.strptime(shorter["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    assert (stamp - moved).total_seconds() == LINGER - 1
    eventually(lambda: gone(core, "web", uid))
    assert killing(sandbox, "web") == ["Stopping container app"]  # killed once


def test_the_watch_sees_the_mark_the_kill_and_the_removal(
    graceful: tuple[SandboxHandle, client.CoreV1Api],
) -> None:
    _, core = graceful
    core.create_namespaced_pod("default", pod("web", grace=100))
    rv = running(core, "web").metadata.resource_version
    seen: list[tuple[str, Any]] = []

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=60
        ):
            seen.append((event["type"], event["object"]))
            if event["type"] == "DELETED":
                stream.stop()

    thread = threading.Thread(target=follow)
    thread.start()
    core.delete_namespaced_pod("web", "default")  # 100 s of grace: 1 s here
    thread.join(timeout=90)
    assert not thread.is_alive()
    types = [t for t, _ in seen]
    assert types[0] == "MODIFIED" and types[-1] == "DELETED"
    assert "ADDED" not in types
    marked = seen[0][1]
    assert marked.metadata.deletion_timestamp is not None
    assert marked.metadata.deletion_grace_period_seconds == 100
    # before it went, the kubelet reported its containers killed at the end of the grace period
    last = seen[-1][1].status
    assert last.phase == "Failed"
    assert [s.state.terminated.exit_code for s in last.container_statuses] == [137]


def test_the_pod_spec_grace_period_and_its_default(
    graceful: tuple[SandboxHandle, client.CoreV1Api],
) -> None:
    sandbox, core = graceful
    core.create_namespaced_pod("default", pod("default-grace"))
    core.create_namespaced_pod("default", pod("own-grace", grace=5))
    running(core, "default-grace"), running(core, "own-grace")
    _, first = http(sandbox, "DELETE", f"{NS}/pods/default-grace")
    _, second = http(sandbox, "DELETE", f"{NS}/pods/own-grace")
    assert first["metadata"]["deletionGracePeriodSeconds"] == 30
    assert second["metadata"]["deletionGracePeriodSeconds"] == 5
    # the DELETE's own grace period wins over the pod's
    core.create_namespaced_pod("default", pod("asked", grace=LINGER))
    running(core, "asked")
    asked = core.delete_namespaced_pod("asked", "default", grace_period_seconds=7)
    assert asked.metadata.deletion_grace_period_seconds == 7


def test_force_deletion_removes_at_once(graceful: tuple[SandboxHandle, client.CoreV1Api]) -> None:
    sandbox, core = graceful
    core.create_namespaced_pod("default", pod("web", grace=LINGER))
    running(core, "web")
    status, answer = http(sandbox, "DELETE", f"{NS}/pods/web?gracePeriodSeconds=0")
    assert status == 200 and answer["metadata"]["name"] == "web"
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("web", "default")
    assert e.value.status == 404
    # the kubelet still stops what ran
    assert eventually(lambda: killing(sandbox, "web")) == ["Stopping container app"]
    # force on a pod already terminating ends its grace period too
    core.create_namespaced_pod("default", pod("slow", grace=LINGER))
    running(core, "slow")
    core.delete_namespaced_pod("slow", "default")
    assert core.read_namespaced_pod("slow", "default").metadata.deletion_timestamp
    core.delete_namespaced_pod("slow", "default", grace_period_seconds=0)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("slow", "default")
    assert e.value.status == 404


def test_an_unscheduled_pod_goes_at_once(graceful: tuple[SandboxHandle, client.CoreV1Api]) -> None:
    sandbox, core = graceful
    for node in core.list_node().items:  # no node: the pod stays unscheduled
        core.delete_node(node.metadata.name)
    core.create_namespaced_pod("default", pod("nowhere", grace=LINGER))
    assert core.read_namespaced_pod("nowhere", "default").spec.node_name is None
    status, answer = http(sandbox, "DELETE", f"{NS}/pods/nowhere")
    assert status == 200 and answer["metadata"]["name"] == "nowhere"
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("nowhere", "default")
    assert e.value.status == 404


def test_an_ended_pod_goes_at_once(graceful: tuple[SandboxHandle, client.CoreV1Api]) -> None:
    _, core = graceful
    core.create_namespaced_pod("default", pod("once", grace=LINGER, restartPolicy="Never"))
    eventually(lambda: core.read_namespaced_pod("once", "default").status.phase == "Succeeded")
    core.delete_namespaced_pod("once", "default")
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("once", "default")
    assert e.value.status == 404


def test_finalizers_hold_the_pod_after_its_grace_period(
    graceful: tuple[SandboxHandle, client.CoreV1Api],
) -> None:
    _, core = graceful
    body = pod("held", grace=10)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod("default", body)
    uid = running(core, "held").metadata.uid
    core.delete_namespaced_pod("held", "default")

    def killed() -> client.V1Pod | None:
        found = core.read_namespaced_pod("held", "default")
        return found if found.metadata.deletion_grace_period_seconds == 0 else None

    held = eventually(killed)  # its kubelet is done: grace 0, but the finalizer holds it
    assert held.status.phase == "Failed"
    assert held.metadata.finalizers == ["example.com/hold"]
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    eventually(lambda: gone(core, "held", uid))


def test_removing_the_finalizer_during_the_grace_period_keeps_it_terminating(
    graceful: tuple[SandboxHandle, client.CoreV1Api],
) -> None:
    _, core = graceful
    body = pod("held", grace=LINGER)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod("default", body)
    uid = running(core, "held").metadata.uid
    core.delete_namespaced_pod("held", "default")
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    left = core.read_namespaced_pod("held", "default")  # its kubelet has not finished
    assert left.metadata.deletion_timestamp is not None and not left.metadata.finalizers
    core.delete_namespaced_pod("held", "default", grace_period_seconds=1)
    eventually(lambda: gone(core, "held", uid))


def test_a_dry_run_delete_marks_nothing(graceful: tuple[SandboxHandle, client.CoreV1Api]) -> None:
    sandbox, core = graceful
    core.create_namespaced_pod("default", pod("web", grace=LINGER))
    running(core, "web")
    status, answer = http(sandbox, "DELETE", f"{NS}/pods/web?dryRun=All")
    assert status == 200 and answer["metadata"]["deletionGracePeriodSeconds"] == LINGER
    assert core.read_namespaced_pod("web", "default").metadata.deletion_timestamp is None


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("?gracePeriodSeconds=soon", None, 'parsing "soon"'),
        ("", {"gracePeriodSeconds": "soon"}, "gracePeriodSeconds must be an integer"),
        ("", {"gracePeriodSeconds": True}, "gracePeriodSeconds must be an integer"),
    ],
)
def test_a_grace_period_that_is_not_a_number_is_refused(
    graceful: tuple[SandboxHandle, client.CoreV1Api], path: str, body: Any, message: str
) -> None:
    sandbox, core = graceful
    core.create_namespaced_pod("default", pod("web", grace=LINGER))
    status, answer = http(sandbox, "DELETE", f"{NS}/pods/web{path}", body)
    assert status == 400 and message in answer["message"]
    assert core.read_namespaced_pod("web", "default").metadata.deletion_timestamp is None


def test_the_table_shows_terminating(graceful: tuple[SandboxHandle, client.CoreV1Api]) -> None:
    sandbox, core = graceful
    core.create_namespaced_pod("default", pod("web", grace=LINGER))
    running(core, "web")
    core.delete_namespaced_pod("web", "default")
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
    status, table = http(sandbox, "GET", f"{NS}/pods", headers={"Accept": accept})
    assert status == 200
    columns = [c["name"] for c in table["columnDefinitions"]]
    (row,) = table["rows"]
    assert row["cells"][columns.index("Status")] == "Terminating"


def test_plan_of_a_delete() -> None:
    """The decision alone (``CheckGracefulDelete`` and ``BeforeDelete``)."""
    scheduled = {"metadata": {}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}}
    assert plan_pod_delete(scheduled, None).grace == 30
    assert plan_pod_delete(scheduled, 0).grace == 0
    assert plan_pod_delete({**scheduled, "spec": {}}, 10).grace == 0
    assert plan_pod_delete({**scheduled, "status": {"phase": "Failed"}}, 10).grace == 0
    assert requested_grace(-5) == 1 and requested_grace(None) is None
    meta: dict[str, Any] = {"generation": 2}
    mark_terminating(meta, 30, datetime(2026, 1, 1, tzinfo=UTC))
    assert meta == {
        "generation": 3,
        "deletionTimestamp": "2026-01-01T00:00:30Z",
        "deletionGracePeriodSeconds": 30,
    }
    marked = {**scheduled, "metadata": meta}
    assert plan_pod_delete(marked, None).pending
    assert plan_pod_delete(marked, 30).pending
    assert plan_pod_delete(marked, 5) == plan_pod_delete(marked, 5).__class__(5)
    mark_terminating(meta, 5)
    assert meta["deletionTimestamp"] == "2026-01-01T00:00:05Z" and meta["generation"] == 3
