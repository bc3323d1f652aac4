"""The resource metrics API, as metrics-server serves it.

https://kubernetes.io/docs/tasks/debug/debug-cluster/resource-metrics-pipeline/:
``metrics.k8s.io/v1beta1`` serves read-only NodeMetrics and PodMetrics (CPU and memory
``usage`` over a ``window``) of running pods, to ``kubectl top``, autoscalers and the
clients' metrics helpers. The sandbox's containers use what they request.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client, utils

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http

METRICS = "/apis/metrics.k8s.io/v1beta1"


def pod(name: str, cpu: str = "250m", memory: str = "64Mi", **labels: str) -> dict[str, Any]:
    container = {
        "name": "app",
        "image": "nginx:1.25",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    return {"metadata": {"name": name, "labels": labels}, "spec": {"containers": [container]}}


def running(core: client.CoreV1Api, name: str) -> client.V1Pod:
    return eventually(
        lambda: (p := core.read_namespaced_pod(name, "default")).status.phase == "Running" and p
    )


def test_a_running_pod_has_metrics_of_what_its_containers_request(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod("web", app="web"))
    running(core, "web")
    listed = utils.get_pods_metrics(api_client, "default")
    (item,) = [i for i in listed["items"] if i["metadata"]["name"] == "web"]
    assert listed["kind"] == "PodMetricsList" and item["kind"] == "PodMetrics"
    assert item["window"] and item["timestamp"]
    assert item["containers"] == [
        {"name": "app", "usage": {"cpu": "250000000n", "memory": "65536Ki"}}
    ]


def test_pod_metrics_follow_a_label_selector_and_a_name(
    sandbox: SandboxHandle, core: client.CoreV1Api, api_client: client.ApiClient
) -> None:
    core.create_namespaced_pod("default", pod("a", app="a"))
    core.create_namespaced_pod("default", pod("b", app="b"))
    running(core, "a")
    running(core, "b")
    selected = utils.get_pods_metrics(api_client, "default", "app=a")
    assert [i["metadata"]["name"] for i in selected["items"]] == ["a"]
    status, one = http(sandbox, "GET", f"{METRICS}/namespaces/default/pods/b")
    assert status == 200 and one["metadata"]["name"] == "b"
    status, missing = http(sandbox, "GET", f"{METRICS}/namespaces/default/pods/nope")
    assert status == 404 and missing["reason"] == "NotFound"


def test_a_node_uses_what_its_running_pods_use(
    core: client.CoreV1Api, api_client: client.ApiClient
) -> None:
    core.create_namespaced_pod("default", pod("big", cpu="2", memory="1Gi"))
    node = running(core, "big").spec.node_name
    nodes = utils.get_nodes_metrics(api_client)
    assert {i["metadata"]["name"] for i in nodes["items"]} == {
        n.metadata.name for n in core.list_node().items
    }
    (mine,) = [i for i in nodes["items"] if i["metadata"]["name"] == node]
    cpu = int(mine["usage"]["cpu"].removesuffix("n"))
    memory = int(mine["usage"]["memory"].removesuffix("Ki"))
    assert cpu >= 2_000_000_000 and memory >= 1024 * 1024  # and the node's other pods


def test_metrics_are_read_only_and_discovered(sandbox: SandboxHandle) -> None:
    status, body = http(sandbox, "POST", f"{METRICS}/namespaces/default/pods", {})
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    groups = http(sandbox, "GET", "/apis")[1]["groups"]
    assert "metrics.k8s.io" in [g["name"] for g in groups]
    resources = http(sandbox, "GET", METRICS)[1]["resources"]
    assert {(r["name"], r["kind"], tuple(r["verbs"])) for r in resources} == {
        ("nodes", "NodeMetrics", ("get", "list")),
        ("pods", "PodMetrics", ("get", "list")),
    }
    assert (
        http(sandbox, "GET", "/apis/metrics.k8s.io")[1]["preferredVersion"]["version"] == "v1beta1"
    )
