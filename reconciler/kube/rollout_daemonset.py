"""DaemonSets in batches: ``OnDelete`` for the length of the rollout, pods deleted per batch.

A DaemonSet has no partition and no replica count to split between two objects, but
its ``OnDelete`` strategy replaces a pod only when someone deletes it, and then from
the current template (https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/).
So ``Prepare`` applies the ``to`` DaemonSet with ``updateStrategy: {type: OnDelete}``
(existing pods keep running ``from``), each ``ScaleBatch`` deletes just enough
``from`` pods, lowest node first, for ``target`` pods to run ``to``, and the end of
the rollout applies the plain render again.

**Who owns the strategy.** The rollout's DaemonSet is applied by the engine's own
field manager (``reconciler``), as the whole rendered object with the strategy
replaced and the annotation ``reconciler.dev/rollout: <from> -> <to>`` added. The
plain render applied at the end by the same manager therefore takes both away in one
write: server-side apply removes a field its manager stops sending when nobody else
owns it, and the API server then defaults ``type`` back to ``RollingUpdate``
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
A second manager (as for a StatefulSet's partition) would not do here: an apply of a
render that names ``RollingUpdate`` would conflict with it, and giving the field back
first would let the controller roll the ``to`` template over every node during a
rollback. In one write, a rollback changes the template back to ``from`` together
with the strategy, and the controller's own rolling update moves every ``to`` pod
back.

**Which pods run ``to``.** A DaemonSet's status has no ``updateRevision``; like the
controller (kubernetes/kubernetes pkg/controller/daemon/update.go ``constructHistory``
and ``Match``; ``kubectl rollout history`` does the same), the update revision is the
ControllerRevision owned by the DaemonSet whose stored template is the live one (the
newest when several are), and a pod is updated when its ``controller-revision-hash``
label is that revision's hash (util/daemonset_util.go ``IsPodUpdated``). Nothing
counts as ``to`` until the controller has observed the ``to`` template
(``status.observedGeneration``), since until then it would recreate a deleted pod
from the old one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.kube.client import KubeClient, label_selector
from reconciler.kube.compare import is_subset
from reconciler.model.changeset import ObjectRef

REVISION_LABEL = "controller-revision-hash"
ROLLOUT_ANNOTATION = "reconciler.dev/rollout"
ON_DELETE = "OnDelete"
JsonObject = dict[str, Any]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj["metadata"].get("labels") or {}


def _controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    uid = owner["metadata"].get("uid")
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in obj["metadata"].get("ownerReferences") or []
    )


def _same_template(a: Any, b: Any) -> bool:
    """Equal templates, forgiving what encoding adds (nulls, empty maps, ``$patch``)."""
    if isinstance(b, Mapping):
        b = {k: v for k, v in b.items() if k != "$patch"}
    return is_subset(a, b) and is_subset(b, a)


def _node_of(pod: Mapping[str, Any]) -> str:
    """The node a daemon pod is for: ``spec.nodeName`` once bound, else the node its
    controller pinned it to by affinity (``GetTargetNodeName``)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and len(expr.get("values") or []) == 1:
                return str(expr["values"][0])
    return ""


@dataclass(frozen=True)
class DaemonSetView:
    """One DaemonSet as the rollout sees it: its live object, update revision and pods."""

    live: JsonObject | None
    rendered: Mapping[str, Any]  # the ``to`` DaemonSet of the render
    digest: str = ""  # the update revision's hash, "" when not known yet
    pods: list[JsonObject] = field(default_factory=list)  # alive pods it controls
    terminating: int = 0

    @property
    def desired(self) -> int:
        return int(((self.live or {}).get("status") or {}).get("desiredNumberScheduled") or 0)

    @property
    def strategy(self) -> str:
        spec = (self.live or {}).get("spec") or {}
        return str((spec.get("updateStrategy") or {}).get("type") or "")

    @property
    def marked(self) -> bool:
        """``OnDelete`` set by the rollout (the annotation goes with the plain render)."""
        meta = (self.live or {}).get("metadata") or {}
        return self.strategy == ON_DELETE and ROLLOUT_ANNOTATION in (meta.get("annotations") or {})

    @property
    def observed(self) -> bool:
        live = self.live or {}
        generation = (live.get("metadata") or {}).get("generation")
        return bool(live) and (live.get("status") or {}).get("observedGeneration") == generation

    @property
    def is_to(self) -> bool:
        """The controller works from the ``to`` template and its revision is known."""
        wanted = (self.rendered.get("spec") or {}).get("template") or {}
        live = ((self.live or {}).get("spec") or {}).get("template")
        return (
            self.observed
            and bool(self.digest)
            and isinstance(live, Mapping)
            and is_subset(wanted, live)
        )

    @property
    def updated(self) -> list[JsonObject]:
        if not self.is_to:
            return []
        return [p for p in self.pods if _labels(p).get(REVISION_LABEL) == self.digest]

    @property
    def old(self) -> list[JsonObject]:
        moved = {id(p) for p in self.updated}
        return [p for p in self.pods if id(p) not in moved]

    @property
    def replacing(self) -> int:
        """Nodes whose pod is gone or terminating: the controller is creating a new one."""
        return max(0, self.desired - len(self.pods))

    @property
    def stale(self) -> list[JsonObject]:
        """Pods a render's own ``OnDelete`` would never replace once the rollout ends.

        After the plain render of the version the rollout ends on (``from`` after a
        rollback, either one after an abandon) and once the controller has observed
        it, pods on another revision would stay forever under ``OnDelete``; they are
        what the repeated final action deletes. Nothing is stale while the rollout's
        own ``OnDelete`` is on, or before the controller has observed the template
        (it would recreate a deleted pod from the old one).
        """
        if self.marked or self.strategy != ON_DELETE or not self.observed or not self.digest:
            return []
        return [p for p in self.pods if _labels(p).get(REVISION_LABEL) != self.digest]

    @property
    def helpers_left(self) -> bool:
        """The rollout's ``OnDelete`` is on, or pods are left for a rollback to delete."""
        return self.marked or bool(self.stale)

    @property
    def prepared(self) -> bool:
        """``OnDelete`` with the ``to`` template observed (or nothing left to move)."""
        return self.is_to and (self.strategy == ON_DELETE or not self.old)


