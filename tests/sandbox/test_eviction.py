"""The ``pods/eviction`` subresource and the PodDisruptionBudget controller.

https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/ (POST a policy/v1
Eviction; 201, or 429 TooManyRequests with a DisruptionBudget cause while the budget
allows no disruption; 500 with two budgets) and
https://kubernetes.io/docs/concepts/workloads/pods/disruptions/ (``minAvailable``/
``maxUnavailable``, the status the disruption controller keeps, the
``DisruptionTarget`` condition, ``unhealthyPodEvictionPolicy``). An evicted pod is
deleted gracefully (https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/).
"""

from __future__ import annotations

import re
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, eventually, http
from tests.sandbox.test_pod_termination import gone, pod, running
from tests.sandbox.workloads import LINGER

NS = "/api/v1/namespaces/default"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


class Cluster:
    def __init__(self, sandbox: SandboxHandle, api: client.ApiClient) -> None:
        self.sandbox = sandbox
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.policy = client.PolicyV1Api(api)

    def budget(self, name: str, selector: dict[str, Any] | None, **spec: Any) -> None:
        body: dict[str, Any] = {"metadata": {"name": name}, "spec": spec}
        if selector is not None:
            body["spec"]["selector"] = {"matchLabels": selector}
        self.policy.create_namespaced_pod_disruption_budget("default", body)

    def status(self, name: str) -> dict[str, Any]:
        code, body = http(self.sandbox, "GET", f"{PDBS}/{name}")
        assert code == 200
        return dict(body.get("status") or {})

    def settled(self, name: str, **wanted: Any) -> dict[str, Any]:
        """The budget's status once the controller observed it with ``wanted`` values."""

        def check() -> dict[str, Any] | None:
            status = self.status(name)
            if status.get("observedGeneration") != 1:
                return None
            return status if all(status.get(k) == v for k, v in wanted.items()) else None

        return eventually(check)

    def evict(self, name: str, body: Any = None, query: str = "") -> tuple[int, Any]:
        eviction = body or {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"},
        }
        return http(self.sandbox, "POST", f"{NS}/pods/{name}/eviction{query}", eviction)

    def web(self, replicas: int = 3) -> list[str]:
        """A Deployment whose pods linger when deleted; the names of its Ready pods."""
        body = deployment("web", replicas=replicas)
        body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = LINGER
        self.apps.create_namespaced_deployment("default", body)

        def ready() -> list[str] | None:
            pods = self.core.list_namespaced_pod("default", label_selector="app=web").items
            names = [
                p.metadata.name
                for p in pods
                if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            ]
            return sorted(names) if len(names) == replicas else None

        return eventually(ready)


@pytest.fixture
def cluster(graceful_api: tuple[SandboxHandle, client.ApiClient]) -> Cluster:
    return Cluster(*graceful_api)


def test_a_budget_lets_one_pod_go_then_refuses(cluster: Cluster) -> None:
    names = cluster.web(3)
    cluster.budget("web", {"app": "web"}, minAvailable=2)
    status = cluster.settled("web", currentHealthy=3)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        3,
        2,
        1,
    )
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    code, answer = cluster.evict(names[0])
    assert code == 201
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    evicted = cluster.core.read_namespaced_pod(names[0], "default")
    assert evicted.metadata.deletion_grace_period_seconds == LINGER  # deleted gracefully
    target = {c.type: c for c in evicted.status.conditions}["DisruptionTarget"]
    assert (target.status, target.reason) == ("True", "EvictionByEvictionAPI")
    # the eviction took the one disruption before the pod went: the next one is refused
    code, refused = cluster.evict(names[1])
    assert code == 429 and refused["reason"] == "TooManyRequests"
    assert refused["message"] == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    (cause,) = refused["details"]["causes"]
    assert cause["type"] == "DisruptionBudget"
    assert re.fullmatch(
        r"The disruption budget web needs 2 healthy pods and has \d currently", cause["message"]
    )
    assert cluster.core.read_namespaced_pod(names[1], "default").metadata.deletion_timestamp is None
    # the terminating pod is not healthy; its replacement is, once Ready: one may go again
    allowed = cluster.settled("web", currentHealthy=3, disruptionsAllowed=1)
    assert names[0] not in allowed.get("disruptedPods", {})  # it is being deleted now
    assert eventually(lambda: cluster.evict(names[1])[0] == 201)


