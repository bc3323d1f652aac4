"""PodDisruptionBudgets: the disruption controller and the ``pods/eviction`` subresource.

https://kubernetes.io/docs/concepts/workloads/pods/disruptions/ and
https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/: a voluntary
disruption (``kubectl drain``) asks to evict a pod with ``POST
/api/v1/namespaces/NS/pods/NAME/eviction`` (a policy/v1 ``Eviction``). The API server
deletes the pod (gracefully, with the Eviction's ``deleteOptions``) unless the one
PodDisruptionBudget selecting it allows no disruption: then the answer is ``429
TooManyRequests`` with a ``DisruptionBudget`` cause, and the client retries later.

The disruption controller (pkg/controller/disruption) keeps each budget's status:
``expectedPods`` and ``desiredHealthy`` from ``minAvailable`` (a number: of the
selected pods; a percentage: of their controllers' scale) or ``maxUnavailable`` (of
the controllers' scale), ``currentHealthy`` (Ready pods not being deleted nor just
evicted), ``disruptionsAllowed`` (the difference, never below 0), the
``DisruptionAllowed`` condition and ``observedGeneration``. A budget the controller has
not observed yet refuses every eviction ("still being processed"). An eviction records
the pod in ``disruptedPods`` and takes one disruption before the pod is deleted, so
two evictions cannot both use the last one. Pods that ended, are Pending or are
already terminating are evicted without asking the budget; an unready pod is evicted
when the budget is met anyway (``unhealthyPodEvictionPolicy: IfHealthyBudget``) or
always (``AlwaysAllow``). The evicted pod gets the ``DisruptionTarget`` condition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError, not_found
from reconciler.sandbox.apply import now
from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.gc import DeleteOptions, Lifecycle
from reconciler.sandbox.kinds import PDBS, PODS
from reconciler.sandbox.owned import alive, controller_uid
from reconciler.sandbox.pods import is_ready
from reconciler.sandbox.scale import scale_of
from reconciler.sandbox.selectors import parse_label_selector, selector_to_string

DISRUPTION_CONTROLLER = "disruption-controller"
DELETION_TIMEOUT = timedelta(minutes=2)  # an evicted pod not deleted by then counts again
_STAMP = "%Y-%m-%dT%H:%M:%SZ"
_EVICTION_KINDS = {"policy/v1", "policy/v1beta1"}
_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."


def _selects(pdb: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """Whether the budget selects a pod of its namespace (policy/v1: an empty selector
    selects every pod, a missing one none)."""
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return lambda pod: False
    return parse_label_selector(selector_to_string(selector))


def _selected(api: SandboxApi, pdb: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods the budget selects, as stored (read only)."""
    selects = _selects(pdb)
    return [p for p in api.store.view(PODS, pdb["metadata"].get("namespace", "")) if selects(p)]


