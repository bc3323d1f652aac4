"""The rollout driver's view of pods being deleted.

A pod that is deleted stays Terminating for its grace period, and once its kubelet has
killed its containers it may read ``Failed`` until a finalizer lets it go
(https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/). Such a pod is
leaving: it counts as neither updated, ready, old nor failing, so a rollout neither
fails on it nor counts it toward a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.kube.rollout_driver import KubeRolloutDriver
from reconciler.model.changeset import ObjectRef
from reconciler.rollout import Observation, Workload
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http

NAMESPACE = "team-db"
HOLD = "example.com/hold"


def statefulset() -> dict[str, Any]:
    labels = {"app": "db"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": NAMESPACE},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "db", "image": "db:2"}]},
            },
        },
    }


@pytest.fixture
def client(sandbox: SandboxHandle) -> Iterator[KubeClient]:
    with KubeClient.connect(str(sandbox.kubeconfig)) as connected:
        yield connected


def observe(driver: KubeRolloutDriver, check: Callable[[Workload], bool]) -> Workload:
    def look() -> Workload | None:
        seen: Observation = driver.observe("2", datetime.now(UTC))
        return seen.workloads[0] if check(seen.workloads[0]) else None

    return eventually(look)


def test_a_killed_pod_held_by_a_finalizer_is_not_a_failing_one(
    sandbox: SandboxHandle, client: KubeClient
) -> None:
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    client.apply(statefulset())
    driver = KubeRolloutDriver(
        client=client,
        instance="db",
        namespace=NAMESPACE,
        objects=[statefulset()],
        from_version="1",
        to_version="2",
        apply_render=lambda version: None,
    )
    assert observe(driver, lambda w: w.updated_ready == 2) == Workload(
        "StatefulSet/db", 2, 2, 2, 2, 0
    )
    pod = f"/api/v1/namespaces/{NAMESPACE}/pods/db-1"
    merge = "application/merge-patch+json"
    assert http(sandbox, "PATCH", pod, {"metadata": {"finalizers": [HOLD]}}, merge)[0] == 200
    assert http(sandbox, "DELETE", pod, {"gracePeriodSeconds": 1})[0] == 200

    def killed() -> dict[str, Any] | None:
        found = client.get(ObjectRef("v1", "Pod", NAMESPACE, "db-1")) or {}
        meta, status = found.get("metadata") or {}, found.get("status") or {}
        held = meta.get("deletionGracePeriodSeconds") == 0 and status.get("phase") == "Failed"
        return found if held else None

    eventually(killed)
    seen = driver.observe("2", datetime.now(UTC)).workloads[0]
    assert seen.failing == ()
    assert (seen.updated, seen.ready, seen.old) == (1, 1, 0)
    assert http(sandbox, "PATCH", pod, {"metadata": {"finalizers": None}}, merge)[0] == 200
    observe(driver, lambda w: w.updated_ready == 2)  # recreated once the old one went
