"""The persistent-volume controller and a provisioner: claims become Bound volumes.

Follows https://kubernetes.io/docs/concepts/storage/persistent-volumes/ (#binding,
#reclaiming) and https://kubernetes.io/docs/concepts/storage/dynamic-provisioning/:

* a Pending claim is bound to an ``Available`` volume of its class that fits (the
  smallest); failing that, its class's provisioner makes a PersistentVolume
  ``pvc-<claim uid>`` of the requested size. Both are then bound both ways
  (``spec.claimRef`` on the volume, ``spec.volumeName`` on the claim) and both phases
  become ``Bound``, with the events ``ExternalProvisioning``, ``Provisioning`` and
  ``ProvisioningSucceeded``;
* a class with ``volumeBindingMode: WaitForFirstConsumer`` leaves the claim Pending
  (event ``WaitForFirstConsumer``) until a pod that mounts it is scheduled; the node
  goes to the claim's ``volume.kubernetes.io/selected-node`` annotation, as the
  scheduler writes it, and provisioning follows. (The sandbox's scheduler does not
  hold the pod back meanwhile, as the real one does.);
* a claim naming a class that does not exist stays Pending with a
  ``ProvisioningFailed`` warning, and binds once the class appears; a claim of no
  class (``""``) waits for a volume an administrator creates;
* a new volume nobody claims becomes ``Available``; deleting a bound claim releases
  its volume: reclaim policy ``Delete`` deletes it, ``Retain`` leaves it ``Released``.

Not simulated: the ``kubernetes.io/pvc-protection`` and ``pv-protection`` finalizers,
volume expansion, and access-mode conflicts between pods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.events import NORMAL, WARNING
from reconciler.sandbox.kinds import CLAIMS, CLASSES, PODS, VOLUMES
from reconciler.sandbox.quantity import parse
from reconciler.sandbox.storage import requests_of
from reconciler.sandbox.store import Resource, StoredEvent

SELECTED_NODE = "volume.kubernetes.io/selected-node"
PV_CONTROLLER = "persistentvolume-controller"
_PROVISIONER_ANNOTATIONS = (
    "volume.beta.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/storage-provisioner",
)
Enqueue = Callable[[tuple[Resource, str, str], float], None]


def claims_of(pod: Mapping[str, Any]) -> list[str]:
    """The names of the claims a pod mounts."""
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if isinstance(source, Mapping) and source.get("claimName"):
            names.append(str(source["claimName"]))
    return names


class ClaimBinder:
    """The persistent-volume controller and the provisioner of every class, as one."""

    def __init__(self, plane: ControlPlane, enqueue: Enqueue) -> None:
        self.plane = plane
        self.enqueue = enqueue
        plane.api.store.listeners.append(self._on_event)

    # -- events that concern claims other than the changed object ---------------------

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource == CLAIMS and event.type == "DELETED":
            self._release(event.obj)
        elif (event.resource == CLASSES and event.type == "ADDED") or (
            event.resource == VOLUMES
            and event.type != "DELETED"
            and (event.obj.get("status") or {}).get("phase") == "Available"
        ):
            # a class or a volume that a waiting claim may have been waiting for
            for claim in self.plane.api.store.view(CLAIMS, None):
                if (claim.get("status") or {}).get("phase") == "Pending":
                    self._later(claim)
        elif (
            event.resource == PODS
            and event.type != "DELETED"
            and event.obj.get("spec", {}).get("nodeName")
        ):
            for name in claims_of(event.obj):
                self.enqueue((CLAIMS, event.namespace, name), self.plane.timing.controller_delay)

    def _later(self, claim: Mapping[str, Any]) -> None:
        meta = claim["metadata"]
        key = (CLAIMS, str(meta.get("namespace", "")), str(meta["name"]))
        self.enqueue(key, self.plane.timing.controller_delay)

    # -- a claim ----------------------------------------------------------------------

    def reconcile(self, claim: dict[str, Any]) -> float | None:
        meta, spec = claim["metadata"], claim.get("spec") or {}
        if meta.get("deletionTimestamp") or (claim.get("status") or {}).get("phase") == "Bound":
            return None
        wanted = spec.get("volumeName")
        if wanted:
            volume = self.plane.get(VOLUMES, "", str(wanted))
            if volume is not None and self._fits(volume, claim, by_name=True):
                self._bind(claim, volume)
            return None
        class_name = str(spec.get("storageClassName") or "")
        volume = self._matching_volume(claim, class_name)
        if volume is not None:
            self._bind(claim, volume)
            return None
        if not class_name:
            return None  # no class, no provisioning: waits for a volume an admin makes
        storage_class = self.plane.get(CLASSES, "", class_name)
        if storage_class is None:
            message = f'storageclass.storage.k8s.io "{class_name}" not found'
            self.plane.events.emit(claim, WARNING, "ProvisioningFailed", message, PV_CONTROLLER)
            return None  # a class created later enqueues the claim again
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not (
            meta.get("annotations") or {}
        ).get(SELECTED_NODE):
            node = self._consumer_node(claim)
            if node is None:
                message = "waiting for first consumer to be created before binding"
                self.plane.events.emit(
                    claim, NORMAL, "WaitForFirstConsumer", message, PV_CONTROLLER
                )
                return None  # a pod that mounts it enqueues it again
            selected = self._select_node(claim, node)
            if selected is None:
                return None
            claim = selected
        self._provision(claim, storage_class)
        return None

    def _consumer_node(self, claim: Mapping[str, Any]) -> str | None:
        meta = claim["metadata"]
        for pod in self.plane.api.store.view(PODS, meta.get("namespace", "")):
            node = (pod.get("spec") or {}).get("nodeName")
            if (
                node
                and meta["name"] in claims_of(pod)
                and not pod["metadata"].get("deletionTimestamp")
            ):
                return str(node)
        return None

    def _select_node(self, claim: dict[str, Any], node: str) -> dict[str, Any] | None:
        meta = claim["metadata"]
        annotations = {**(meta.get("annotations") or {}), SELECTED_NODE: node}
        if not self.plane.update(
            CLAIMS,
            claim,
            {**claim, "metadata": {**meta, "annotations": annotations}},
            "kube-scheduler",
        ):
            return None
        return self.plane.get(CLAIMS, str(meta.get("namespace", "")), str(meta["name"]))

    def _provision(self, claim: dict[str, Any], storage_class: Mapping[str, Any]) -> None:
        meta, spec = claim["metadata"], claim.get("spec") or {}
        namespace = str(meta.get("namespace", ""))
        provisioner = str(storage_class.get("provisioner", ""))
        waiting = (
            f"Waiting for a volume to be created either by the external provisioner "
            f"'{provisioner}' or manually by the system administrator. If volume creation "
            "is delayed, please verify that the provisioner is running and correctly registered."
        )
        self.plane.events.emit(claim, NORMAL, "ExternalProvisioning", waiting, PV_CONTROLLER)
        who = f"{provisioner}_sandbox"
        self.plane.events.emit(
            claim,
            NORMAL,
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{namespace}/{meta["name"]}"',
            who,
        )
        name = f"pvc-{meta['uid']}"
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {"pv.kubernetes.io/provisioned-by": provisioner},
            },
            "spec": {
                "capacity": {"storage": requests_of(spec).get("storage", "1Gi")},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
                "storageClassName": storage_class["metadata"]["name"],
                "volumeMode": spec.get("volumeMode", "Filesystem"),
                "hostPath": {"path": f"/var/sandbox/volumes/{name}", "type": ""},
                "claimRef": _claim_ref(claim),
            },
        }
        volume = self.plane.get(VOLUMES, "", name) or self.plane.create(
            VOLUMES, "", body, provisioner
        )
        if volume is None:
            return
        self.plane.events.emit(
            claim, NORMAL, "ProvisioningSucceeded", f"Successfully provisioned volume {name}", who
        )
        self._bind(claim, volume, provisioner)

    def _matching_volume(self, claim: Mapping[str, Any], class_name: str) -> dict[str, Any] | None:
        """The smallest Available volume of the claim's class that fits it (static binding)."""
        fitting = [
            v
            for v in self.plane.api.store.view(VOLUMES, None)
            if str((v.get("spec") or {}).get("storageClassName") or "") == class_name
            and self._fits(v, claim)
        ]
        if not fitting:
            return None
        best = min(
            fitting, key=lambda v: _size((v.get("spec") or {}).get("capacity", {}).get("storage"))
        )
        return self.plane.get(VOLUMES, "", best["metadata"]["name"])

    @staticmethod
    def _fits(
        volume: Mapping[str, Any], claim: Mapping[str, Any], *, by_name: bool = False
    ) -> bool:
        vspec, cspec = volume.get("spec") or {}, claim.get("spec") or {}
        ref = vspec.get("claimRef")
        if isinstance(ref, Mapping):
            if ref.get("name") != claim["metadata"]["name"] or ref.get("namespace") != claim[
                "metadata"
            ].get("namespace"):
                return False
            if ref.get("uid") and ref.get("uid") != claim["metadata"].get("uid"):
                return False
        elif (volume.get("status") or {}).get("phase") not in ("Available", "Pending", None):
            return False
        if volume["metadata"].get("deletionTimestamp"):
            return False
        modes = set(vspec.get("accessModes") or ())
        if not set(cspec.get("accessModes") or ()) <= modes:
            return False
        want = requests_of(cspec).get("storage")
        have = (vspec.get("capacity") or {}).get("storage")
        return by_name or want is None or _size(have) >= _size(want)

    def _bind(self, claim: dict[str, Any], volume: dict[str, Any], provisioner: str = "") -> None:
        """Bind both ways, then both phases to Bound (the PV controller's syncVolume/syncClaim)."""
        ref = _claim_ref(claim)
        vspec = volume.get("spec") or {}
        if (vspec.get("claimRef") or {}).get("uid") != ref["uid"]:
            if not self.plane.update(
                VOLUMES, volume, {**volume, "spec": {**vspec, "claimRef": ref}}, PV_CONTROLLER
            ):
                return
            volume = self.plane.get(VOLUMES, "", volume["metadata"]["name"]) or volume
        self.plane.write_status(VOLUMES, volume, {"phase": "Bound"}, PV_CONTROLLER)
        meta = claim["metadata"]
        annotations = {
            **(meta.get("annotations") or {}),
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
        }
        if provisioner:
            annotations.update(dict.fromkeys(_PROVISIONER_ANNOTATIONS, provisioner))
        spec = {**(claim.get("spec") or {}), "volumeName": volume["metadata"]["name"]}
        body = {**claim, "metadata": {**meta, "annotations": annotations}, "spec": spec}
        if not self.plane.update(CLAIMS, claim, body, PV_CONTROLLER):
            return
        bound = self.plane.get(CLAIMS, str(meta.get("namespace", "")), str(meta["name"]))
        if bound is None:
            return
        status = {
            "phase": "Bound",
            "accessModes": list(vspec.get("accessModes") or ()),
            "capacity": dict(vspec.get("capacity") or {}),
        }
        self.plane.write_status(CLAIMS, bound, status, PV_CONTROLLER)

    def _release(self, claim: Mapping[str, Any]) -> None:
        """A deleted claim's volume: deleted (reclaim policy Delete) or Released (Retain)."""
        uid = claim["metadata"].get("uid")
        for volume in self.plane.api.store.view(VOLUMES, None):
            ref = (volume.get("spec") or {}).get("claimRef") or {}
            if not uid or ref.get("uid") != uid:
                continue
            if (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
                self.plane.delete(VOLUMES, volume)
            else:
                stored = self.plane.get(VOLUMES, "", volume["metadata"]["name"])
                if stored is not None:
                    self.plane.write_status(VOLUMES, stored, {"phase": "Released"}, PV_CONTROLLER)


class VolumeController:
    """A volume nobody claims yet becomes ``Available`` (the PV controller's syncVolume)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def reconcile(self, volume: dict[str, Any]) -> float | None:
        phase = (volume.get("status") or {}).get("phase")
        if phase in (None, "Pending") and not (volume.get("spec") or {}).get("claimRef"):
            self.plane.write_status(VOLUMES, volume, {"phase": "Available"}, PV_CONTROLLER)
        return None


def _claim_ref(claim: Mapping[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    return {
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": "v1",
        "resourceVersion": meta.get("resourceVersion", ""),
    }


def _size(value: Any) -> Decimal:
    """A storage quantity in bytes (0 when it cannot be read)."""
    try:
        return parse(value)[0]
    except ValueError:
        return Decimal(0)
