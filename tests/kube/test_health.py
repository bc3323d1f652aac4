"""Health of live object dicts, rule by rule as sigs.k8s.io/cli-utils kstatus computes it.

Each expected message is kstatus's own (``pkg/kstatus/status/core.go`` and
``generic.go``), except where ``reconciler/kube/kstatus.py`` says it is stricter.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.kube.health import Health, evaluate

CURRENT, IN_PROGRESS, FAILED = Health.CURRENT, Health.IN_PROGRESS, Health.FAILED


def live(
    api_version: str,
    kind: str,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    *,
    gen: int | None = 2,
    observed: int | None = 2,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "x", "namespace": "ns", **meta}
    if gen is not None:
        metadata["generation"] = gen
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        body["spec"] = spec
    body["status"] = dict(status or {})
    if observed is not None:
        body["status"]["observedGeneration"] = observed
    return body


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


# -- generic properties, before any kind's rule ---------------------------------------


def test_an_object_being_deleted_is_in_progress_whatever_its_status() -> None:
    obj = live("v1", "ConfigMap", deletionTimestamp="2026-01-01T00:00:00Z")
    assert evaluate(obj) == (IN_PROGRESS, "Resource scheduled for deletion")


def test_an_observed_generation_behind_is_in_progress_for_any_kind() -> None:
    obj = live("example.com/v1", "Widget", {}, {"conditions": [cond("Ready", "True")]})
    obj["status"]["observedGeneration"] = 1
    assert evaluate(obj) == (
        IN_PROGRESS,
        "Widget generation is 2, but latest observed generation is 1",
    )


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "ReplicaSet"),
        ("v1", "ReplicationController"),
        ("policy/v1", "PodDisruptionBudget"),
    ],
)
def test_a_controller_kind_without_observed_generation_waits_for_its_controller(
    api_version: str, kind: str
) -> None:
    obj = live(api_version, kind, {"replicas": 0}, {}, observed=None)
    assert evaluate(obj) == (IN_PROGRESS, f"{kind} status.observedGeneration not found")


def test_a_custom_resource_without_observed_generation_is_judged_by_its_conditions() -> None:
    assert evaluate(live("example.com/v1", "Widget", {}, {}, observed=None)) == (
        CURRENT,
        "Resource is current",
    )


def test_reconciling_and_stalled_win_over_the_kind_rule() -> None:
    ready = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    stalled = live(
        "apps/v1",
        "Deployment",
        {},
        {**ready, "conditions": [cond("Stalled", "True", "X", "stuck")]},
    )
    assert evaluate(stalled) == (FAILED, "stuck")
    busy = live(
        "example.com/v1", "Widget", {}, {"conditions": [cond("Reconciling", "True", "Work")]}
    )
    assert evaluate(busy) == (IN_PROGRESS, "Work")


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([cond("Ready", "True")], (CURRENT, "Resource is Ready")),
        ([cond("Ready", "False", "Waiting", "waiting for db")], (IN_PROGRESS, "waiting for db")),
        ([cond("Ready", "Unknown", "Checking")], (IN_PROGRESS, "Checking")),
        ([cond("Stalled", "True", "Bad", "bad spec")], (FAILED, "bad spec")),
        (
            [cond("Stalled", "False"), cond("Reconciling", "False")],
            (CURRENT, "Resource is current"),
        ),
        ([], (CURRENT, "Resource is current")),
    ],
)
def test_other_kinds_follow_the_standard_conditions(
    conditions: list[dict[str, str]], expected: tuple[Health, str]
) -> None:
    obj = live("example.com/v1", "Widget", {}, {"conditions": conditions})
    assert evaluate(obj) == expected


def test_a_custom_kind_named_like_a_builtin_is_not_judged_by_the_builtin_rule() -> None:
    """kstatus keys its rules by group and kind: example.com's Service is no v1 Service."""
    obj = live("example.com/v1", "Service", {"type": "LoadBalancer"}, {})
    assert evaluate(obj) == (CURRENT, "Resource is current")


def test_garbage_status_does_not_crash() -> None:
    obj = {"kind": "Widget", "metadata": {}, "status": {"conditions": ["junk", 3]}}
    assert evaluate(obj)[0] is CURRENT
    junk = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": [], "status": "no"}
    assert evaluate(junk)[0] is IN_PROGRESS


# -- always ready -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "kind"), [("v1", "ConfigMap"), ("v1", "Secret"), ("batch/v1", "CronJob")]
)
def test_kinds_that_are_always_ready(api_version: str, kind: str) -> None:
    obj = live(api_version, kind, gen=None, observed=None)
    assert evaluate(obj) == (CURRENT, "Resource is always ready")