def _scaled(value: Any, total: int) -> int | None:
    """An IntOrString of ``total``, percentages rounded up; None when it is neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    if text.endswith("%") and text[:-1].isdigit():
        return math.ceil(int(text[:-1]) * total / 100)
    return None


class DisruptionController:
    """Keeps every PodDisruptionBudget's status from the pods it selects."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def reconcile(self, pdb: dict[str, Any]) -> float | None:
        if not alive(pdb):
            return None
        pods = _selected(self.plane.api, pdb)
        old = pdb.get("status") or {}
        try:
            expected, desired = self._expected(pdb, pods)
        except ApiError as e:
            self._fail_safe(pdb, e.message)
            return None
        clock = datetime.now(UTC)
        disrupted, recheck = self._disrupted(old.get("disruptedPods") or {}, pods, clock)
        healthy = sum(
            1 for p in pods if alive(p) and p["metadata"]["name"] not in disrupted and is_ready(p)
        )
        allowed = healthy - desired if expected > 0 else 0
        status: dict[str, Any] = {
            "observedGeneration": int(pdb["metadata"].get("generation") or 1),
            "expectedPods": expected,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": max(0, allowed),
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        status["conditions"] = _allowed_condition(old, status)
        self.plane.write_status(PDBS, pdb, status, manager=DISRUPTION_CONTROLLER)
        return recheck

    def _expected(self, pdb: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, int]:
        """``getExpectedPodCount``: (expectedPods, desiredHealthy)."""
        spec = pdb.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected = self._scale(pods)
            unavailable = _scaled(spec["maxUnavailable"], expected)
            if unavailable is None:
                raise ApiError(400, f"invalid maxUnavailable {spec['maxUnavailable']!r}")
            return expected, max(0, expected - unavailable)
        if spec.get("minAvailable") is not None:
            value = spec["minAvailable"]
            if isinstance(value, int) and not isinstance(value, bool):
                return len(pods), value
            expected = self._scale(pods)
            available = _scaled(value, expected)
            if available is None:
                raise ApiError(400, f"invalid minAvailable {value!r}")
            return expected, available
        return 0, 0

    def _scale(self, pods: list[dict[str, Any]]) -> int:
        """The summed scale of the pods' controllers, each once (``getExpectedScale``); a
        pod of a Deployment counts the Deployment's replicas, not its ReplicaSet's."""
        scales: dict[str, int] = {}
        for pod in pods:
            found = self._controller_scale(pod)
            if found is None:
                name = pod["metadata"]["name"]
                raise ApiError(500, f'found no controllers for pod "{name}"')
            scales[found[0]] = found[1]
        return sum(scales.values())

    def _controller_scale(self, obj: dict[str, Any]) -> tuple[str, int] | None:
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
        if not refs:
            return None
        ref = refs[0]
        kind = self.plane.api.kinds.by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if kind is None or kind.scale is None:
            return None
        namespace = obj["metadata"].get("namespace", "")
        owner = self.plane.api.store.view_one(kind.resource, namespace, str(ref.get("name")))
        if owner is None or controller_uid(obj) != owner["metadata"].get("uid"):
            return None
        if kind.kind == "ReplicaSet" and controller_uid(owner) is not None:
            parent = self._controller_scale(owner)  # a Deployment's: its scale counts
            if parent is not None:
                return parent
        return str(owner["metadata"]["uid"]), int(scale_of(kind, owner)["spec"]["replicas"])

    @staticmethod
    def _disrupted(
        recorded: Mapping[str, Any], pods: list[dict[str, Any]], clock: datetime
    ) -> tuple[dict[str, str], float | None]:
        """``buildDisruptedPodMap``: evicted pods not deleted yet, for at most 2 minutes;
        and the seconds until the first of them times out."""
        kept: dict[str, str] = {}
        recheck: float | None = None
        for pod in pods:
            name = pod["metadata"]["name"]
            if not alive(pod) or name not in recorded:
                continue
            try:
                since = datetime.strptime(str(recorded[name]), _STAMP).replace(tzinfo=UTC)
            except ValueError:
                continue
            left = (since + DELETION_TIMEOUT - clock).total_seconds()
            if left > 0:
                kept[name] = str(recorded[name])
                recheck = left if recheck is None else min(recheck, left)
        return kept, recheck

    def _fail_safe(self, pdb: dict[str, Any], message: str) -> None:
        """``failSafe``: no disruption allowed, ``SyncFailed``; observedGeneration stays."""
        old = pdb.get("status") or {}
        status = {**old, "disruptionsAllowed": 0}
        status["conditions"] = _set_condition(old, "False", "SyncFailed", message)
        self.plane.write_status(PDBS, pdb, status, manager=DISRUPTION_CONTROLLER)


def _allowed_condition(old: Mapping[str, Any], status: Mapping[str, Any]) -> list[dict[str, Any]]:
    if status["disruptionsAllowed"] > 0:
        return _set_condition(old, "True", "SufficientPods", "", status["observedGeneration"])
    return _set_condition(old, "False", "InsufficientPods", "", status["observedGeneration"])


def _set_condition(
    old: Mapping[str, Any],
    state: str,
    reason: str,
    message: str,
    generation: int | None = None,
) -> list[dict[str, Any]]:
    """``apimeta.SetStatusCondition`` of ``DisruptionAllowed``: the transition time moves
    only when the status does."""
    previous: Mapping[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
    )
    stamp = previous.get("lastTransitionTime") if previous.get("status") == state else None
    condition = {
        "type": "DisruptionAllowed",
        "status": state,
        "observedGeneration": int(
            generation if generation is not None else old.get("observedGeneration") or 0
        ),
        "lastTransitionTime": stamp or now(),
        "reason": reason,
        "message": message,
    }
    others = [c for c in old.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
    return [*others, condition]


# --- the eviction subresource -------------------------------------------------------------


def _can_ignore_budget(pod: Mapping[str, Any]) -> bool:
    """``canIgnorePDB``: an ended, Pending or terminating pod disrupts nothing."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or not alive(pod)


def _too_many(message: str, retry_after: int) -> ApiError:
    return ApiError(
        429,
        _BLOCKED,
        reason="TooManyRequests",
        causes=[{"type": "DisruptionBudget", "message": message}],
        retry_after=retry_after,
    )


def _checked_eviction(body: Any, name: str) -> DeleteOptions:
    if not isinstance(body, Mapping):
        raise ApiError(400, "the request body must be a JSON object")
    version, kind = body.get("apiVersion", "policy/v1"), body.get("kind", "Eviction")
    if kind != "Eviction" or version not in _EVICTION_KINDS:
        raise ApiError(400, f"the body must be a policy/v1 Eviction, not {version} {kind}")
    meta = body.get("metadata") or {}
    if not isinstance(meta, Mapping) or meta.get("name", name) != name:
        raise ApiError(400, "name in URL does not match name in Eviction object")
    return DeleteOptions.parse(body.get("deleteOptions"), {})


def evict(
    api: SandboxApi,
    lifecycle: Lifecycle,
    namespace: str,
    name: str,
    body: Any,
    *,
    dry_run: bool = False,
) -> dict[str, Any]:
    """``POST pods/NAME/eviction``: the Status answered with 201, or the ApiError."""
    options = _checked_eviction(body, name)
    if dry_run and not options.dry_run:
        options = DeleteOptions(
            options.propagation,
            options.orphan_dependents,
            options.preconditions,
            True,
            options.grace_period,
        )
    pod_kind = api.kinds.by_resource(*PODS)
    assert pod_kind is not None
    pod = api.store.view_one(PODS, namespace, name)
    if pod is None:
        raise not_found("", "pods", name)
    if not _can_ignore_budget(pod):
        budgets = [b for b in api.store.view(PDBS, namespace) if _selects(b)(pod)]
        if len(budgets) > 1:
            raise ApiError(
                500,
                "This pod has more than one PodDisruptionBudget, "
                "which the eviction subresource does not support.",
            )
        if budgets and not _unhealthy_may_go(budgets[0], pod):
            _take_disruption(api, budgets[0], name, options.dry_run)
    if not options.dry_run:
        _mark_disruption_target(api, pod_kind, pod)
    lifecycle.delete(pod_kind, namespace, name, options)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _unhealthy_may_go(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """An unready pod goes without taking a disruption: always (``AlwaysAllow``), or
    while the budget is met anyway (``IfHealthyBudget``, the default)."""
    if is_ready(pod):
        return False
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    desired = int(status.get("desiredHealthy") or 0)
    return desired > 0 and int(status.get("currentHealthy") or 0) >= desired


def _take_disruption(api: SandboxApi, pdb: dict[str, Any], pod: str, dry_run: bool) -> None:
    """``checkAndDecrement``: refuse, or take one disruption and record the pod."""
    meta, status = pdb["metadata"], dict(pdb.get("status") or {})
    name = meta["name"]
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 1):
        raise _too_many(f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise ApiError(
            403,
            f'poddisruptionbudgets.policy "{name}" is forbidden: '
            "pdb disruptions allowed is negative",
            reason="Forbidden",
        )
    if allowed == 0:
        raise _too_many(
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} "
            f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently",
            0,
        )
    if dry_run:
        return
    status["disruptionsAllowed"] = allowed - 1
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod: now()}
    if allowed - 1 == 0:
        status["conditions"] = _allowed_condition(status, status)
    kind = api.kinds.by_resource(*PDBS)
    assert kind is not None
    api.commit(kind, pdb, {**pdb, "status": status}, WriteOptions("kube-apiserver"), "status")


def _mark_disruption_target(api: SandboxApi, kind: Any, pod: dict[str, Any]) -> None:
    """The ``DisruptionTarget`` condition an evicted pod gets before it is deleted
    (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions)."""
    if not alive(pod) or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return
    status = dict(pod.get("status") or {})
    others = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    target = {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now(),
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    status["conditions"] = [*others, target]
    api.commit(kind, pod, {**pod, "status": status}, WriteOptions("kube-apiserver"), "status")
