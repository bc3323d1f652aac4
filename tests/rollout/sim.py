"""A pure model of the two-Deployment scheme, to check the state machine's invariants.

It stands in for the kube driver and the Deployment/ReplicaSet controllers only in
these property tests; the driver against the sandbox is tested in tests/kube. It
models what the invariants depend on: pods of two versions, readiness arriving
when the test says so, the rendered Deployment replacing its own old-template
pods only as new ones become ready (maxUnavailable 0), the copy serving ``from``,
and a driver that deletes the copy only once the rendered one is fully ready.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

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


@dataclass
class Pod:
    owner: str  # "web" | "copy"
    version: str
    ready: bool = False


@dataclass
class Cluster:
    """One Deployment ``web`` with ``desired`` replicas running ``from_v`` and ready."""

    desired: int
    from_v: str
    to_v: str
    bad: bool = False  # pods of ``to`` crash-loop
    analysis_result: str = "succeeded"
    web_version: str = ""
    web_replicas: int = 0
    copy_replicas: int | None = None  # None: no copy
    pods: list[Pod] = field(default_factory=list)
    analysis: str | None = None
    finalizing: str | None = None  # version the driver converges on (Finalize/Rollback)

    def __post_init__(self) -> None:
        self.web_version = self.from_v
        self.web_replicas = self.desired
        self.pods = [Pod("web", self.from_v, ready=True) for _ in range(self.desired)]

    # ------------------------------------------------------------ driver

    def apply(self, action: Action) -> None:
        if isinstance(action, Prepare):
            self.copy_replicas = self.desired  # absolute: every from replica
        elif isinstance(action, ScaleBatch):
            if not self._web_is_to() or action.target != self.web_replicas:
                self.analysis = None  # a new batch runs its own analysis Job
            self.web_version = self.to_v
            self.web_replicas = action.target
        elif isinstance(action, RetireOld):
            if self.copy_replicas is not None:
                self.copy_replicas = min(self.copy_replicas, action.keep)
        elif isinstance(action, RunAnalysis):
            if self.analysis is None:
                self.analysis = "running"
        elif isinstance(action, Finalize):
            self._converge(self.to_v)
        elif isinstance(action, Rollback):
            self._converge(self.from_v)
        elif isinstance(action, Consolidate):
            self._converge(action.version)

    def _web_is_to(self) -> bool:
        """Whether the rendered Deployment already carries the ``to`` template."""
        return self.web_version == self.to_v

    def _converge(self, version: str) -> None:
        self.finalizing = version
        if version == self.from_v and self.copy_replicas is not None:
            self.copy_replicas = self.desired  # serve from at once while web turns back
        self.web_version = version
        self.web_replicas = self.desired

    # ------------------------------------------------------------ controllers

    def tick(self, become_ready: int) -> None:
        """Controllers act; up to ``become_ready`` pending healthy pods become ready."""
        for pod in self.pods:
            if not pod.ready and become_ready > 0 and not (self.bad and pod.version == self.to_v):
                pod.ready = True
                become_ready -= 1
        if self.analysis == "running":
            self.analysis = self.analysis_result
        self._reconcile_web()
        self._reconcile_copy()
        if self.finalizing is not None and self.copy_replicas is not None:
            web_ready = [p for p in self._owned("web") if p.ready and p.version == self.web_version]
            if len(web_ready) >= self.desired:
                self.copy_replicas = None
                self.pods = [p for p in self.pods if p.owner != "copy"]

    def _owned(self, owner: str) -> list[Pod]:
        return [p for p in self.pods if p.owner == owner]

    def _reconcile_web(self) -> None:
        current = [p for p in self._owned("web") if p.version == self.web_version]
        stale = [p for p in self._owned("web") if p.version != self.web_version]
        while len(current) < self.web_replicas:
            pod = Pod("web", self.web_version)
            current.append(pod)
            self.pods.append(pod)
        for pod in sorted(current, key=lambda p: p.ready)[: len(current) - self.web_replicas]:
            self.pods.remove(pod)
            current.remove(pod)
        # old-template pods go only as new ones are ready (maxUnavailable 0)
        keep = max(0, self.web_replicas - sum(p.ready for p in current))
        for pod in sorted(stale, key=lambda p: p.ready)[: max(0, len(stale) - keep)]:
            self.pods.remove(pod)

    def _reconcile_copy(self) -> None:
        copies = self._owned("copy")
        want = self.copy_replicas or 0
        while len(copies) < want:
            pod = Pod("copy", self.from_v)
            copies.append(pod)
            self.pods.append(pod)
        for pod in sorted(copies, key=lambda p: p.ready)[: max(0, len(copies) - want)]:
            self.pods.remove(pod)

    # ------------------------------------------------------------ observation

    def observe(self, now: datetime, desired_version: str, digest: str = "d1") -> Observation:
        to_pods = [p for p in self.pods if p.version == self.to_v]
        from_pods = [p for p in self.pods if p.version == self.from_v]
        copy_ready = sum(p.ready for p in self._owned("copy"))
        failing = tuple(f"web-{i}: CrashLoopBackOff" for i, _ in enumerate(to_pods) if self.bad)
        workload = Workload(
            name="Deployment/web",
            desired=self.desired,
            updated=len(to_pods),
            ready=sum(p.ready for p in self.pods),
            updated_ready=sum(p.ready for p in to_pods),
            old=len(from_pods),
            failing=failing,
        )
        return Observation(
            now=now,
            desired_version=desired_version,
            workloads=(workload,),
            analysis=self.analysis,
            helpers_left=self.copy_replicas is not None,
            prepared=self.copy_replicas is not None and copy_ready >= self.desired,
            instance_digest=digest,
        )

    def ready(self) -> int:
        return sum(p.ready for p in self.pods)

    def versions(self) -> set[str]:
        return {p.version for p in self.pods}