# -- Deployment -------------------------------------------------------------------------

AVAILABLE = [
    cond("Available", "True", "MinimumReplicasAvailable"),
    cond("Progressing", "True", "NewReplicaSetAvailable"),
]
DEPLOYED = {
    "replicas": 3,
    "updatedReplicas": 3,
    "readyReplicas": 3,
    "availableReplicas": 3,
    "conditions": AVAILABLE,
}


def deployment(**status: Any) -> dict[str, Any]:
    spec = {"replicas": 3, "progressDeadlineSeconds": 600}
    return live("apps/v1", "Deployment", spec, {**DEPLOYED, **status})


def test_an_available_deployment_is_current() -> None:
    assert evaluate(deployment()) == (CURRENT, "Deployment is available. Replicas: 3")


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({"replicas": 2}, "Replicas: 2/3"),
        ({"updatedReplicas": 1}, "Updated: 1/3"),
        ({"replicas": 4}, "Pending termination: 1"),
        ({"availableReplicas": 2}, "Available: 2/3"),
        ({"readyReplicas": 2}, "Ready: 2/3"),
        ({"conditions": [AVAILABLE[0]]}, "ReplicaSet not Available"),
        (
            {"conditions": [cond("Progressing", "True", "ReplicaSetUpdated"), AVAILABLE[0]]},
            "ReplicaSet not Available",
        ),
        ({"conditions": [AVAILABLE[1]]}, "Deployment not Available"),
    ],
)
def test_a_deployment_on_its_way(status: dict[str, Any], message: str) -> None:
    assert evaluate(deployment(**status)) == (IN_PROGRESS, message)


def test_a_deployment_past_its_progress_deadline_failed() -> None:
    stuck = cond("Progressing", "False", "ProgressDeadlineExceeded", "took too long")
    obj = deployment(availableReplicas=0, conditions=[stuck])
    assert evaluate(obj) == (FAILED, "Progress deadline exceeded")


def test_a_deployment_without_progress_deadline_needs_no_progressing_condition() -> None:
    obj = live("apps/v1", "Deployment", {"replicas": 3}, {**DEPLOYED, "conditions": [AVAILABLE[0]]})
    assert evaluate(obj)[0] is CURRENT


def test_an_old_extensions_deployment_gets_the_same_rule() -> None:
    obj = deployment(replicas=2)
    obj["apiVersion"] = "extensions/v1beta1"
    assert evaluate(obj) == (IN_PROGRESS, "Replicas: 2/3")


# -- ReplicaSet and ReplicationController ------------------------------------------------

RS_READY = {"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}


@pytest.mark.parametrize(
    ("api_version", "kind"), [("apps/v1", "ReplicaSet"), ("v1", "ReplicationController")]
)
@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, (CURRENT, "ReplicaSet is available. Replicas: 2")),
        ({"fullyLabeledReplicas": 1}, (IN_PROGRESS, "Labelled: 1/2")),
        ({"availableReplicas": 1}, (IN_PROGRESS, "Available: 1/2")),
        ({"readyReplicas": 1}, (IN_PROGRESS, "Ready: 1/2")),
        ({"replicas": 3}, (IN_PROGRESS, "Pending termination: 1")),
        (
            {"conditions": [cond("ReplicaFailure", "True", "FailedCreate")]},
            (IN_PROGRESS, "Replica Failure condition. Check Pods"),
        ),
    ],
)
def test_replica_sets(
    api_version: str, kind: str, status: dict[str, Any], expected: tuple[Health, str]
) -> None:
    assert evaluate(live(api_version, kind, {"replicas": 2}, {**RS_READY, **status})) == expected


# -- StatefulSet ------------------------------------------------------------------------

STS_READY = {
    "replicas": 2,
    "readyReplicas": 2,
    "currentReplicas": 2,
    "updatedReplicas": 2,
    "currentRevision": "a",
    "updateRevision": "a",
}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, (CURRENT, "All replicas scheduled as expected. Replicas: 2")),
        ({"replicas": 1}, (IN_PROGRESS, "Replicas: 1/2")),
        ({"readyReplicas": 1}, (IN_PROGRESS, "Ready: 1/2")),
        ({"replicas": 3}, (IN_PROGRESS, "Pending termination: 1")),
        ({"currentReplicas": 1}, (IN_PROGRESS, "current: 1/2")),
        ({"updateRevision": "b"}, (IN_PROGRESS, "Waiting for updated revision to match current")),
    ],
)
def test_statefulsets(status: dict[str, Any], expected: tuple[Health, str]) -> None:
    obj = live("apps/v1", "StatefulSet", {"replicas": 2}, {**STS_READY, **status})
    assert evaluate(obj) == expected