def test_the_official_client_evicts(cluster: Cluster) -> None:
    cluster.core.create_namespaced_pod("default", pod("single", grace=1))
    uid = running(cluster.core, "single").metadata.uid
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="single", namespace="default"))
    cluster.core.create_namespaced_pod_eviction("single", "default", eviction)
    eventually(lambda: gone(cluster.core, "single", uid))  # no budget: deleted


def test_max_unavailable_counts_the_deployments_scale(cluster: Cluster) -> None:
    names = cluster.web(3)
    cluster.budget("web", {"app": "web"}, maxUnavailable=1)
    status = cluster.settled("web", currentHealthy=3)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        3,
        2,
        1,
    )
    cluster.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
    cluster.settled("web", expectedPods=4, desiredHealthy=3, currentHealthy=4)
    assert cluster.evict(names[0])[0] == 201


def test_a_percentage_rounds_up(cluster: Cluster) -> None:
    cluster.web(3)
    cluster.budget("web", {"app": "web"}, minAvailable="50%")
    status = cluster.settled("web", currentHealthy=3)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        3,
        2,
        1,
    )


def test_eviction_options_reach_the_delete(cluster: Cluster) -> None:
    names = cluster.web(2)
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": names[0]},
        "deleteOptions": {"gracePeriodSeconds": 0},
    }
    assert cluster.evict(names[0], body)[0] == 201
    with pytest.raises(ApiException) as e:
        cluster.core.read_namespaced_pod(names[0], "default")
    assert e.value.status == 404


def test_a_dry_run_evicts_nothing(cluster: Cluster) -> None:
    names = cluster.web(3)
    cluster.budget("web", {"app": "web"}, minAvailable=2)
    cluster.settled("web", currentHealthy=3)
    assert cluster.evict(names[0], query="?dryRun=All")[0] == 201
    assert cluster.core.read_namespaced_pod(names[0], "default").metadata.deletion_timestamp is None
    assert cluster.status("web")["disruptionsAllowed"] == 1


def test_a_budget_not_yet_observed_refuses_with_retry_after(cluster: Cluster) -> None:
    """A bare pod has no controller whose scale ``maxUnavailable`` could count: the
    controller fails safe (``SyncFailed``) and never observes the budget."""
    cluster.core.create_namespaced_pod("default", pod("bare", grace=1))
    cluster.core.patch_namespaced_pod("bare", "default", {"metadata": {"labels": {"app": "bare"}}})
    running(cluster.core, "bare")
    cluster.budget("bare", {"app": "bare"}, maxUnavailable=1)

    def failed() -> dict[str, Any] | None:
        conditions = cluster.status("bare").get("conditions") or []
        return next((c for c in conditions if c["reason"] == "SyncFailed"), None)

    condition = eventually(failed)
    assert condition["message"] == 'found no controllers for pod "bare"'
    request = urllib.request.Request(
        cluster.sandbox.url + f"{NS}/pods/bare/eviction",
        data=b'{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"bare"}}',
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=10)
    assert e.value.code == 429 and e.value.headers["Retry-After"] == "10"
    assert "still being processed" in e.value.read().decode()


def test_two_budgets_for_one_pod_are_an_error(cluster: Cluster) -> None:
    names = cluster.web(2)
    cluster.budget("one", {"app": "web"}, minAvailable=1)
    cluster.budget("two", {}, minAvailable=1)  # an empty selector selects every pod
    code, answer = cluster.evict(names[0])
    assert code == 500 and "more than one PodDisruptionBudget" in answer["message"]