def look(client: KubeClient, rendered: Mapping[str, Any]) -> DaemonSetView:
    """The live DaemonSet of ``rendered``, its update revision's hash and its pods."""
    ref = ObjectRef.of(rendered)
    live = client.get(ref)
    if live is None:
        return DaemonSetView(None, rendered)
    spec = live.get("spec") or {}
    revisions = [
        r
        for r in client.list("apps/v1", "ControllerRevision", namespace=ref.namespace)
        if _controlled_by(r, live)
        and _same_template(
            spec.get("template"), ((r.get("data") or {}).get("spec") or {}).get("template")
        )
    ]
    digest = ""
    if revisions:
        newest = max(revisions, key=lambda r: int(r.get("revision") or 0))
        name = str(newest["metadata"]["name"])
        digest = str(_labels(newest).get(REVISION_LABEL) or name.removeprefix(f"{ref.name}-"))
    labels = (spec.get("selector") or {}).get("matchLabels") or {}
    selector = label_selector(labels)
    listed = client.list("v1", "Pod", namespace=ref.namespace, label_selector=selector)
    mine = [p for p in listed if _controlled_by(p, live)]
    alive = [p for p in mine if not p["metadata"].get("deletionTimestamp")]
    return DaemonSetView(live, rendered, digest, alive, len(mine) - len(alive))


def prepare(client: KubeClient, view: DaemonSetView, label: str) -> None:
    """``OnDelete`` and the ``to`` template in one write, unless nothing is left to move.

    A DaemonSet whose live template already is ``to`` with every pod on it (the
    version did not change it) is left as it is, so the plain render at the end has
    nothing of the rollout's to take away.
    """
    if view.live is None:
        client.apply(view.rendered)  # new in ``to``: every pod it gets runs ``to``
        return
    if view.marked or not view.prepared:
        client.apply(on_delete(view.rendered, label))


def on_delete(rendered: Mapping[str, Any], label: str) -> JsonObject:
    """The rendered DaemonSet with ``updateStrategy.type: OnDelete`` and the rollout's
    annotation (``label`` is ``<from> -> <to>``)."""
    body = copy.deepcopy(dict(rendered))
    meta = body.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ROLLOUT_ANNOTATION: label}
    spec = body.setdefault("spec", {})
    spec["updateStrategy"] = {**(spec.get("updateStrategy") or {}), "type": ON_DELETE}
    return body


def to_delete(view: DaemonSetView, target: int) -> list[JsonObject]:
    """The ``from`` pods to delete so that ``target`` pods run ``to``, lowest node first.

    Pods already being replaced (deleted, or their node waiting for its new pod)
    count as ``to``: the controller recreates them from the ``to`` template, so
    repeating a batch after a restart deletes nothing more. Nothing is deleted
    before the controller has observed ``OnDelete`` and the ``to`` template.
    """
    if not view.is_to or view.strategy != ON_DELETE:
        return []
    need = min(target, view.desired) - len(view.updated) - view.replacing
    ordered = sorted(view.old, key=lambda p: (_node_of(p), str(p["metadata"]["name"])))
    return ordered[: max(0, need)]


def scale_batch(client: KubeClient, rendered: Mapping[str, Any], target: int) -> None:
    view = look(client, rendered)
    for pod in to_delete(view, target):
        meta = pod["metadata"]
        ref = ObjectRef("v1", "Pod", str(meta.get("namespace", "")), str(meta["name"]))
        client.delete(ref, uid=str(meta.get("uid", "")))


def settle_on_delete(client: KubeClient, rendered: Mapping[str, Any]) -> None:
    """After the plain render: a render that itself says ``OnDelete`` would leave the
    pods of the other version running forever, so they are deleted and the controller
    recreates them from the rendered template. The controller may not have observed
    the template yet; then the pods show as ``stale`` (helpers left) on a later pass,
    and the repeated final action deletes them."""
    for pod in look(client, rendered).stale:
        meta = pod["metadata"]
        ref = ObjectRef("v1", "Pod", str(meta.get("namespace", "")), str(meta["name"]))
        client.delete(ref, uid=str(meta.get("uid", "")))
