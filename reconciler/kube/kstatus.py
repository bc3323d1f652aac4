"""The health of one live object, computed as sigs.k8s.io/cli-utils kstatus computes it.

Flux, kpt and Config Sync judge applied objects with kstatus (``pkg/kstatus/status``):
generic properties first (an object being deleted; a ``status.observedGeneration``
behind ``metadata.generation``; a ``Reconciling`` or ``Stalled`` condition), then a
rule per built-in kind (``core.go``'s ``legacyTypes``), then a ``Ready`` condition,
and otherwise Current. :func:`evaluate` follows those rules and keeps their messages
("PVC is not Bound. phase: Pending", "CRD is established", ...), so what
``reconciler get`` prints reads like ``kubectl`` and ``flux`` output. It is pure (no
I/O): ``health.py`` polls with it, ``tree.py`` draws with it, the daemon reads the
watch cache with it.

Where this module is stricter than kstatus, the reason is that an engine asks right
after its own write, before a controller had a chance to act:

- the kinds whose controllers always write ``status.observedGeneration``
  (Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController,
  PodDisruptionBudget) are InProgress until it is there (kstatus asks this of
  DaemonSets only);
- a LoadBalancer Service waits for ``status.loadBalancer.ingress`` (as Helm's
  ``--wait`` does; kstatus only asks for a ``spec.clusterIP``): the load balancer
  is what the object asks the cloud for;
- a PodDisruptionBudget needs ``currentHealthy >= desiredHealthy`` (kstatus is
  content once the budget was computed): a budget that does not protect anything yet
  is not done;
- a ReplicationController is judged as a ReplicaSet (kstatus has no rule for it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any


class Health(StrEnum):
    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    NOT_FOUND = "NotFound"


Verdict = tuple[Health, str]


@dataclass(frozen=True, slots=True)
class Observed:
    """What a per-kind rule reads: the object's parts, and the time of the reading."""

    meta: Mapping[str, Any]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    now: datetime | None = None


Rule = Callable[[Observed], Verdict]

# How long a pod may stay unschedulable before kstatus calls it Failed (ScheduleWindow).
SCHEDULE_WINDOW = timedelta(seconds=15)
# (apiVersion, kind) whose verdict may change by the clock alone, with no write a
# watch would announce: an unschedulable Pod fails once ``SCHEDULE_WINDOW`` old. A
# health wait that sleeps until its objects change keeps reading these on a timer.
AGES = frozenset({("v1", "Pod")})
# Kinds whose controller writes status.observedGeneration on its first sync.
_OBSERVED_BY_CONTROLLER = frozenset(
    {
        "apps/Deployment",
        "apps/StatefulSet",
        "apps/DaemonSet",
        "apps/ReplicaSet",
        "ReplicationController",
        "policy/PodDisruptionBudget",
    }
)


def evaluate(obj: Mapping[str, Any], *, now: datetime | None = None) -> Verdict:
    """The health of one live object and kstatus's message for it.

    ``now`` (default: the wall clock) only matters for a Pod that cannot be
    scheduled: kstatus gives it :data:`SCHEDULE_WINDOW` before calling it Failed.
    """
    meta = _map(obj.get("metadata"))
    if meta.get("deletionTimestamp"):
        return Health.IN_PROGRESS, "Resource scheduled for deletion"
    status = _map(obj.get("status"))
    kind = str(obj.get("kind", ""))
    key = _key(str(obj.get("apiVersion", "")), kind)
    generic = _generic(kind, key, meta, status)
    if generic is not None:
        return generic
    rule = _RULES.get(key)
    if rule is not None:
        return rule(Observed(meta, _map(obj.get("spec")), status, now))
    ready = _condition(status, "Ready")
    if ready is not None and ready.get("status") == "True":
        return Health.CURRENT, "Resource is Ready"
    if ready is not None and ready.get("status") in ("False", "Unknown"):
        return Health.IN_PROGRESS, _said(ready, "Ready condition is " + str(ready["status"]))
    return Health.CURRENT, "Resource is current"


def _key(api_version: str, kind: str) -> str:
    """kstatus's ``group/Kind`` key (bare ``Kind`` for the core group)."""
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    if group == "extensions":  # Deployments, DaemonSets and ReplicaSets of old
        group = "apps"
    return f"{group}/{kind}" if group else kind


def _generic(
    kind: str, key: str, meta: Mapping[str, Any], status: Mapping[str, Any]
) -> Verdict | None:
    generation = _int(meta.get("generation"))
    observed = _int(status.get("observedGeneration"))
    if generation is not None and key in _OBSERVED_BY_CONTROLLER and observed is None:
        return Health.IN_PROGRESS, f"{kind} status.observedGeneration not found"
    if generation is not None and observed is not None and observed != generation:
        return (
            Health.IN_PROGRESS,
            f"{kind} generation is {generation}, but latest observed generation is {observed}",
        )
    for cond in _conditions(status):
        if cond.get("type") == "Reconciling" and cond.get("status") == "True":
            return Health.IN_PROGRESS, _said(cond, "Reconciling")
        if cond.get("type") == "Stalled" and cond.get("status") == "True":
            return Health.FAILED, _said(cond, "Stalled")
    return None


