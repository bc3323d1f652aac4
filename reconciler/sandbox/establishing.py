"""The API server's naming and establishing controllers for CustomResourceDefinitions.

A CRD is created with an empty status. kube-apiserver's naming controller then checks
its names against the other CRDs of its group and writes ``acceptedNames`` with
``NamesAccepted=True`` (reason ``NoConflicts``) and ``Established=False`` (reason
``Installing``); its establishing controller then sets ``Established=True`` (reason
``InitialNamesAccepted``). A name another CRD of the group already accepted gives
``NamesAccepted=False`` (reason ``NameConflict``, message ``"<name>" is already in
use``) and, on a CRD not established yet, ``Established=False`` (reason
``NotAccepted``). That is why ``kubectl wait --for condition=established`` exists:
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#create-a-customresourcedefinition
(the messages are those of apiextensions-apiserver ``pkg/controller/status`` and
``pkg/controller/establish``).
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox import crds
from reconciler.sandbox.apply import now
from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.kinds import CRDS

APISERVER = "kube-apiserver"


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }


class Establishing:
    """Moves each CRD one step along NamesAccepted -> Established per sync."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def reconcile(self, crd: dict[str, Any]) -> float | None:
        if crd["metadata"].get("deletionTimestamp"):
            return None
        status = dict(crd.get("status") or {})
        conditions = {
            str(c.get("type")): c for c in status.get("conditions") or () if isinstance(c, dict)
        }
        established = conditions.get("Established", {}).get("status") == "True"
        conflict = crds.name_conflict(crd, self.plane.api.store.view(CRDS, None))
        wanted = crds.requested_names(crd)
        if conflict:
            if conditions.get("NamesAccepted", {}).get("message") == conflict:
                return None
            conditions["NamesAccepted"] = _condition(
                "NamesAccepted", "False", "NameConflict", conflict
            )
            if not established:
                conditions["Established"] = _condition(
                    "Established", "False", "NotAccepted", "not all names are accepted"
                )
        elif status.get("acceptedNames") != wanted or (
            conditions.get("NamesAccepted", {}).get("status") != "True"
        ):
            status["acceptedNames"] = wanted
            conditions["NamesAccepted"] = _condition(
                "NamesAccepted", "True", "NoConflicts", "no conflicts found"
            )
            if not established:
                conditions["Established"] = _condition(
                    "Established", "False", "Installing", "the initial names have been accepted"
                )
        elif not established:
            conditions["Established"] = _condition(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            )
        else:
            return None
        order = ("NamesAccepted", "Established")
        status["conditions"] = [conditions[t] for t in order if t in conditions] + [
            c for t, c in conditions.items() if t not in order
        ]
        self.plane.write_status(CRDS, crd, status, APISERVER)
        return None