def test_a_statefulset_with_a_partition_counts_the_pods_above_it() -> None:
    """https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#partitions"""
    spec = {
        "replicas": 3,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
    }
    base = {**STS_READY, "replicas": 3, "readyReplicas": 3, "updateRevision": "b"}
    assert evaluate(live("apps/v1", "StatefulSet", spec, {**base, "updatedReplicas": 1})) == (
        IN_PROGRESS,
        "updated: 1/2",
    )
    assert evaluate(live("apps/v1", "StatefulSet", spec, {**base, "updatedReplicas": 2})) == (
        CURRENT,
        "Partition rollout complete. updated: 2",
    )


def test_an_on_delete_statefulset_is_current_once_observed() -> None:
    obj = live(
        "apps/v1", "StatefulSet", {"replicas": 2, "updateStrategy": {"type": "OnDelete"}}, {}
    )
    assert evaluate(obj) == (CURRENT, "StatefulSet is using the ondelete update strategy")


# -- DaemonSet --------------------------------------------------------------------------

DS_READY = {
    "desiredNumberScheduled": 2,
    "currentNumberScheduled": 2,
    "updatedNumberScheduled": 2,
    "numberAvailable": 2,
    "numberReady": 2,
}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, (CURRENT, "All replicas scheduled as expected. Replicas: 2")),
        ({"currentNumberScheduled": 1}, (IN_PROGRESS, "Current: 1/2")),
        ({"updatedNumberScheduled": 1}, (IN_PROGRESS, "Updated: 1/2")),
        ({"numberAvailable": 1}, (IN_PROGRESS, "Available: 1/2")),
        ({"numberReady": 1}, (IN_PROGRESS, "Ready: 1/2")),
    ],
)
def test_daemonsets(status: dict[str, Any], expected: tuple[Health, str]) -> None:
    assert evaluate(live("apps/v1", "DaemonSet", {}, {**DS_READY, **status})) == expected


def test_a_daemonset_without_desired_number_is_in_progress() -> None:
    obj = live("apps/v1", "DaemonSet", {}, {})
    assert evaluate(obj) == (IN_PROGRESS, "Missing .status.desiredNumberScheduled")


# -- Job --------------------------------------------------------------------------------


def job(spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    return live("batch/v1", "Job", spec or {"completions": 2}, status, gen=1, observed=None)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (job(), (IN_PROGRESS, "Job not started")),
        (
            job(startTime="2026-01-01T00:00:00Z", active=1, succeeded=1),
            (CURRENT, "Job in progress. success:1, active: 1, failed: 0"),
        ),
        (
            job(succeeded=2, conditions=[cond("Complete", "True")]),
            (CURRENT, "Job Completed. succeeded: 2/2"),
        ),
        (
            job(failed=3, conditions=[cond("Failed", "True", "BackoffLimitExceeded")]),
            (FAILED, "Job Failed. failed: 3/2"),
        ),
        (
            job({"suspend": True}, conditions=[cond("Suspended", "True")]),
            (CURRENT, "Job is suspended"),
        ),
        (
            job({"parallelism": 3}, succeeded=3, conditions=[cond("Complete", "True")]),
            (CURRENT, "Job Completed. succeeded: 3/3"),
        ),
    ],
)
def test_jobs(obj: dict[str, Any], expected: tuple[Health, str]) -> None:
    """A Job has no observedGeneration: its generation alone never holds it back."""
    assert evaluate(obj) == expected


def test_a_suspended_condition_without_suspend_in_the_spec_is_not_enough() -> None:
    obj = job({}, conditions=[cond("Suspended", "True")])
    assert evaluate(obj) == (IN_PROGRESS, "Job not started")


