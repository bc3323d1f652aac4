"""Health of live object dicts: per-kind rules and generic kstatus conditions."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.kube.health import Health, evaluate


def workload(
    kind: str, spec: dict[str, Any], status: dict[str, Any], gen: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns", "generation": gen},
        "spec": spec,
        "status": {"observedGeneration": gen, **status},
    }


READY_DEPLOY = {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}


def test_ready_deployment_is_current() -> None:
    assert evaluate(workload("Deployment", {"replicas": 3}, READY_DEPLOY))[0] is Health.CURRENT


@pytest.mark.parametrize(
    "status",
    [
        {**READY_DEPLOY, "updatedReplicas": 1},
        {**READY_DEPLOY, "availableReplicas": 2},
        {**READY_DEPLOY, "replicas": 4},
    ],
)
def test_deployment_in_progress(status: dict[str, Any]) -> None:
    assert evaluate(workload("Deployment", {"replicas": 3}, status))[0] is Health.IN_PROGRESS


def test_unobserved_generation_is_in_progress() -> None:
    obj = workload("Deployment", {"replicas": 3}, READY_DEPLOY)
    obj["status"]["observedGeneration"] = 1
    health, message = evaluate(obj)
    assert health is Health.IN_PROGRESS
    assert "generation 2" in message


def test_deployment_past_deadline_failed() -> None:
    cond = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    status = {**READY_DEPLOY, "availableReplicas": 0, "conditions": [cond]}
    assert evaluate(workload("Deployment", {"replicas": 3}, status))[0] is Health.FAILED


def test_statefulset() -> None:
    spec = {"replicas": 2}
    ok = {"readyReplicas": 2, "updatedReplicas": 2, "currentRevision": "a", "updateRevision": "a"}
    assert evaluate(workload("StatefulSet", spec, ok))[0] is Health.CURRENT
    rolling = {**ok, "updateRevision": "b"}
    assert evaluate(workload("StatefulSet", spec, rolling))[0] is Health.IN_PROGRESS
    assert evaluate(workload("StatefulSet", spec, {**ok, "readyReplicas": 1}))[0] is (
        Health.IN_PROGRESS
    )


def test_daemonset() -> None:
    ok = {"desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}
    assert evaluate(workload("DaemonSet", {}, ok))[0] is Health.CURRENT
    assert evaluate(workload("DaemonSet", {}, {**ok, "numberAvailable": 1}))[0] is (
        Health.IN_PROGRESS
    )


def test_job() -> None:
    done = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    assert evaluate(workload("Job", {}, done, gen=1))[0] is Health.CURRENT
    failed = {"conditions": [{"type": "Failed", "status": "True", "message": "backoff"}]}
    assert evaluate(workload("Job", {}, failed, gen=1)) == (Health.FAILED, "backoff")
    assert evaluate(workload("Job", {}, {"active": 1}, gen=1))[0] is Health.IN_PROGRESS


def test_objects_without_status_are_current() -> None:
    assert evaluate({"kind": "ConfigMap", "metadata": {"name": "c"}})[0] is Health.CURRENT


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([{"type": "Ready", "status": "True"}], Health.CURRENT),
        ([{"type": "Ready", "status": "False", "message": "waiting"}], Health.IN_PROGRESS),
        ([{"type": "Reconciling", "status": "True"}], Health.IN_PROGRESS),
        ([{"type": "Stalled", "status": "True", "message": "bad"}], Health.FAILED),
    ],
)
def test_generic_conditions(conditions: list[dict[str, str]], expected: Health) -> None:
    obj = {"kind": "Widget", "metadata": {"name": "w"}, "status": {"conditions": conditions}}
    assert evaluate(obj)[0] is expected


def test_terminating_object_is_in_progress() -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "c", "deletionTimestamp": "now"}}
    assert evaluate(obj)[0] is Health.IN_PROGRESS


def test_garbage_status_does_not_crash() -> None:
    obj = {"kind": "Widget", "metadata": {}, "status": {"conditions": ["junk", 3]}}
    assert evaluate(obj)[0] is Health.CURRENT