def _always_ready(obj: Observed) -> Verdict:
    return Health.CURRENT, "Resource is always ready"


def _deployment(obj: Observed) -> Verdict:
    spec, status = obj.spec, obj.status
    # Without progressDeadlineSeconds the controller never says Progressing (the API
    # server defaults it to 600, so on a real cluster the condition is there).
    progressing = _int(spec.get("progressDeadlineSeconds")) is None
    available = False
    for cond in _conditions(status):
        if cond.get("type") == "Progressing":
            if cond.get("reason") == "ProgressDeadlineExceeded":
                return Health.FAILED, "Progress deadline exceeded"
            if cond.get("status") == "True" and cond.get("reason") == "NewReplicaSetAvailable":
                progressing = True
        elif cond.get("type") == "Available" and cond.get("status") == "True":
            available = True
    want, have = _count(spec, "replicas", 1), _count(status, "replicas")
    updated = _count(status, "updatedReplicas")
    ready, avail = _count(status, "readyReplicas"), _count(status, "availableReplicas")
    short = _short(
        ("Replicas", have, want),
        ("Updated", updated, want),
        ("Pending termination", want, have),
        ("Available", avail, updated),
        ("Ready", ready, want),
    )
    if short is not None:
        return short
    if not progressing:
        return Health.IN_PROGRESS, "ReplicaSet not Available"
    if not available:
        return Health.IN_PROGRESS, "Deployment not Available"
    return Health.CURRENT, f"Deployment is available. Replicas: {have}"


def _replicaset(obj: Observed) -> Verdict:
    spec, status = obj.spec, obj.status
    if _condition(status, "ReplicaFailure", "True") is not None:
        return Health.IN_PROGRESS, "Replica Failure condition. Check Pods"
    want, have = _count(spec, "replicas", 1), _count(status, "replicas")
    short = _short(
        ("Labelled", _count(status, "fullyLabeledReplicas"), want),
        ("Available", _count(status, "availableReplicas"), want),
        ("Ready", _count(status, "readyReplicas"), want),
        ("Pending termination", want, have),
    )
    if short is not None:
        return short
    return Health.CURRENT, f"ReplicaSet is available. Replicas: {have}"


def _statefulset(obj: Observed) -> Verdict:
    spec, status = obj.spec, obj.status
    strategy = _map(spec.get("updateStrategy"))
    if strategy.get("type") == "OnDelete":
        return Health.CURRENT, "StatefulSet is using the ondelete update strategy"
    want, have = _count(spec, "replicas", 1), _count(status, "replicas")
    updated = _count(status, "updatedReplicas")
    short = _short(
        ("Replicas", have, want),
        ("Ready", _count(status, "readyReplicas"), want),
        ("Pending termination", want, have),
    )
    if short is not None:
        return short
    partition = _int(_map(strategy.get("rollingUpdate")).get("partition"))
    if partition is not None:
        # https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#partitions
        if updated < want - partition:
            return Health.IN_PROGRESS, f"updated: {updated}/{want - partition}"
        return Health.CURRENT, f"Partition rollout complete. updated: {updated}"
    current = _count(status, "currentReplicas")
    if current < want:
        return Health.IN_PROGRESS, f"current: {current}/{want}"
    if status.get("currentRevision", "") != status.get("updateRevision", ""):
        return Health.IN_PROGRESS, "Waiting for updated revision to match current"
    return Health.CURRENT, f"All replicas scheduled as expected. Replicas: {have}"


def _daemonset(obj: Observed) -> Verdict:
    status = obj.status
    want = _int(status.get("desiredNumberScheduled"))
    if want is None:
        return Health.IN_PROGRESS, "Missing .status.desiredNumberScheduled"
    short = _short(
        ("Current", _count(status, "currentNumberScheduled"), want),
        ("Updated", _count(status, "updatedNumberScheduled"), want),
        ("Available", _count(status, "numberAvailable"), want),
        ("Ready", _count(status, "numberReady"), want),
    )
    if short is not None:
        return short
    return Health.CURRENT, f"All replicas scheduled as expected. Replicas: {want}"


def _job(obj: Observed) -> Verdict:
    spec, status = obj.spec, obj.status
    """Current once started (a running Job is Current), Failed once it failed."""
    completions = _count(spec, "completions", _count(spec, "parallelism", 1))
    succeeded, failed = _count(status, "succeeded"), _count(status, "failed")
    for cond in _conditions(status):
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return Health.CURRENT, f"Job Completed. succeeded: {succeeded}/{completions}"
        if cond.get("type") == "Failed":
            return Health.FAILED, f"Job Failed. failed: {failed}/{completions}"
        if cond.get("type") == "Suspended" and spec.get("suspend") is True:
            return Health.CURRENT, "Job is suspended"
    if not status.get("startTime"):
        return Health.IN_PROGRESS, "Job not started"
    active = _count(status, "active")
    return (
        Health.CURRENT,
        f"Job in progress. success:{succeeded}, active: {active}, failed: {failed}",
    )


