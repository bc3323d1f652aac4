"""Pure status computations for the simulated controllers in ``controllers.py``.

Each function returns the ``status`` the real controller reports once its pods
settle, with zero counts omitted as the API server's ``omitempty`` does. Condition
timestamps are carried over from the previous status when nothing changed, so a
settled workload computes the same status again and is not rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.apply import now


def _counts(**counts: int) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _condition(
    old: Mapping[str, Any],
    type_: str,
    status: str,
    reason: str,
    message: str,
    touched: str = "lastUpdateTime",
) -> dict[str, Any]:
    """A condition as its controller writes it; ``touched`` is the type's second
    timestamp (DeploymentCondition.lastUpdateTime, JobCondition.lastProbeTime)."""
    previous: Mapping[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == type_),
        {},
    )
    same = previous.get("status") == status and previous.get("reason") == reason
    stamp = previous.get("lastTransitionTime", now()) if same else now()
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
        touched: previous.get(touched, stamp) if same else stamp,
    }


def _replicas(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 1


def deployment_status(
    spec: Mapping[str, Any], generation: int, fails: bool, old: Mapping[str, Any]
) -> dict[str, Any]:
    replicas = _replicas(spec)
    ready = 0 if fails else replicas
    if fails:
        available = _condition(
            old,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
        progressing = _condition(
            old,
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            "ReplicaSet has timed out progressing.",
        )
    else:
        available = _condition(
            old,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
        progressing = _condition(
            old,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            "ReplicaSet has successfully progressed.",
        )
    return {
        "observedGeneration": generation,
        **_counts(
            replicas=replicas,
            updatedReplicas=replicas,
            readyReplicas=ready,
            availableReplicas=ready,
            unavailableReplicas=replicas - ready,
        ),
        "conditions": [available, progressing],
    }


def statefulset_status(
    obj: Mapping[str, Any],
    generation: int,
    update_revision: str,
    fails: bool,
    previous: list[tuple[str, bool]],
) -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    """Pods at ordinal >= partition move to the update revision, highest first.

    A failing update revision stops the rollout at the first pod it reaches, as
    the real controller waits for each pod to be Ready before the next.
    """
    spec = obj.get("spec") or {}
    old = obj.get("status") or {}
    replicas = _replicas(spec)
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type") == "OnDelete":
        partition = replicas
    else:
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
    current = str(old.get("currentRevision") or update_revision)
    pods: list[tuple[str, bool]] = [
        previous[i] if i < len(previous) else (current, fails and current == update_revision)
        for i in range(replicas)
    ]
    for ordinal in range(replicas - 1, partition - 1, -1):
        if pods[ordinal][0] != update_revision:
            pods[ordinal] = (update_revision, fails)
            if fails:
                break
    pods = [(rev, fails) if rev == update_revision else (rev, bad) for rev, bad in pods]
    updated = sum(1 for rev, _ in pods if rev == update_revision)
    if updated == replicas:
        current = update_revision
    ready = sum(1 for _, bad in pods if not bad)
    status = {
        "observedGeneration": generation,
        "replicas": replicas,
        **_counts(
            readyReplicas=ready,
            availableReplicas=ready,
            currentReplicas=sum(1 for rev, _ in pods if rev == current),
            updatedReplicas=updated,
        ),
        "currentRevision": current,
        "updateRevision": update_revision,
        "collisionCount": 0,
    }
    return status, pods


def daemonset_status(generation: int, fails: bool) -> dict[str, Any]:
    """One simulated node, so one pod."""
    return {
        "observedGeneration": generation,
        "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1,
        "updatedNumberScheduled": 1,
        "numberMisscheduled": 0,
        "numberReady": 0 if fails else 1,
        **_counts(numberAvailable=0 if fails else 1, numberUnavailable=1 if fails else 0),
    }


def replicaset_status(spec: Mapping[str, Any], generation: int, fails: bool) -> dict[str, Any]:
    replicas = _replicas(spec)
    ready = 0 if fails else replicas
    return {
        "observedGeneration": generation,
        "replicas": replicas,
        **_counts(fullyLabeledReplicas=replicas, readyReplicas=ready, availableReplicas=ready),
    }


def job_status(spec: Mapping[str, Any], fails: bool, old: Mapping[str, Any]) -> dict[str, Any]:
    if spec.get("suspend"):
        return dict(old)
    start = old.get("startTime") or now()
    if fails:
        return {
            "startTime": start,
            "failed": int(spec.get("backoffLimit", 6)) + 1,
            "conditions": [
                _condition(
                    old,
                    "Failed",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    "lastProbeTime",
                ),
            ],
        }
    return {
        "startTime": start,
        "completionTime": old.get("completionTime") or now(),
        "succeeded": int(spec.get("completions") or 1),
        "conditions": [
            _condition(old, "Complete", "True", "", "", "lastProbeTime"),
        ],
    }
