"""Graceful deletion of pods: what a DELETE of a pod decides, before the kubelet acts.

https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/: a running pod is
not removed by its DELETE. The API server sets ``metadata.deletionTimestamp`` (now plus
the grace period) and ``deletionGracePeriodSeconds`` and answers 200 with the pod; the
pod is Terminating until its kubelet has stopped its containers and deletes it for good
(with a grace period of 0). The grace period is the DELETE's ``gracePeriodSeconds``,
else the pod's ``spec.terminationGracePeriodSeconds`` (defaulted to 30); a pod not
bound to a node, or one that already ended (Succeeded/Failed), goes at once, and so
does a DELETE with ``gracePeriodSeconds: 0`` (a force deletion). A second DELETE may
only shorten the grace period; otherwise it changes nothing. A negative grace period
counts as 1 s. This follows kube-apiserver's ``rest.BeforeDelete`` and the pod
strategy's ``CheckGracefulDelete`` (pkg/registry/core/pod/strategy.go).

:func:`plan_pod_delete` is pure; ``gc.Lifecycle`` stores what it decides and the
kubelet (``kubelet.py``) does the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_GRACE = 30  # spec.terminationGracePeriodSeconds when the pod does not say
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class PodDeletePlan:
    """What a DELETE does to one pod.

    ``pending``: already terminating with no shorter grace asked: nothing changes.
    ``grace`` > 0: mark it (``deletionTimestamp``, ``deletionGracePeriodSeconds``).
    ``grace`` == 0: no grace period: removed at once (finalizers still hold it).
    """

    grace: int
    pending: bool = False


def requested_grace(value: Any) -> int | None:
    """``gracePeriodSeconds`` of a DeleteOptions as the server reads it (negative: 1)."""
    if value is None:
        return None
    return 1 if int(value) < 0 else int(value)


def _default_grace(pod: Mapping[str, Any]) -> int:
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else DEFAULT_GRACE


def plan_pod_delete(pod: Mapping[str, Any], requested: int | None) -> PodDeletePlan:
    """The grace a DELETE with ``requested`` (None: not given) gives ``pod``."""
    meta = pod.get("metadata") or {}
    current = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp"):
        if not current:
            return PodDeletePlan(0)  # marked without a grace period: finalizers hold it
        if requested is None or requested >= int(current):
            return PodDeletePlan(int(current), pending=True)
        return PodDeletePlan(requested)
    grace = _default_grace(pod) if requested is None else requested
    if not (pod.get("spec") or {}).get("nodeName"):
        grace = 0  # never scheduled: no kubelet has anything to stop
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        grace = 0  # its containers have ended already
    return PodDeletePlan(max(0, grace))


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC)


def mark_terminating(meta: dict[str, Any], grace: int, now: datetime | None = None) -> None:
    """Set the deletion fields on ``meta`` (edited in place) for a grace period of ``grace``.

    A first DELETE stamps now + grace; a shorter one moves the stamp back by the
    difference, as ``BeforeDelete`` does (the stamp is when the pod may be killed).
    """
    previous = meta.get("deletionTimestamp")
    old_grace = meta.get("deletionGracePeriodSeconds")
    if previous and old_grace is not None:
        when = _parse(str(previous)) - timedelta(seconds=int(old_grace) - grace)
    else:
        when = (now or datetime.now(UTC)).replace(microsecond=0) + timedelta(seconds=grace)
        if int(meta.get("generation") or 0) > 0:
            meta["generation"] = int(meta["generation"]) + 1
    meta["deletionTimestamp"] = when.strftime(_STAMP)
    meta["deletionGracePeriodSeconds"] = grace


def terminating(pod: Mapping[str, Any]) -> bool:
    """Being deleted (what ``kubectl get pods`` shows as Terminating)."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))
