"""The rollout state machine's hands in the cluster: observe pods, execute batch actions.

``KubeRolloutDriver`` implements ``reconciler.rollout.driver.RolloutDriver`` for one
instance and one pass (docs/ROLLOUTS.md is the design):

- **Deployments, two-Deployment scheme.** ``Prepare`` creates the copy
  ``reconciler-rollout-<name>`` from the *live* Deployment (the ``from`` template,
  every desired replica; selector and template carry ``reconciler.dev/rollout-copy``
  so neither Deployment claims the other's pods). ``ScaleBatch`` applies the
  rendered ``to`` Deployment with ``replicas: target``; ``RetireOld`` scales the copy
  to ``keep``. The copy is created only when absent, so repeating ``Prepare`` after a
  restart never gives it the ``to`` template.
- **StatefulSets, partition.** ``Prepare`` sets the partition to every replica, then
  applies the ``to`` template; ``ScaleBatch`` lowers it to ``replicas - target``.
- **DaemonSets, OnDelete** (``rollout_daemonset``). ``Prepare`` applies the ``to``
  DaemonSet with ``updateStrategy: OnDelete`` (existing pods keep running ``from``);
  ``ScaleBatch`` deletes just enough ``from`` pods, lowest node first, for ``target``
  to run ``to``; ``RetireOld`` has nothing to do.
- ``Finalize`` and ``Rollback`` apply a whole plain render (``to`` or ``from``)
  through the normal apply (inventory, prune), give the partition back, and delete
  the copy once the rendered Deployment has every replica ready again; the same
  apply takes a DaemonSet's ``OnDelete`` away.

Counting is from the cluster, never from the record: pods running ``to`` are those of
the Deployment's ReplicaSets whose template matches the rendered ``to`` template (and,
for a StatefulSet or DaemonSet, the pods on its update revision once its template is
``to``).
Nothing here waits; every action is idempotent. A batch's analysis Job (``RunAnalysis``,
the ``analysis`` of the observation, and its cleanup) is ``rollout_analysis.py``'s.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.kube.client import KubeClient, label_selector
from reconciler.kube.compare import is_subset
from reconciler.kube.rollout import partition_for, release_partition, set_partition
from reconciler.kube.rollout_analysis import RolloutAnalysis
from reconciler.kube.rollout_daemonset import (
    ROLLOUT_ANNOTATION,
    look,
    prepare,
    scale_batch,
    settle_on_delete,
)
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError
from reconciler.rollout import (
    Action,
    Consolidate,
    Finalize,
    Observation,
    Prepare,
    RetireOld,
    Rollback,
    RunAnalysis,
    ScaleBatch,
    Workload,
)

COPY_LABEL = "reconciler.dev/rollout-copy"
COPY_PREFIX = "reconciler-rollout-"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
FAILING_REASONS = frozenset(
    {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"}
)
JsonObject = dict[str, Any]
# Applies a whole plain render (``to`` or ``from``) with inventory and prune.
ApplyRender = Callable[[str], None]


def copy_name(name: str) -> str:
    """``reconciler-rollout-<name>``, kept within 63 characters (a label value and pod prefix)."""
    full = COPY_PREFIX + name
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[:54]}-{digest}"


def workloads_of(objects: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        o
        for o in objects
        if o.get("kind") in WORKLOAD_KINDS and str(o.get("apiVersion")) == "apps/v1"
    ]


def _replicas(obj: Mapping[str, Any] | None) -> int:
    value = ((obj or {}).get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 1


def _status(obj: Mapping[str, Any] | None, key: str) -> int:
    return int(((obj or {}).get("status") or {}).get(key) or 0)


def _template_is(wanted: Mapping[str, Any], live_template: Any) -> bool:
    """The live pod template is the rendered one (server defaults and hash label aside)."""
    return isinstance(live_template, Mapping) and is_subset(wanted, live_template)


def _owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any] | None) -> bool:
    if owner is None:
        return False
    uid = owner["metadata"].get("uid")
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in obj["metadata"].get("ownerReferences") or []
    )


def _match_labels(workload: Mapping[str, Any] | None) -> Mapping[str, str]:
    """The workload's ``selector.matchLabels`` (empty when it has none)."""
    return ((workload or {}).get("spec") or {}).get("selector", {}).get("matchLabels") or {}


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _failing(pod: Mapping[str, Any]) -> str:
    """Why a pod will not become ready by itself ("" when it may)."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return "Failed"
    for container in status.get("containerStatuses") or []:
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason", "")
        if reason in FAILING_REASONS:
            return str(reason)
    return ""


@dataclass
class KubeRolloutDriver:
    """One instance's rollout in one pass; ``objects`` is the placed render of ``to``."""

    client: KubeClient
    instance: str
    namespace: str
    objects: Sequence[Mapping[str, Any]]
    from_version: str
    to_version: str
    apply_render: ApplyRender
    instance_digest: str = ""
    # how the rollout names itself on what it writes (``6.5.0 -> 6.6.0``); ``from`` and
    # ``to`` above may be release keys that carry image builds (SPEC section 8)
    label: str = ""
    analysis: RolloutAnalysis | None = None  # the plan's analysis Jobs, when it names one
    executed: list[str] = field(default_factory=list)  # what this pass did, for the log

    @property
    def workloads(self) -> list[Mapping[str, Any]]:
        return workloads_of(self.objects)

    # --- observe --------------------------------------------------------------------

    def observe(self, desired_version: str, now: datetime) -> Observation:
        workloads: list[Workload] = []
        prepared = True
        helpers = False
        for obj in self.workloads:
            ref = ObjectRef.of(obj)
            if obj["kind"] == "Deployment":
                seen, ready, copy_left = self._observe_deployment(obj, ref)
            elif obj["kind"] == "DaemonSet":
                seen, ready, copy_left = self._observe_daemonset(obj, ref)
            else:
                seen, ready, copy_left = self._observe_statefulset(obj, ref)
            workloads.append(seen)
            prepared = prepared and ready
            helpers = helpers or copy_left
        analysis, why = None, ""
        if self.analysis is not None:
            analysis, why, jobs_left = self.analysis.observe()
            helpers = helpers or jobs_left
        return Observation(
            now=now,
            desired_version=desired_version,
            workloads=tuple(workloads),
            analysis=analysis,
            analysis_message=why,
            helpers_left=helpers,
            prepared=prepared,
            instance_digest=self.instance_digest,
        )

    def _observe_deployment(
        self, obj: Mapping[str, Any], ref: ObjectRef
    ) -> tuple[Workload, bool, bool]:
        desired = _replicas(obj)
        live = self.client.get(ref)
        helper = self.client.get(self._copy_ref(ref))
        template = (obj.get("spec") or {}).get("template") or {}
        sets = self.client.list(
            "apps/v1",
            "ReplicaSet",
            namespace=ref.namespace,
            label_selector=label_selector(_match_labels(live)),
        )
        ours = [rs for rs in sets if _owned_by(rs, live)]
        theirs = [rs for rs in sets if _owned_by(rs, helper)]
        to_sets = [
            rs for rs in ours if _template_is(template, (rs.get("spec") or {}).get("template"))
        ]
        hashes = {
            str((rs["metadata"].get("labels") or {}).get("pod-template-hash", "")) for rs in to_sets
        }
        pods = self._pods(ref.namespace, live, ours)
        moved = [
            p
            for p in pods
            if (p["metadata"].get("labels") or {}).get("pod-template-hash") in hashes
        ]
        updated = sum(_status(rs, "replicas") for rs in to_sets)
        updated_ready = sum(_status(rs, "availableReplicas") for rs in to_sets)
        old = sum(_status(rs, "replicas") for rs in ours if rs not in to_sets)
        old += sum(_status(rs, "replicas") for rs in theirs)
        ready = sum(_status(rs, "availableReplicas") for rs in (*ours, *theirs))
        failing = tuple(f"{p['metadata']['name']}: {why}" for p in moved if (why := _failing(p)))
        prepared = (
            helper is not None
            and _status(helper, "availableReplicas") >= min(desired, _replicas(helper))
            and _replicas(helper) >= desired - updated
        )
        seen = Workload(
            name=f"Deployment/{ref.name}",
            desired=desired,
            updated=updated,
            ready=ready,
            updated_ready=updated_ready,
            old=old,
            failing=failing,
        )
        return seen, prepared, helper is not None

    def _pods(
        self, namespace: str, workload: Mapping[str, Any] | None, owners: list[JsonObject]
    ) -> list[JsonObject]:
        """The pods ``workload`` selects that one of ``owners`` (its ReplicaSets, or the
        StatefulSet itself) controls, but for those being deleted: a terminating pod is on
        its way out for its grace period, not ready, and once its kubelet has killed it
        reads ``Failed``; it counts as neither updated, ready, old nor failing, as a
        ReplicaSet leaves it out of ``status.replicas``
        (https://kubernetes.io/docs/concepts/workloads/pods/pod-termination/)."""
        if workload is None or not owners:
            return []
        labels = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        pods = self.client.list(
            "v1", "Pod", namespace=namespace, label_selector=label_selector(labels)
        )
        return [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and any(_owned_by(p, owner) for owner in owners)
        ]

    def _observe_statefulset(
        self, obj: Mapping[str, Any], ref: ObjectRef
    ) -> tuple[Workload, bool, bool]:
        desired = _replicas(obj)
        live = self.client.get(ref) or {}
        spec, status = live.get("spec") or {}, live.get("status") or {}
        template = (obj.get("spec") or {}).get("template") or {}
        is_to = _template_is(template, spec.get("template"))
        revision = status.get("updateRevision", "")
        pods = self._pods(ref.namespace, live, [live] if live else [])
        moved = [
            p
            for p in pods
            if is_to
            and (p["metadata"].get("labels") or {}).get("controller-revision-hash") == revision
            and status.get("observedGeneration") == live.get("metadata", {}).get("generation")
        ]
        rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
        partition = rolling.get("partition")
        prepared = is_to and isinstance(partition, int) and partition >= desired - len(moved)
        seen = Workload(
            name=f"StatefulSet/{ref.name}",
            desired=desired,
            updated=len(moved),
            ready=sum(1 for p in pods if _ready(p)),
            updated_ready=sum(1 for p in moved if _ready(p)),
            old=len(pods) - len(moved),
            failing=tuple(f"{p['metadata']['name']}: {why}" for p in moved if (why := _failing(p))),
        )
        return seen, prepared, False

    def _observe_daemonset(
        self, obj: Mapping[str, Any], ref: ObjectRef
    ) -> tuple[Workload, bool, bool]:
        """Pods on the update revision once the controller works from ``to``
        (``rollout_daemonset``); desired is the nodes it should run on."""
        view = look(self.client, obj)
        moved = view.updated
        seen = Workload(
            name=f"DaemonSet/{ref.name}",
            desired=view.desired,
            updated=len(moved),
            ready=sum(1 for p in view.pods if _ready(p)),
            updated_ready=sum(1 for p in moved if _ready(p)),
            old=len(view.old),
            failing=tuple(f"{p['metadata']['name']}: {why}" for p in moved if (why := _failing(p))),
        )
        return seen, view.prepared, view.helpers_left

    # --- execute --------------------------------------------------------------------

    def execute(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Prepare):
                self._prepare()
            elif isinstance(action, ScaleBatch):
                self._scale_batch(action)
            elif isinstance(action, RetireOld):
                self._retire(action)
            elif isinstance(action, Finalize):
                self._end(self.to_version)
            elif isinstance(action, Rollback):
                self._end(self.from_version)
            elif isinstance(action, Consolidate):
                self._end(action.version)
            elif isinstance(action, RunAnalysis):
                if self.analysis is None:
                    raise KubeError(f"no analysis Job was rendered for {action.manifest}")
                self.analysis.run(action.batch)
            self._clean_analysis(action)
            self.executed.append(type(action).__name__)

    def _clean_analysis(self, action: Action) -> None:
        """Analysis Jobs whose verdict is used go: earlier batches', all at the end (a
        failed one is kept after a rollback or abandon, to be read)."""
        if self.analysis is None:
            return
        if isinstance(action, ScaleBatch):
            self.analysis.clean(action.batch)
        elif isinstance(action, Finalize):
            self.analysis.clean_all()
        elif isinstance(action, Rollback | Consolidate):
            self.analysis.clean_all(keep_failed=True)

    def _prepare(self) -> None:
        for obj in self.objects:
            if obj in self.workloads:
                continue
            self.client.apply(obj, force=False)
        for obj in self.workloads:
            ref = ObjectRef.of(obj)
            if obj["kind"] == "DaemonSet":
                prepare(self.client, look(self.client, obj), self._label)
                continue
            if obj["kind"] == "StatefulSet":
                live = self.client.get(ref)
                if live is not None and not _template_is(
                    (obj.get("spec") or {}).get("template") or {},
                    (live.get("spec") or {}).get("template"),
                ):
                    set_partition(self.client, ref.namespace, ref.name, _replicas(obj))
                    self.client.apply(self._with_replicas(obj, _replicas(obj)))
                continue
            if self.client.get(self._copy_ref(ref)) is None:
                live = self.client.get(ref)
                if live is not None:
                    self.client.apply(self._copy_of(live, _replicas(obj)))

    def _scale_batch(self, action: ScaleBatch) -> None:
        obj = self._workload(action.workload)
        ref = ObjectRef.of(obj)
        if obj["kind"] == "DaemonSet":
            scale_batch(self.client, obj, action.target)
            return
        if obj["kind"] == "StatefulSet":
            partition = partition_for(_replicas(obj), min(action.target, _replicas(obj)))
            set_partition(self.client, ref.namespace, ref.name, partition)
            return
        self.client.apply(self._with_replicas(obj, action.target), force=True)

    def _retire(self, action: RetireOld) -> None:
        obj = self._workload(action.workload)
        if obj["kind"] != "Deployment":
            return
        ref = ObjectRef.of(obj)
        helper = self.client.get(self._copy_ref(ref))
        if helper is not None:
            self.client.apply(self._resized_copy(helper, max(0, action.keep)), force=True)

    def _end(self, version: str) -> None:
        """The plain render of ``version`` everywhere, then the helpers go."""
        self.apply_render(version)
        for obj in self.workloads:
            ref = ObjectRef.of(obj)
            if obj["kind"] == "StatefulSet":
                release_partition(self.client, ref.namespace, ref.name)
                continue
            if obj["kind"] == "DaemonSet":
                settle_on_delete(self.client, obj)
                continue
            live = self.client.get(ref)
            want = _replicas(live)
            settled = (
                live is not None
                and _status(live, "updatedReplicas") == want
                and _status(live, "availableReplicas") >= want
                and (live.get("status") or {}).get("observedGeneration")
                == live["metadata"].get("generation")
            )
            if settled:
                self.client.delete(self._copy_ref(ref))  # False when already gone

    # --- bodies -----------------------------------------------------------------------

    @property
    def _label(self) -> str:
        """``<from> -> <to>``: the rollout's annotation on what it creates or changes."""
        return self.label or f"{self.from_version} -> {self.to_version}"

    def _workload(self, name: str) -> Mapping[str, Any]:
        kind, _, plain = name.partition("/")
        return next(
            o for o in self.workloads if o["kind"] == kind and o["metadata"]["name"] == plain
        )

    @staticmethod
    def _copy_ref(ref: ObjectRef) -> ObjectRef:
        return ObjectRef(ref.api_version, ref.kind, ref.namespace, copy_name(ref.name))

    @staticmethod
    def _with_replicas(obj: Mapping[str, Any], replicas: int) -> JsonObject:
        body = copy.deepcopy(dict(obj))
        body.setdefault("spec", {})["replicas"] = replicas
        return body

    def _copy_of(self, live: Mapping[str, Any], replicas: int) -> JsonObject:
        """The ``from`` Deployment under the copy's name, label and selector."""
        meta = live["metadata"]
        name = str(meta["name"])
        spec = dict(live.get("spec") or {})
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[COPY_LABEL] = name
        template = copy.deepcopy(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[COPY_LABEL] = name
        copy_meta = {
            "name": copy_name(name),
            "namespace": meta.get("namespace", self.namespace),
            "labels": {**(meta.get("labels") or {}), COPY_LABEL: name},
            "annotations": {ROLLOUT_ANNOTATION: self._label},
        }
        return _copy_body(copy_meta, {**spec, "selector": selector, "template": template}, replicas)

    @staticmethod
    def _resized_copy(helper: Mapping[str, Any], replicas: int) -> JsonObject:
        """The whole copy again with new replicas: an apply that left out its selector or
        template would remove them (server-side apply drops what a manager stops sending)."""
        meta = helper["metadata"]
        annotations = meta.get("annotations") or {}
        copy_meta = {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "labels": dict(meta.get("labels") or {}),
            "annotations": {k: v for k, v in annotations.items() if k == ROLLOUT_ANNOTATION},
        }
        return _copy_body(copy_meta, helper.get("spec") or {}, replicas)


def _copy_body(meta: JsonObject, spec: Mapping[str, Any], replicas: int) -> JsonObject:
    """The copy Deployment the rollout applies: ``meta``, ``replicas`` and the fields of
    ``spec`` it owns (selector, template and the rollout-relevant settings)."""
    body_spec: JsonObject = {"replicas": replicas}
    for key in ("selector", "template", "minReadySeconds", "strategy", "revisionHistoryLimit"):
        if key in spec:
            body_spec[key] = copy.deepcopy(spec[key])
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": body_spec}