def test_pods_that_disrupt_nothing_ignore_the_budget(cluster: Cluster) -> None:
    """Pending and unready pods: ``canIgnorePDB`` and ``IfHealthyBudget``."""
    pull = pod("pulling", grace=1)
    pull["metadata"]["annotations"] = {"sandbox.reconciler.dev/fail": "ImagePullBackOff"}
    crash = pod("crashing", grace=1)
    crash["metadata"]["annotations"] = {"sandbox.reconciler.dev/fail": "CrashLoopBackOff"}
    for body in (pod("healthy", grace=1), pull, crash):
        body["metadata"]["labels"] = {"app": "mixed"}
        cluster.core.create_namespaced_pod("default", body)
    running(cluster.core, "healthy")
    eventually(
        lambda: cluster.core.read_namespaced_pod("crashing", "default").status.phase == "Running"
    )
    cluster.budget("mixed", {"app": "mixed"}, minAvailable=1)
    status = cluster.settled("mixed", expectedPods=3, currentHealthy=1)
    assert status["disruptionsAllowed"] == 0
    assert cluster.evict("healthy")[0] == 429
    assert cluster.evict("pulling")[0] == 201  # Pending
    assert cluster.evict("crashing")[0] == 201  # unready, and the budget is met anyway


def test_always_allow_lets_unready_pods_go(cluster: Cluster) -> None:
    crash = pod("crashing", grace=1)
    crash["metadata"]["annotations"] = {"sandbox.reconciler.dev/fail": "CrashLoopBackOff"}
    crash["metadata"]["labels"] = {"app": "crash"}
    cluster.core.create_namespaced_pod("default", crash)
    eventually(
        lambda: cluster.core.read_namespaced_pod("crashing", "default").status.phase == "Running"
    )
    cluster.budget("crash", {"app": "crash"}, minAvailable=1)
    cluster.settled("crash", expectedPods=1, currentHealthy=0)
    assert cluster.evict("crashing")[0] == 429  # IfHealthyBudget: the budget is not met
    http(
        cluster.sandbox,
        "PATCH",
        f"{PDBS}/crash",
        {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}},
        "application/merge-patch+json",
    )
    assert cluster.evict("crashing")[0] == 201


@pytest.mark.parametrize(
    ("method", "body", "code", "message"),
    [
        ("POST", {"kind": "Eviction", "metadata": {"name": "other"}}, 400, "does not match"),
        ("POST", {"apiVersion": "v1", "kind": "Pod"}, 400, "policy/v1 Eviction"),
        ("POST", [1], 400, "JSON object"),
        ("GET", None, 405, ""),
    ],
)
def test_bad_evictions(cluster: Cluster, method: str, body: Any, code: int, message: str) -> None:
    cluster.core.create_namespaced_pod("default", pod("web"))
    status, answer = http(cluster.sandbox, method, f"{NS}/pods/web/eviction", body)
    assert status == code and message in answer["message"]
    assert cluster.core.read_namespaced_pod("web", "default").metadata.deletion_timestamp is None
    assert cluster.evict("missing")[0] == 404


def test_discovery_lists_the_eviction_subresource(cluster: Cluster) -> None:
    code, listed = http(cluster.sandbox, "GET", "/api/v1")
    assert code == 200
    (entry,) = [r for r in listed["resources"] if r["name"] == "pods/eviction"]
    assert (entry["group"], entry["version"], entry["kind"], entry["verbs"]) == (
        "policy",
        "v1",
        "Eviction",
        ["create"],
    )


def test_a_cordoned_node_gets_no_new_pods(cluster: Cluster) -> None:
    """``kubectl drain`` cordons the node (``spec.unschedulable``), then evicts its pods;
    their replacements go elsewhere, and a pod with nowhere to go stays Pending until a
    node is uncordoned (https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/)."""
    nodes = sorted(n.metadata.name for n in cluster.core.list_node().items)
    for name in nodes[:-1]:  # else the first node would be chosen (fewest pods, then name)
        cluster.core.patch_node(name, {"spec": {"unschedulable": True}})
    cluster.core.create_namespaced_pod("default", pod("first", grace=1))
    assert running(cluster.core, "first").spec.node_name == nodes[-1]
    cluster.core.patch_node(nodes[-1], {"spec": {"unschedulable": True}})
    cluster.core.create_namespaced_pod("default", pod("waiting", grace=1))  # nowhere to go
    cluster.core.patch_node(nodes[1], {"spec": {"unschedulable": False}})
    assert running(cluster.core, "waiting").spec.node_name == nodes[1]