# -- Pod --------------------------------------------------------------------------------

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pod(
    phase: str | None, *conditions: dict[str, str], age: float = 60, **status: Any
) -> dict[str, Any]:
    created = (NOW - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body: dict[str, Any] = {"conditions": list(conditions), **status}
    if phase is not None:
        body["phase"] = phase
    return live("v1", "Pod", {}, body, gen=1, observed=None, creationTimestamp=created)


CRASHING = [
    {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
    {"name": "side", "state": {"running": {}}},
]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod("Succeeded"), (CURRENT, "Pod has completed successfully")),
        (pod("Failed"), (CURRENT, "Pod has completed, but not successfully")),
        (pod("Running", cond("Ready", "True")), (CURRENT, "Pod is Ready")),
        (pod("Running", cond("Ready", "False")), (IN_PROGRESS, "Pod is running but is not Ready")),
        (
            pod("Running", cond("Ready", "False"), containerStatuses=CRASHING),
            (FAILED, "Containers in CrashLoop state: app"),
        ),
        (pod("Pending"), (IN_PROGRESS, "Pod is in the Pending phase")),
        (
            pod("Pending", cond("PodScheduled", "False", "Unschedulable"), age=5),
            (IN_PROGRESS, "Pod has not been scheduled"),
        ),
        (
            pod("Pending", cond("PodScheduled", "False", "Unschedulable"), age=16),
            (FAILED, "Pod could not be scheduled"),
        ),
        (pod(None), (IN_PROGRESS, "Pod phase not available")),
        (pod("Unknown"), (IN_PROGRESS, "unknown phase Unknown")),
    ],
)
def test_pods(obj: dict[str, Any], expected: tuple[Health, str]) -> None:
    assert evaluate(obj, now=NOW) == expected


# -- PersistentVolumeClaim, Service, PodDisruptionBudget, CRD ----------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"phase": "Bound"}, (CURRENT, "PVC is Bound")),
        ({"phase": "Pending"}, (IN_PROGRESS, "PVC is not Bound. phase: Pending")),
        ({"phase": "Lost"}, (IN_PROGRESS, "PVC is not Bound. phase: Lost")),
        ({}, (IN_PROGRESS, "PVC is not Bound. phase: unknown")),
    ],
)
def test_persistent_volume_claims(status: dict[str, Any], expected: tuple[Health, str]) -> None:
    obj = live("v1", "PersistentVolumeClaim", {}, status, gen=None, observed=None)
    assert evaluate(obj) == expected


INGRESS = {"loadBalancer": {"ingress": [{"ip": "172.18.255.200"}]}}


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        ({"type": "ClusterIP", "clusterIP": "10.0.0.1"}, {}, (CURRENT, "Service is ready")),
        (
            {"type": "ExternalName", "externalName": "db.example.com"},
            {},
            (CURRENT, "Service is ready"),
        ),
        (
            {"type": "LoadBalancer"},
            {},
            (IN_PROGRESS, "ClusterIP not set. Service type: LoadBalancer"),
        ),
        (
            {"type": "LoadBalancer", "clusterIP": "10.0.0.1"},
            {"loadBalancer": {}},
            (IN_PROGRESS, "Service does not have load balancer ingress IP address"),
        ),
        ({"type": "LoadBalancer", "clusterIP": "10.0.0.1"}, INGRESS, (CURRENT, "Service is ready")),
    ],
)
def test_services(
    spec: dict[str, Any], status: dict[str, Any], expected: tuple[Health, str]
) -> None:
    assert evaluate(live("v1", "Service", spec, status, gen=None, observed=None)) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            {"currentHealthy": 2, "desiredHealthy": 2},
            (CURRENT, "AllowedDisruptions has been computed."),
        ),
        (
            {"currentHealthy": 3, "desiredHealthy": 2},
            (CURRENT, "AllowedDisruptions has been computed."),
        ),
        ({"currentHealthy": 1, "desiredHealthy": 2}, (IN_PROGRESS, "Healthy: 1/2")),
    ],
)
def test_pod_disruption_budgets(status: dict[str, Any], expected: tuple[Health, str]) -> None:
    assert (
        evaluate(live("policy/v1", "PodDisruptionBudget", {"maxUnavailable": 1}, status))
        == expected
    )


CRD = "apiextensions.k8s.io/v1"


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], (IN_PROGRESS, "Install in progress")),
        (
            [
                cond("NamesAccepted", "True", "NoConflicts"),
                cond("Established", "False", "Installing"),
            ],
            (IN_PROGRESS, "Install in progress"),
        ),
        (
            [
                cond("NamesAccepted", "True", "NoConflicts"),
                cond("Established", "True", "InitialNamesAccepted"),
            ],
            (CURRENT, "CRD is established"),
        ),
        (
            [cond("NamesAccepted", "False", "NameConflict", '"widgets" is already in use')],
            (FAILED, '"widgets" is already in use'),
        ),
        (
            [cond("Established", "False", "NotAccepted", "not all names are accepted")],
            (FAILED, "not all names are accepted"),
        ),
    ],
)
def test_custom_resource_definitions(
    conditions: list[dict[str, str]], expected: tuple[Health, str]
) -> None:
    obj = live(
        CRD, "CustomResourceDefinition", {}, {"conditions": conditions}, gen=1, observed=None
    )
    assert evaluate(obj) == expected
