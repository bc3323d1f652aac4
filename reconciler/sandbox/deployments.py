"""The Deployment controller: ReplicaSets per template, rolled over time, and the status.

Follows https://kubernetes.io/docs/concepts/workloads/controllers/deployment/: each pod
template gets a ReplicaSet ``<deployment>-<pod-template-hash>`` (ControllerRef, the
``pod-template-hash`` label on its selector, template and pods, and the
``deployment.kubernetes.io/revision`` annotation, also mirrored on the Deployment). A
``RollingUpdate`` scales the new ReplicaSet up within ``maxSurge`` and the old ones down
within ``maxUnavailable`` (unhealthy old pods first), step by step as pods become
available, exactly the arithmetic of the real controller's ``rolling.go``; ``Recreate``
scales the old ones to zero and waits for their pods before starting new ones.
``spec.paused`` stops the rollout. The ``Progressing`` condition stays True while the
rollout advances and turns False with ``ProgressDeadlineExceeded`` only when nothing
advanced for ``progressDeadlineSeconds``; ``Available`` counts pods of every ReplicaSet,
so a stuck rollout keeps ``Available=True`` from the old pods, as on a real cluster.
Old ReplicaSets beyond ``revisionHistoryLimit`` are deleted; ``kubectl rollout
history|undo|restart|status`` work on what this writes.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.apply import now
from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.copying import IdentityMemo, clone
from reconciler.sandbox.events import NORMAL
from reconciler.sandbox.kinds import DEPLOYMENTS, REPLICASETS
from reconciler.sandbox.owned import (
    alive,
    condition,
    int_or_percent,
    owner_reference,
    replicas_of,
    safe_hash,
    semantic,
)

REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
HASH_LABEL = "pod-template-hash"
# Deployment annotations the controller does not copy to its ReplicaSets.
_NOT_COPIED = {"kubectl.kubernetes.io/last-applied-configuration", REVISION}
DEFAULT_DEADLINE = 600
DEFAULT_HISTORY = 10


def revision(rs: dict[str, Any]) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def without_hash(template: dict[str, Any]) -> dict[str, Any]:
    """A ReplicaSet's template as the Deployment wrote it (minus ``pod-template-hash``)."""
    meta = template.get("metadata") or {}
    labels = meta.get("labels")
    if not isinstance(labels, dict) or HASH_LABEL not in labels:
        return template
    # shallow: the template is only read (compared), never changed
    plain = {k: v for k, v in labels.items() if k != HASH_LABEL}
    return {**template, "metadata": {**meta, "labels": plain}}


# semantic(template) by the template's id: (the template, its semantic form). The
# Deployment controller compares its template with every ReplicaSet's on each sync
# (a few per pod that changes), and the templates are stored objects' own maps,
# never changed in place: each is cleaned once, not on every sync (3% of the
# sandbox's CPU during an install). Checked by identity; the oldest go first.
_SEMANTIC: IdentityMemo[Any] = IdentityMemo(20_000)


def _semantic_template(template: dict[str, Any], *, hashed: bool = False) -> Any:
    """``semantic`` of a stored template (a ReplicaSet's, ``hashed``, less its hash label)."""
    value = _SEMANTIC.get(template)
    if value is None:
        value = semantic(without_hash(template) if hashed else template)
        _SEMANTIC.put(template, value)
    return value


