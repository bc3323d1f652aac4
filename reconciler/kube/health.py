"""Is an applied object healthy? Per-kind rules, then generic kstatus conditions.

:func:`evaluate` reads one live object dict (no I/O) the way kstatus does:
workloads by observedGeneration and replica counts, Jobs by their Complete and
Failed conditions, everything else by ``Ready``/``Reconciling``/``Stalled``
conditions, and objects without status (ConfigMaps, Services) are current at
once. :func:`wait_healthy` polls the API until every object is current, one
fails, or a timeout passes; the daemon and rollouts call it after apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from reconciler.model.changeset import ObjectRef

if TYPE_CHECKING:
    from reconciler.kube.client import KubeClient


class Health(StrEnum):
    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    NOT_FOUND = "NotFound"


@dataclass(frozen=True, slots=True)
class ObjectHealth:
    ref: ObjectRef
    health: Health
    message: str = ""

    def __str__(self) -> str:
        return f"{self.ref}: {self.health}" + (f" ({self.message})" if self.message else "")


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The last observation of every watched object; ``timed_out`` when time ran out."""

    objects: tuple[ObjectHealth, ...] = field(default=())
    timed_out: bool = False

    @property
    def healthy(self) -> bool:
        return all(o.health is Health.CURRENT for o in self.objects)

    @property
    def failed(self) -> tuple[ObjectHealth, ...]:
        return tuple(o for o in self.objects if o.health is Health.FAILED)

    @property
    def pending(self) -> tuple[ObjectHealth, ...]:
        return tuple(o for o in self.objects if o.health is not Health.CURRENT)

    def message(self) -> str:
        if self.healthy:
            return f"{len(self.objects)} objects healthy"
        prefix = "timed out waiting for health: " if self.timed_out else ""
        return prefix + "; ".join(str(o) for o in self.pending)


Verdict = tuple[Health, str]


def evaluate(obj: Mapping[str, Any]) -> Verdict:
    """The health of one live object and a short reason."""
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Health.IN_PROGRESS, "being deleted"
    status = obj.get("status") or {}
    generation = meta.get("generation")
    observed = status.get("observedGeneration")
    check = _KIND_CHECKS.get(str(obj.get("kind", "")))
    if check is not None:
        if generation is not None and (observed is None or observed < generation):
            return Health.IN_PROGRESS, f"generation {generation} not observed yet"
        return check(obj.get("spec") or {}, status)
    return _conditions(status, generation, observed)


def _deployment(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Verdict:
    want = spec.get("replicas", 1)
    if _condition(status, "Progressing", "False", reason="ProgressDeadlineExceeded"):
        return Health.FAILED, "progress deadline exceeded"
    updated = status.get("updatedReplicas", 0)
    if updated < want:
        return Health.IN_PROGRESS, f"{updated}/{want} replicas updated"
    if status.get("replicas", 0) > updated:
        return Health.IN_PROGRESS, f"{status.get('replicas', 0) - updated} old replicas pending"
    available = status.get("availableReplicas", 0)
    if available < want:
        return Health.IN_PROGRESS, f"{available}/{want} replicas available"
    return Health.CURRENT, f"{available}/{want} replicas available"


def _statefulset(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Verdict:
    want = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    if ready < want:
        return Health.IN_PROGRESS, f"{ready}/{want} replicas ready"
    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    if strategy == "RollingUpdate":
        partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get(
            "partition", 0
        )
        updated = status.get("updatedReplicas", 0)
        if updated < want - partition:
            return Health.IN_PROGRESS, f"{updated}/{want - partition} replicas updated"
        current, target = status.get("currentRevision"), status.get("updateRevision")
        if partition == 0 and target and current != target:
            return Health.IN_PROGRESS, f"revision {target} rolling out"
    return Health.CURRENT, f"{ready}/{want} replicas ready"


def _daemonset(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Verdict:
    want = status.get("desiredNumberScheduled", 0)
    updated = status.get("updatedNumberScheduled", 0)
    available = status.get("numberAvailable", 0)
    if updated < want:
        return Health.IN_PROGRESS, f"{updated}/{want} pods updated"
    if available < want:
        return Health.IN_PROGRESS, f"{available}/{want} pods available"
    return Health.CURRENT, f"{available}/{want} pods available"


def _job(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Verdict:
    failed = _condition(status, "Failed", "True")
    if failed is not None:
        return Health.FAILED, str(failed.get("message") or failed.get("reason") or "job failed")
    if _condition(status, "Complete", "True") is not None:
        return Health.CURRENT, f"{status.get('succeeded', 0)} succeeded"
    return (
        Health.IN_PROGRESS,
        f"{status.get('active', 0)} active, {status.get('succeeded', 0)} succeeded",
    )


def _conditions(status: Mapping[str, Any], generation: Any, observed: Any) -> Verdict:
    stalled = _condition(status, "Stalled", "True")
    if stalled is not None:
        return Health.FAILED, str(stalled.get("message") or stalled.get("reason") or "stalled")
    if generation is not None and observed is not None and observed < generation:
        return Health.IN_PROGRESS, f"generation {generation} not observed yet"
    if _condition(status, "Reconciling", "True") is not None:
        return Health.IN_PROGRESS, "reconciling"
    ready = _condition(status, "Ready")
    if ready is not None and ready.get("status") != "True":
        return Health.IN_PROGRESS, str(ready.get("message") or ready.get("reason") or "not ready")
    phase = status.get("phase")
    if phase in ("Pending", "Terminating"):
        return Health.IN_PROGRESS, f"phase {phase}"
    if phase == "Failed":
        return Health.FAILED, "phase Failed"
    return Health.CURRENT, ""


def _condition(
    status: Mapping[str, Any], type_: str, value: str | None = None, *, reason: str | None = None
) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if not isinstance(cond, Mapping) or cond.get("type") != type_:
            continue
        if value is not None and cond.get("status") != value:
            return None
        if reason is not None and cond.get("reason") != reason:
            return None
        return cond
    return None


_KIND_CHECKS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Verdict]] = {
    "Deployment": _deployment,
    "StatefulSet": _statefulset,
    "DaemonSet": _daemonset,
    "Job": _job,
}


def wait_healthy(
    client: KubeClient,
    objects: Iterable[ObjectRef | Mapping[str, Any]],
    timeout: float,
    *,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[HealthReport], None] | None = None,
) -> HealthReport:
    """Poll until every object is Current, one Failed, or ``timeout`` seconds pass.

    ``objects`` are references or object dicts (such as the applied manifests).
    ``progress`` sees each round's observation (``apply --wait`` draws it).
    """
    refs = [o if isinstance(o, ObjectRef) else ObjectRef.of(o) for o in objects]
    order = list(dict.fromkeys(refs))
    pending = list(order)
    done: dict[ObjectRef, ObjectHealth] = {}
    deadline = clock() + timeout
    delay = min(interval, 0.1)
    while True:
        for ref in list(pending):
            obj = client.get(ref)
            if obj is None:
                done[ref] = ObjectHealth(ref, Health.NOT_FOUND, "not found")
                continue
            health, message = evaluate(obj)
            done[ref] = ObjectHealth(ref, health, message)
            if health is Health.CURRENT:
                pending.remove(ref)
        report = tuple(done[r] for r in order if r in done)
        if progress is not None:
            progress(HealthReport(report))
        if not pending or any(o.health is Health.FAILED for o in report):
            return HealthReport(report)
        if clock() >= deadline:
            return HealthReport(report, timed_out=True)
        time.sleep(delay)
        delay = min(delay * 2, interval)
