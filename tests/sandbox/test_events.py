"""Events the controllers, the scheduler and the kubelet record, as ``kubectl describe``
shows them on a real cluster.

Pages imitated:
https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/ (the
fields), https://kubernetes.io/docs/tasks/debug/debug-application/debug-running-pod/
(Scheduled, Pulled, Created, Started; Failed and BackOff for an image that cannot be
pulled), https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#creating-a-deployment
(ScalingReplicaSet), https://kubernetes.io/docs/concepts/workloads/controllers/job/
(SuccessfulCreate, Completed).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.events import EventRecorder
from reconciler.sandbox.kubelet import container_events
from reconciler.sandbox.store import Store
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, eventually, http, job
from tests.sandbox.workloads import rolled_out

NS = "/api/v1/namespaces/default"


def events_of(sandbox: SandboxHandle, name: str, kind: str = "") -> list[dict[str, Any]]:
    """What ``kubectl describe`` reads: the events whose involvedObject is ``name``."""
    query = f"fieldSelector=involvedObject.name%3D{name}"
    if kind:
        query += f",involvedObject.kind%3D{kind}"
    status, listed = http(sandbox, "GET", f"{NS}/events?{query}")
    assert status == 200
    return list(listed["items"])


def reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


def at_least(sandbox: SandboxHandle, name: str, count: int) -> list[dict[str, Any]]:
    seen = events_of(sandbox, name)
    return seen if len(seen) >= count else []


def test_a_deployment_rolls_out_with_the_events_of_a_real_one(
    fast: tuple[SandboxHandle, client.ApiClient],
) -> None:
    sandbox, api = fast
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", deployment("web", replicas=2))
    rolled_out(apps, "web")
    scaled = eventually(lambda: events_of(sandbox, "web", "Deployment"))
    (rs,) = apps.list_namespaced_replica_set("default").items
    rs_name = rs.metadata.name
    assert [(e["type"], e["reason"], e["message"]) for e in scaled] == [
        ("Normal", "ScalingReplicaSet", f"Scaled up replica set {rs_name} from 0 to 2")
    ]
    assert scaled[0]["source"] == {"component": "deployment-controller"}
    assert scaled[0]["involvedObject"]["apiVersion"] == "apps/v1"
    assert scaled[0]["count"] == 1 and scaled[0]["firstTimestamp"]
    created = events_of(sandbox, rs_name, "ReplicaSet")
    pods = client.CoreV1Api(api).list_namespaced_pod("default").items
    assert sorted(e["message"] for e in created) == sorted(
        f"Created pod: {p.metadata.name}" for p in pods
    )
    assert {e["source"]["component"] for e in created} == {"replicaset-controller"}
    pod = pods[0]
    seen = eventually(lambda: at_least(sandbox, pod.metadata.name, 4))
    assert reasons(seen) == ["Scheduled", "Pulled", "Created", "Started"]
    scheduled, pulled, created_c, started = seen
    node = pod.spec.node_name
    assert scheduled["message"] == f"Successfully assigned default/{pod.metadata.name} to {node}"
    assert scheduled["reportingComponent"] == "default-scheduler"
    assert scheduled["action"] == "Binding" and scheduled["eventTime"]
    assert pulled["message"] == 'Container image "nginx:1.25" already present on machine'
    assert created_c["message"] == "Created container app"
    assert started["message"] == "Started container app"
    for event in (pulled, created_c, started):
        assert event["source"] == {"component": "kubelet", "host": node}
        assert event["involvedObject"]["fieldPath"] == "spec.containers{app}"
        assert event["involvedObject"]["uid"] == pod.metadata.uid


def test_scaling_down_deletes_and_kills(fast: tuple[SandboxHandle, client.ApiClient]) -> None:
    sandbox, api = fast
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", deployment("web", replicas=2))
    rolled_out(apps, "web")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 1}})
    (rs,) = apps.list_namespaced_replica_set("default").items
    down = f"Scaled down replica set {rs.metadata.name} from 2 to 1"
    eventually(lambda: down in [e["message"] for e in events_of(sandbox, "web", "Deployment")])
    deleted = eventually(
        lambda: [
            e for e in events_of(sandbox, rs.metadata.name) if e["reason"] == "SuccessfulDelete"
        ]
    )
    gone = deleted[0]["message"].removeprefix("Deleted pod: ")
    # the kubelet's Killing Event is recorded in the background: wait for it, not for the
    # pod's latest Event (which may still be its Started)
    killing = eventually(
        lambda: [e for e in events_of(sandbox, gone, "Pod") if e["reason"] == "Killing"]
    )
    assert [(e["reason"], e["message"]) for e in killing] == [("Killing", "Stopping container app")]


def test_an_image_that_cannot_be_pulled(fast: tuple[SandboxHandle, client.ApiClient]) -> None:
    sandbox, _ = fast
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "broken",
            "annotations": {"sandbox.reconciler.dev/fail": "ImagePullBackOff"},
        },
        "spec": {"containers": [{"name": "app", "image": "example.com/missing:1"}]},
    }
    assert http(sandbox, "POST", f"{NS}/pods", body)[0] == 201
    seen = eventually(lambda: at_least(sandbox, "broken", 6))
    assert [(e["type"], e["reason"]) for e in seen[1:]] == [
        ("Normal", "Pulling"),
        ("Warning", "Failed"),
        ("Warning", "Failed"),
        ("Normal", "BackOff"),
        ("Warning", "Failed"),
    ]
    assert seen[1]["message"] == 'Pulling image "example.com/missing:1"'
    assert seen[2]["message"].startswith('Failed to pull image "example.com/missing:1": ')
    assert [e["message"] for e in seen[3:]] == [
        "Error: ErrImagePull",
        'Back-off pulling image "example.com/missing:1"',
        "Error: ImagePullBackOff",
    ]


def test_a_job_records_its_pod_and_its_completion(
    fast: tuple[SandboxHandle, client.ApiClient],
) -> None:
    sandbox, _ = fast
    assert http(sandbox, "POST", "/apis/batch/v1/namespaces/default/jobs", job())[0] == 201

    def completed() -> list[dict[str, Any]]:
        seen = events_of(sandbox, "once", "Job")
        return seen if "Completed" in reasons(seen) else []

    seen = eventually(completed)
    assert seen[0]["reason"] == "SuccessfulCreate"
    assert seen[0]["message"].startswith("Created pod: once-")
    assert seen[0]["source"] == {"component": "job-controller"}
    assert (seen[-1]["type"], seen[-1]["message"]) == ("Normal", "Job completed")


def test_a_repeated_event_is_counted_and_old_ones_go() -> None:
    """client-go's correlator: the same event again raises ``count``; the recorder keeps a
    bounded number, as the API server's event TTL bounds a cluster's."""
    api = SandboxApi()
    recorder = EventRecorder(api, limit=2)
    namespace = api.store.get(("", "namespaces"), "", "default")
    assert namespace is not None
    for _ in range(3):
        recorder.emit(namespace, "Warning", "Odd", "again", "tester")
    (event,) = api.store.list(("", "events"))
    assert event["count"] == 3 and event["message"] == "again"
    assert event["lastTimestamp"] >= event["firstTimestamp"]
    recorder.emit(namespace, "Normal", "Second", "b", "tester")
    recorder.emit(namespace, "Normal", "Third", "c", "tester")
    assert sorted(e["reason"] for e in api.store.list(("", "events"))) == ["Second", "Third"]


def test_a_crashing_container_and_an_image_pulled_every_time() -> None:
    """The kubelet's events per container state change (``pkg/kubelet/events``)."""
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}}
    creating = {"waiting": {"reason": "ContainerCreating"}}
    crashing = {"waiting": {"reason": "CrashLoopBackOff"}}
    container = {"name": "app", "image": "app:latest", "imagePullPolicy": "Always"}
    assert container_events(pod, container, creating, crashing) == [
        ("Normal", "Pulling", 'Pulling image "app:latest"'),
        (
            "Normal",
            "Pulled",
            'Successfully pulled image "app:latest" in 10ms (10ms including waiting)',
        ),
        ("Normal", "Created", "Created container app"),
        ("Normal", "Started", "Started container app"),
        ("Warning", "BackOff", "Back-off restarting failed container app in pod p_default(u1)"),
    ]
    assert container_events(pod, container, crashing, crashing) == []  # nothing changed
    running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert container_events(pod, container, running, {"terminated": {"exitCode": 0}}) == []


def test_events_have_a_watch_window_of_their_own() -> None:
    """A flood of Events does not expire the watch history of other resources, as the API
    server's watch cache keeps a window per resource
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes)."""
    store = Store(history_limit=3)
    configmaps, events = ("", "configmaps"), ("", "events")
    first = store.put(configmaps, {"metadata": {"name": "a", "namespace": "default"}})
    rv = int(first["metadata"]["resourceVersion"])
    for i in range(10):
        store.put(events, {"metadata": {"name": f"e{i}", "namespace": "default"}})
    store.put(configmaps, {"metadata": {"name": "b", "namespace": "default"}})
    assert [e.obj["metadata"]["name"] for e in store.events_since(rv, configmaps, None)] == ["b"]
    with pytest.raises(ApiError) as gone:
        store.events_since(rv, events, None)
    assert gone.value.code == 410
    assert len(store.events_since(rv + 7, events, None)) == 3
