"""The StatefulSet controller: ordinal pods, ControllerRevisions, partitioned rolling updates.

Follows https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/: pods are
``<name>-<ordinal>``; each template is a ControllerRevision ``<name>-<hash>`` and every
pod carries the ``controller-revision-hash`` of the revision it was made from. With
``OrderedReady`` (the default) pods are created lowest ordinal first, each once the one
before is Ready, and removed highest first; ``Parallel`` does both at once (creating
at most a burst of pods a sync, as the ReplicaSet controller does). A
``RollingUpdate`` replaces pods from the highest ordinal down to
``rollingUpdate.partition``, one at a time and only while every pod is Ready, so a
revision that never becomes ready stops at the first pod it reaches; ``OnDelete``
replaces a pod only when someone deletes it. ``currentRevision`` becomes the update
revision once every pod runs it. Each pod mounts claims ``<template>-<name>-<ordinal>``
made from ``volumeClaimTemplates`` before the pod (:func:`ensure_claims`).

A pod being deleted gracefully (Terminating) keeps its name until it is gone: the
controller recreates that ordinal only then, and with ``OrderedReady`` it does nothing
else while any of its pods terminates ("waiting for Pod to be terminated",
pkg/controller/statefulset/stateful_set_control.go). ``status.replicas`` still counts
a terminating pod; the current and updated counts do not (``computeReplicaStatus``).
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.copying import clone
from reconciler.sandbox.kinds import CLAIMS, PODS, REVISIONS, STATEFULSETS
from reconciler.sandbox.owned import (
    alive,
    owned,
    owner_reference,
    pod_from_template,
    replicas_of,
    safe_hash,
    semantic,
)
from reconciler.sandbox.replicasets import BURST_REPLICAS, ReadySince

REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def revision_hash(template: dict[str, Any]) -> str:
    """The hash naming ``template``'s ControllerRevision (``<owner>-<hash>``)."""
    return safe_hash(semantic(template))


def ensure_revision(
    plane: ControlPlane,
    owner: dict[str, Any],
    template: dict[str, Any],
    hash_label: str = "controller.kubernetes.io/hash",
) -> str:
    """The ControllerRevision holding ``template`` for ``owner`` (created when missing).

    As the StatefulSet and DaemonSet controllers do (kubernetes/kubernetes
    pkg/controller/history and pkg/controller/daemon/update.go ``constructHistory``):
    the revision is named ``<owner>-<hash>`` and labelled with the hash under
    ``hash_label``, and a template that returns to an earlier revision (a rollback)
    renumbers that revision as the newest, which is what ``kubectl rollout history``
    lists last.
    """
    meta = owner["metadata"]
    namespace = meta.get("namespace", "")
    digest = revision_hash(template)
    name = f"{meta['name']}-{digest}"
    revisions = owned(plane.list(REVISIONS, namespace), owner)
    newest = max((int(r.get("revision") or 0) for r in revisions), default=0)
    found = next((r for r in revisions if r["metadata"]["name"] == name), None)
    if found is not None:
        if int(found.get("revision") or 0) < newest:
            plane.update(REVISIONS, found, {**found, "revision": newest + 1})
        return name
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    body = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, hash_label: digest},
            "ownerReferences": [owner_reference(owner)],
        },
        "data": {"spec": {"template": {"$patch": "replace", **clone(template)}}},
        "revision": newest + 1,
    }
    plane.create(REVISIONS, namespace, body)
    return name


def template_of(plane: ControlPlane, owner: dict[str, Any], revision: str) -> dict[str, Any]:
    """The pod template stored in one of ``owner``'s ControllerRevisions."""
    found = plane.get(REVISIONS, owner["metadata"].get("namespace", ""), revision)
    if found is None:
        return dict(owner["spec"].get("template") or {})
    stored = dict(((found.get("data") or {}).get("spec") or {}).get("template") or {})
    stored.pop("$patch", None)
    return stored