def rolling_bounds(spec: dict[str, Any], replicas: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) resolved against ``replicas``: surge rounds up, the other down."""
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True, default=1)
    unavailable = int_or_percent(
        rolling.get("maxUnavailable", "25%"), replicas, round_up=False, default=0
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1  # the API forbids both zero; the controller guards anyway
    return surge, unavailable


def _local(rs: dict[str, Any]) -> dict[str, Any]:
    """This sync's view of a stored ReplicaSet: ``_scale`` changes its ``spec.replicas``
    for the rest of the sync, which must not reach the stored object (the rest is
    only read, so it is shared rather than copied)."""
    return {**rs, "spec": dict(rs["spec"])}


def _count(rs: dict[str, Any], field: str) -> int:
    return int((rs.get("status") or {}).get(field) or 0)


class DeploymentController:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._progress: dict[str, tuple[int, float]] = {}  # uid -> (generation, last progress)

    def forget(self, uid: str) -> None:
        self._progress.pop(uid, None)

    def reconcile(self, d: dict[str, Any]) -> float | None:
        if not alive(d):
            return None
        spec = d.get("spec") or {}
        rss = [_local(rs) for rs in self.plane.owned(REPLICASETS, d) if alive(rs)]
        template = spec.get("template") or {}
        wanted = _semantic_template(template)
        new = next(
            (rs for rs in rss if _semantic_template(rs["spec"]["template"], hashed=True) == wanted),
            None,
        )
        created = False
        annotations: dict[str, str] | None = None
        waiting = False  # Recreate, old pods still terminating: look again (a pod watch)
        if not spec.get("paused"):
            if new is None:
                new = self._create_replicaset(d, rss)
                new = _local(new) if new is not None else None
                created = new is not None
            elif revision(new) < max(revision(rs) for rs in rss):
                new = self._bump_revision(new, rss)
            if new is not None:
                annotations = _mirrored_revision(d, new)
                waiting = self._roll(d, new, [rs for rs in rss if rs is not new])
        rss = [_local(rs) for rs in self.plane.owned(REPLICASETS, d) if alive(rs)]
        if new is not None:
            new = next((rs for rs in rss if rs["metadata"]["uid"] == new["metadata"]["uid"]), None)
        self._clean_history(d, [rs for rs in rss if rs is not new])
        status, wait = self._status(d, new, rss, created)
        self.plane.write_status(DEPLOYMENTS, d, status, annotations=annotations)
        if waiting:
            return min(wait or float("inf"), self.plane.timing.controller_delay)
        return wait

    # --- ReplicaSets --------------------------------------------------------------------

    def _create_replicaset(
        self, d: dict[str, Any], rss: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        spec = d["spec"]
        template = clone(spec.get("template") or {})
        pod_hash = safe_hash(semantic(template))
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pod_hash
        selector = clone(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = pod_hash
        replicas = replicas_of(spec)
        annotations = {
            k: v
            for k, v in (d["metadata"].get("annotations") or {}).items()
            if k not in _NOT_COPIED
        }
        annotations.update(
            {
                REVISION: str(max((revision(rs) for rs in rss), default=0) + 1),
                DESIRED: str(replicas),
                MAX_REPLICAS: str(replicas + rolling_bounds(spec, replicas)[0]),
            }
        )
        body: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{d['metadata']['name']}-{pod_hash}",
                "namespace": d["metadata"].get("namespace", ""),
                "labels": dict(template["metadata"]["labels"]),
                "annotations": annotations,
                "ownerReferences": [owner_reference(d)],
            },
            "spec": {
                "replicas": self._first_scale(d, rss),
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        created = self.plane.create(REPLICASETS, str(d["metadata"].get("namespace", "")), body)
        replicas = body["spec"]["replicas"]
        if created is not None and replicas > 0:
            self._record_scale(d, body["metadata"]["name"], 0, replicas)
        return created

    def _record_scale(self, d: dict[str, Any], rs: str, before: int, after: int) -> None:
        """``ScalingReplicaSet``, as the Deployment controller words it since 1.28."""
        way = "up" if after > before else "down"
        message = f"Scaled {way} replica set {rs} from {before} to {after}"
        self.plane.events.emit(d, NORMAL, "ScalingReplicaSet", message, "deployment-controller")

    def _first_scale(self, d: dict[str, Any], rss: list[dict[str, Any]]) -> int:
        """How many pods a new ReplicaSet starts with (``NewRSNewReplicas``)."""
        spec = d["spec"]
        replicas = replicas_of(spec)
        if (spec.get("strategy") or {}).get("type") == "Recreate":
            return 0
        surge, _ = rolling_bounds(spec, replicas)
        total = sum(replicas_of(rs["spec"], 0) for rs in rss)
        return max(0, min(replicas, replicas + surge - total))

    def _bump_revision(self, rs: dict[str, Any], rss: list[dict[str, Any]]) -> dict[str, Any]:
        """A rollback to an old template reuses its ReplicaSet under the next revision."""
        body = clone(rs)
        annotations = body["metadata"].setdefault("annotations", {})
        annotations[REVISION] = str(max(revision(r) for r in rss) + 1)
        self.plane.update(REPLICASETS, rs, body)
        meta = rs["metadata"]
        return self.plane.get(REPLICASETS, meta.get("namespace", ""), meta["name"]) or rs

    def _scale(self, rs: dict[str, Any], replicas: int, d: dict[str, Any]) -> None:
        before = replicas_of(rs["spec"], 0)
        if before == replicas:
            return
        body = clone(rs)
        body["spec"]["replicas"] = replicas
        want = replicas_of(d["spec"])
        annotations = body["metadata"].setdefault("annotations", {})
        annotations[DESIRED] = str(want)
        annotations[MAX_REPLICAS] = str(want + rolling_bounds(d["spec"], want)[0])
        if self.plane.update(REPLICASETS, rs, body):
            self._record_scale(d, rs["metadata"]["name"], before, replicas)
        rs["spec"]["replicas"] = replicas  # the local view follows for the rest of this sync

    def _roll(self, d: dict[str, Any], new: dict[str, Any], old: list[dict[str, Any]]) -> bool:
        """Scale toward the new ReplicaSet; True while Recreate waits for old pods to go."""
        spec = d["spec"]
        replicas = replicas_of(spec)
        old = sorted(old, key=revision)  # oldest first, as the real controller scales down
        if (spec.get("strategy") or {}).get("type") == "Recreate":
            for rs in old:
                self._scale(rs, 0, d)
            if any(self._pods_running(rs) for rs in old):
                return True
            self._scale(new, replicas, d)
            return False
        surge, unavailable = rolling_bounds(spec, replicas)
        everything = [new, *old]
        current = replicas_of(new["spec"], 0)
        if current > replicas:
            self._scale(new, replicas, d)
        elif current < replicas:
            total = sum(replicas_of(rs["spec"], 0) for rs in everything)
            room = replicas + surge - total
            if room > 0:
                self._scale(new, min(replicas, current + room), d)
        min_available = replicas - unavailable
        total = sum(replicas_of(rs["spec"], 0) for rs in everything)
        new_unavailable = replicas_of(new["spec"], 0) - _count(new, "availableReplicas")
        budget = total - min_available - new_unavailable
        if budget <= 0:
            return False
        for rs in old:  # first the old pods that are not available anyway
            unhealthy = replicas_of(rs["spec"], 0) - _count(rs, "availableReplicas")
            cut = min(budget, max(0, unhealthy))
            if cut:
                self._scale(rs, replicas_of(rs["spec"], 0) - cut, d)
                budget -= cut
        room = sum(_count(rs, "availableReplicas") for rs in everything) - min_available
        for rs in old:
            cut = min(room, replicas_of(rs["spec"], 0))
            if cut > 0:
                self._scale(rs, replicas_of(rs["spec"], 0) - cut, d)
                room -= cut
        return False

    def _pods_running(self, rs: dict[str, Any]) -> bool:
        """Any pod of ``rs`` not ended yet, terminating ones included: Recreate creates
        new pods only once the old ones are gone (``oldPodsRunning`` in recreate.go,
        https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#recreate-deployment)."""
        return any(
            (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            for p in self.plane.pods_of(rs)
        )

    def _clean_history(self, d: dict[str, Any], old: list[dict[str, Any]]) -> None:
        limit = d["spec"].get("revisionHistoryLimit", DEFAULT_HISTORY)
        idle = sorted(
            (rs for rs in old if replicas_of(rs["spec"], 0) == 0 and _count(rs, "replicas") == 0),
            key=revision,
        )
        if isinstance(limit, int) and len(idle) > limit:
            for rs in idle[: len(idle) - limit]:
                self.plane.delete(REPLICASETS, rs)

    # --- status -------------------------------------------------------------------------

    def _status(
        self,
        d: dict[str, Any],
        new: dict[str, Any] | None,
        rss: list[dict[str, Any]],
        created: bool,
    ) -> tuple[dict[str, Any], float | None]:
        spec = d.get("spec") or {}
        old = d.get("status") or {}
        generation = int(d["metadata"].get("generation", 1))
        replicas = replicas_of(spec)
        _, max_unavailable = rolling_bounds(spec, replicas)
        counts = {
            "replicas": sum(_count(rs, "replicas") for rs in rss),
            "updatedReplicas": _count(new, "replicas") if new is not None else 0,
            "readyReplicas": sum(_count(rs, "readyReplicas") for rs in rss),
            "availableReplicas": sum(_count(rs, "availableReplicas") for rs in rss),
        }
        total = sum(replicas_of(rs["spec"], 0) for rs in rss)
        counts["unavailableReplicas"] = max(0, total - counts["availableReplicas"])
        stamp = now()
        available = (
            condition(
                old,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                stamp,
            )
            if counts["availableReplicas"] >= replicas - max_unavailable
            else condition(
                old,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                stamp,
            )
        )
        progressing, wait = self._progressing(d, new, counts, created, stamp)
        status: dict[str, Any] = {"observedGeneration": generation}
        status.update({k: v for k, v in counts.items() if v})
        status["conditions"] = [available, progressing]
        return status, wait

    def _progressing(
        self,
        d: dict[str, Any],
        new: dict[str, Any] | None,
        counts: dict[str, int],
        created: bool,
        stamp: str,
    ) -> tuple[dict[str, Any], float | None]:
        spec = d.get("spec") or {}
        old = d.get("status") or {}
        uid, generation = d["metadata"]["uid"], int(d["metadata"].get("generation", 1))
        replicas = replicas_of(spec)
        name = new["metadata"]["name"] if new is not None else d["metadata"]["name"]
        clock = self.plane.clock()
        seen_generation, last = self._progress.get(uid, (0, clock))
        if spec.get("paused"):
            return (
                condition(
                    old, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", stamp
                ),
                None,
            )
        old_others = int(old.get("replicas") or 0) - int(old.get("updatedReplicas") or 0)
        others = counts["replicas"] - counts["updatedReplicas"]
        advanced = (
            created
            or seen_generation != generation
            or counts["updatedReplicas"] > int(old.get("updatedReplicas") or 0)
            or others < old_others
            or counts["readyReplicas"] > int(old.get("readyReplicas") or 0)
            or counts["availableReplicas"] > int(old.get("availableReplicas") or 0)
        )
        if advanced:
            last = clock
            self._progress[uid] = (generation, clock)
        complete = (
            counts["updatedReplicas"] == replicas
            and counts["availableReplicas"] == replicas
            and counts["replicas"] == replicas
        )
        if complete:
            message = f'ReplicaSet "{name}" has successfully progressed.'
            return (
                condition(
                    old,
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    message,
                    stamp,
                    update=advanced,
                ),
                None,
            )
        previous: dict[str, Any] = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "Progressing"), {}
        )
        if created:
            message = f'Created new replica set "{name}"'
            return condition(
                old, "Progressing", "True", "NewReplicaSetCreated", message, stamp
            ), None
        deadline = spec.get("progressDeadlineSeconds", DEFAULT_DEADLINE)
        if not advanced and previous.get("reason") == "ProgressDeadlineExceeded":
            return dict(previous), None
        if not advanced and isinstance(deadline, int) and clock - last >= deadline:
            message = f'ReplicaSet "{name}" has timed out progressing.'
            return (
                condition(old, "Progressing", "False", "ProgressDeadlineExceeded", message, stamp),
                None,
            )
        wait = max(0.0, last + deadline - clock) if isinstance(deadline, int) else None
        if not advanced and previous.get("status") == "True":
            return dict(previous), wait
        message = f'ReplicaSet "{name}" is progressing.'
        return (
            condition(
                old, "Progressing", "True", "ReplicaSetUpdated", message, stamp, update=advanced
            ),
            wait,
        )


def _mirrored_revision(d: dict[str, Any], new: dict[str, Any]) -> dict[str, str] | None:
    """The Deployment's annotations with the new ReplicaSet's revision, None if they have it.

    The real controller sets the annotation with ``UpdateStatus`` (``getNewReplicaSet``
    in pkg/controller/deployment/sync.go): written through the status subresource, it
    never bumps ``metadata.generation``, and it goes out in the same write as the
    status. An update of the main resource would bump the generation (the Deployment
    strategy counts annotations) and the status written after it, from the object as
    it was, would lower it again (https://kubernetes.io/docs/reference/using-api/
    api-concepts/#resource-versions: a write from a stale object must not win).
    """
    annotations = d["metadata"].get("annotations") or {}
    if annotations.get(REVISION) == str(revision(new)):
        return None
    return {**annotations, REVISION: str(revision(new))}