def _pod(obj: Observed) -> Verdict:
    status = obj.status
    phase = status.get("phase") or ""
    if phase == "Succeeded":
        return Health.CURRENT, "Pod has completed successfully"
    if phase == "Failed":
        return Health.CURRENT, "Pod has completed, but not successfully"
    if phase == "Running":
        if _condition(status, "Ready", "True") is not None:
            return Health.CURRENT, "Pod is Ready"
        looping = [
            str(c.get("name", ""))
            for c in status.get("containerStatuses") or ()
            if isinstance(c, Mapping)
            and _map(_map(c.get("state")).get("waiting")).get("reason") == "CrashLoopBackOff"
        ]
        if looping:
            return Health.FAILED, "Containers in CrashLoop state: " + ",".join(looping)
        return Health.IN_PROGRESS, "Pod is running but is not Ready"
    if phase == "Pending":
        scheduled = _condition(status, "PodScheduled", "False")
        if scheduled is not None and scheduled.get("reason") == "Unschedulable":
            created = _time(obj.meta.get("creationTimestamp"))
            now = obj.now or datetime.now(UTC)
            if created is not None and now - created < SCHEDULE_WINDOW:
                return Health.IN_PROGRESS, "Pod has not been scheduled"
            return Health.FAILED, "Pod could not be scheduled"
        return Health.IN_PROGRESS, "Pod is in the Pending phase"
    if not phase:
        return Health.IN_PROGRESS, "Pod phase not available"
    return Health.IN_PROGRESS, f"unknown phase {phase}"


def _pvc(obj: Observed) -> Verdict:
    status = obj.status
    phase = status.get("phase") or "unknown"
    if phase != "Bound":
        return Health.IN_PROGRESS, f"PVC is not Bound. phase: {phase}"
    return Health.CURRENT, "PVC is Bound"


def _service(obj: Observed) -> Verdict:
    spec, status = obj.spec, obj.status
    if spec.get("type") == "LoadBalancer":
        if not spec.get("clusterIP"):
            return Health.IN_PROGRESS, "ClusterIP not set. Service type: LoadBalancer"
        if not _map(status.get("loadBalancer")).get("ingress"):
            return Health.IN_PROGRESS, "Service does not have load balancer ingress IP address"
    return Health.CURRENT, "Service is ready"


def _pdb(obj: Observed) -> Verdict:
    status = obj.status
    healthy, desired = _count(status, "currentHealthy"), _count(status, "desiredHealthy")
    if healthy < desired:
        return Health.IN_PROGRESS, f"Healthy: {healthy}/{desired}"
    return Health.CURRENT, "AllowedDisruptions has been computed."


def _crd(obj: Observed) -> Verdict:
    status = obj.status
    for cond in _conditions(status):
        if cond.get("type") == "NamesAccepted" and cond.get("status") == "False":
            return Health.FAILED, _said(cond, "names not accepted")
        if cond.get("type") == "Established":
            if cond.get("status") == "False" and cond.get("reason") != "Installing":
                return Health.FAILED, _said(cond, "not established")
            if cond.get("status") == "True":
                return Health.CURRENT, "CRD is established"
    return Health.IN_PROGRESS, "Install in progress"


_RULES: dict[str, Rule] = {
    "Service": _service,
    "Pod": _pod,
    "Secret": _always_ready,
    "ConfigMap": _always_ready,
    "PersistentVolumeClaim": _pvc,
    "ReplicationController": _replicaset,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "apps/Deployment": _deployment,
    "apps/ReplicaSet": _replicaset,
    "policy/PodDisruptionBudget": _pdb,
    "batch/CronJob": _always_ready,
    "batch/Job": _job,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}


def _short(*checks: tuple[str, int, int]) -> Verdict | None:
    """The first ``(what, have, want)`` with fewer than wanted, as kstatus words it.

    ``Pending termination`` is the one check the other way round (more pods than
    wanted), given as ``(what, want, have)`` so every check reads "have < want".
    """
    for what, have, want in checks:
        if have < want:
            if what == "Pending termination":
                return Health.IN_PROGRESS, f"Pending termination: {want - have}"
            return Health.IN_PROGRESS, f"{what}: {have}/{want}"
    return None


def _said(cond: Mapping[str, Any], fallback: str) -> str:
    return str(cond.get("message") or cond.get("reason") or fallback)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(where: Mapping[str, Any], field: str, default: int = 0) -> int:
    value = _int(where.get(field))
    return default if value is None else value


def _conditions(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = status.get("conditions")
    if not isinstance(found, list):
        return []
    return [c for c in found if isinstance(c, Mapping)]


def _condition(
    status: Mapping[str, Any], type_: str, value: str | None = None
) -> Mapping[str, Any] | None:
    """The condition of ``type_`` (with ``value``, when given), else None."""
    for cond in _conditions(status):
        if cond.get("type") == type_:
            return cond if value is None or cond.get("status") == value else None
    return None


def _time(value: Any) -> datetime | None:
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