def ensure_claims(plane: ControlPlane, sts: dict[str, Any], ordinal: int) -> list[dict[str, Any]]:
    """Create the pod's claims from ``volumeClaimTemplates`` (those missing); its volumes.

    Each is ``<template>-<set>-<ordinal>``, labelled with the template's labels and the
    set's selector, and outlives the set and the pod unless
    ``persistentVolumeClaimRetentionPolicy.whenDeleted`` is ``Delete`` (the default is
    ``Retain``): then the set owns it and the garbage collector deletes it with the set
    (https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#persistentvolumeclaim-retention).
    """
    meta, spec = sts["metadata"], sts.get("spec") or {}
    namespace = str(meta.get("namespace", ""))
    selector = dict((spec.get("selector") or {}).get("matchLabels") or {})
    policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    volumes = []
    for template in spec.get("volumeClaimTemplates") or ():
        tmeta = template.get("metadata") or {}
        claim = f"{tmeta.get('name')}-{meta['name']}-{ordinal}"
        volumes.append(
            {"name": str(tmeta.get("name")), "persistentVolumeClaim": {"claimName": claim}}
        )
        if plane.api.store.view_one(CLAIMS, namespace, claim) is not None:
            continue
        claim_meta: dict[str, Any] = {
            "name": claim,
            "namespace": namespace,
            "labels": {**(tmeta.get("labels") or {}), **selector},
        }
        if tmeta.get("annotations"):
            claim_meta["annotations"] = dict(tmeta["annotations"])
        if policy.get("whenDeleted") == "Delete":
            claim_meta["ownerReferences"] = [{**owner_reference(sts), "controller": False}]
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": claim_meta,
            "spec": clone(dict(template.get("spec") or {})),
        }
        plane.create(CLAIMS, namespace, body)
    return volumes


def _revision_of(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(REVISION_LABEL, ""))


