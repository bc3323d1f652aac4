"""The scheduler's binding: ``spec.nodeName`` and ``PodScheduled`` in one write.

https://kubernetes.io/docs/concepts/scheduling-eviction/kube-scheduler/ (the scheduler
binds a pod to a node: the API server's ``pods/binding`` subresource, whose storage
sets the node and the PodScheduled condition in one update, past the field manager;
kubernetes/kubernetes#127508 shows no manager owning PodScheduled on a real pod).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, watch

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.kinds import PODS
from tests.sandbox.test_pods import make_pod


def _scheduled(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c["status"] == "True" for c in conditions)


def test_a_pod_is_bound_in_one_write_that_no_manager_owns(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    since = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", make_pod("bound", "nginx:1.27"))
    seen: list[tuple[str, dict[str, Any]]] = []
    for event in watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        resource_version=since,
        field_selector="metadata.name=bound",
        timeout_seconds=60,
        _preload_content=False,
    ):
        seen.append((event["type"], event["raw_object"]))
        if (event["raw_object"].get("status") or {}).get("podIP"):
            break
    (added, *modified) = seen
    assert added[0] == "ADDED" and not added[1]["spec"].get("nodeName")
    assert not _scheduled(added[1])
    # the first write after the create binds it: node and condition together
    kind, bound = modified[0]
    assert kind == "MODIFIED" and bound["spec"]["nodeName"] and _scheduled(bound)
    assert bound["status"]["phase"] == "Pending"
    assert all(_scheduled(obj) == bool(obj["spec"].get("nodeName")) for _, obj in seen)
    managers = {e["manager"] for _, obj in seen for e in obj["metadata"]["managedFields"]}
    assert "default-scheduler" not in managers and "kubelet" in managers
    # the binding left the creator's entry as it was
    assert bound["metadata"]["managedFields"] == added[1]["metadata"]["managedFields"]


def test_a_bound_or_deleted_pod_cannot_be_bound_again() -> None:
    api = SandboxApi()
    kind = api.kinds.by_resource(*PODS)
    assert kind is not None
    pod = api.create(kind, "default", make_pod("p", "nginx"), WriteOptions("me"))
    bound = api.bind(kind, pod, "node-a")
    assert bound["spec"]["nodeName"] == "node-a" and _scheduled(bound)
    assert bound["metadata"]["resourceVersion"] != pod["metadata"]["resourceVersion"]
    stored = api.store.view_one(PODS, "default", "p")
    assert stored is not None and stored["spec"]["nodeName"] == "node-a"
    with pytest.raises(ApiError) as again:
        api.bind(kind, stored, "node-b")
    assert again.value.code == 409 and "already assigned" in again.value.message
    deleting = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    with pytest.raises(ApiError) as gone:
        api.bind(kind, deleting, "node-b")
    assert gone.value.code == 409 and "being deleted" in gone.value.message
    # the refused bindings wrote nothing
    after = api.store.view_one(PODS, "default", "p")
    assert (
        after is not None
        and after["metadata"]["resourceVersion"] == bound["metadata"]["resourceVersion"]
    )