class StatefulSetController:
    def __init__(self, plane: ControlPlane, ready_since: ReadySince) -> None:
        self.plane = plane
        self.ready_since = ready_since

    def reconcile(self, sts: dict[str, Any]) -> float | None:
        if not alive(sts):
            return None
        spec = sts.get("spec") or {}
        meta = sts["metadata"]
        replicas = replicas_of(spec)
        update_revision = ensure_revision(self.plane, sts, spec.get("template") or {})
        current_revision = str((sts.get("status") or {}).get("currentRevision") or update_revision)
        strategy = spec.get("updateStrategy") or {}
        on_delete = strategy.get("type") == "OnDelete"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        owned_pods = self.plane.pods_of(sts)
        pods = {p["metadata"]["name"]: p for p in owned_pods if alive(p)}
        held = {p["metadata"]["name"] for p in owned_pods if not alive(p)}
        # a sync looks at the ordinals it may act on: the pods there, and at most a burst
        # of missing ones beyond them (a set short of pods neither replaces one nor is
        # ready, whichever missing ordinals it sees), so ``replicas: 2147483647`` costs a
        # burst a sync, not a dict of every ordinal
        placed = sum(
            1 for p in pods.values() if (o := self._ordinal(sts, p)) is not None and o < replicas
        )
        window = min(replicas, placed + BURST_REPLICAS)
        by_ordinal = {i: pods.get(f"{meta['name']}-{i}") for i in range(window)}
        if parallel or not held:
            acted = self._create_missing(
                sts, by_ordinal, held, current_revision, update_revision, partition, on_delete
            )
            if not acted:
                acted = self._scale_down(sts, pods, replicas, parallel)
            if not acted and not on_delete:
                self._replace_one(by_ordinal, update_revision, partition)
        pods_now = [p for p in self.plane.pods_of(sts) if self._ordinal(sts, p) is not None]
        self.plane.write_status(
            STATEFULSETS, sts, self._status(sts, pods_now, current_revision, update_revision)
        )
        return None

    @staticmethod
    def _ordinal(sts: dict[str, Any], pod: dict[str, Any]) -> int | None:
        prefix = f"{sts['metadata']['name']}-"
        name = str(pod["metadata"]["name"])
        suffix = name[len(prefix) :] if name.startswith(prefix) else ""
        return int(suffix) if suffix.isdigit() else None

    def _create_missing(
        self,
        sts: dict[str, Any],
        by_ordinal: dict[int, dict[str, Any] | None],
        held: set[str],
        current: str,
        update: str,
        partition: int,
        on_delete: bool,
    ) -> bool:
        """Create missing ordinals; ``held`` names are still taken by terminating pods."""
        parallel = sts["spec"].get("podManagementPolicy") == "Parallel"
        created = 0
        for ordinal in sorted(by_ordinal):
            pod = by_ordinal[ordinal]
            if f"{sts['metadata']['name']}-{ordinal}" in held:
                continue  # recreated once the old pod is gone
            if pod is not None:
                if not parallel and self.ready_since(pod) is None:
                    return created > 0  # OrderedReady: wait for this one before the next
                continue
            revision = current if (on_delete is False and ordinal < partition) else update
            self._create_pod(sts, ordinal, revision)
            created += 1
            if not parallel or created == BURST_REPLICAS:
                return True  # Parallel: the pods' events bring the set back for the rest
        return created > 0

    def _create_pod(self, sts: dict[str, Any], ordinal: int, revision: str) -> None:
        meta = sts["metadata"]
        name = f"{meta['name']}-{ordinal}"
        template = template_of(self.plane, sts, revision)
        volumes = ensure_claims(self.plane, sts, ordinal)
        if volumes:
            mounted = {str(v.get("name")) for v in volumes}
            kept = [
                v
                for v in (template.get("spec") or {}).get("volumes") or ()
                if v.get("name") not in mounted
            ]
            volumes = [*kept, *volumes]
        body = pod_from_template(
            sts,
            template,
            name,
            labels={
                REVISION_LABEL: revision,
                POD_NAME_LABEL: name,
                POD_INDEX_LABEL: str(ordinal),
            },
            spec={
                "hostname": name,
                "subdomain": str(sts["spec"].get("serviceName", "")),
                **({"volumes": volumes} if volumes else {}),
            },
        )
        self.plane.create(PODS, meta.get("namespace", ""), body)

    def _scale_down(
        self, sts: dict[str, Any], pods: dict[str, dict[str, Any]], replicas: int, parallel: bool
    ) -> bool:
        extra = sorted(
            (o, p)
            for p in pods.values()
            if (o := self._ordinal(sts, p)) is not None and o >= replicas
        )
        if not extra:
            return False
        if parallel:
            for _, pod in extra:
                self.plane.delete(PODS, pod)
        else:
            self.plane.delete(PODS, extra[-1][1])  # highest ordinal first, one at a time
        return True

    def _replace_one(
        self, by_ordinal: dict[int, dict[str, Any] | None], update: str, partition: int
    ) -> None:
        """Delete the highest outdated pod at or above the partition, if all are Ready."""
        if any(p is None or self.ready_since(p) is None for p in by_ordinal.values()):
            return
        for ordinal in sorted(by_ordinal, reverse=True):
            pod = by_ordinal[ordinal]
            if ordinal >= partition and pod is not None and _revision_of(pod) != update:
                self.plane.delete(PODS, pod)  # recreated at the update revision next sync
                return

    def _status(
        self, sts: dict[str, Any], pods: list[dict[str, Any]], current: str, update: str
    ) -> dict[str, Any]:
        spec = sts.get("spec") or {}
        replicas = replicas_of(spec)
        min_ready = float(spec.get("minReadySeconds") or 0)
        clock = self.plane.clock()
        live = [p for p in pods if alive(p)]
        updated = sum(1 for p in live if _revision_of(p) == update)
        if updated == replicas and len(pods) == replicas:
            current = update
        ready = [since for p in live if (since := self.ready_since(p)) is not None]
        status: dict[str, Any] = {
            "observedGeneration": int(sts["metadata"].get("generation", 1)),
            "replicas": len(pods),
        }
        counts = {
            "readyReplicas": len(ready),
            "currentReplicas": sum(1 for p in live if _revision_of(p) == current),
            "updatedReplicas": updated,
        }
        status.update({k: v for k, v in counts.items() if v})
        status["availableReplicas"] = sum(1 for since in ready if clock - since >= min_ready)
        status.update(currentRevision=current, updateRevision=update, collisionCount=0)
        return status
