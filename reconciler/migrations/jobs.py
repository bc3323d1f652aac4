"""Job migrations: the rendered Job (pure) and the runner interface that executes it.

Rendering follows SPEC section 5: the Job file is rendered like a manifest (same
placeholders, the instance's namespace when it names none, the recommended
labels) and every container gets the ``RECONCILER_*`` environment. The Job must
finish within the migration's ``timeoutSeconds``, so ``activeDeadlineSeconds`` is
capped by it and Kubernetes itself stops a runaway Job.

Executing it (create, watch its pods, delete after success, keep the last failed
one and read its pod's reason and log tail) needs the sandbox's Jobs with pods and
lives behind :class:`JobRunner`, implemented by ``reconciler.kube.KubeJobRunner``.

A daemon pass never waits for a Job to its end (the project's rule "nothing waits
in line"): it gives Jobs a short grace and leaves one still running for a later
pass, which finds it again by its labels (:func:`same_run`). What a later pass
needs to read off the Job itself is pure and lives here: whether a Job of this run
is still in flight (:func:`in_flight`: then its state check must not run again, the
Job may have half-changed the state) and how long it really took
(:func:`job_span`, from the Job's own timestamps, not from the pass that saw it end).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from reconciler.migrations.context import MigrationContext, job_environment
from reconciler.model.catalog import AppVersion, Instance, Template
from reconciler.model.problems import Problem
from reconciler.render import INSTANCE_LABEL, MANAGED_BY, NAME_LABEL, VERSION_LABEL, render_template

MIGRATION_LABEL = "reconciler.dev/migration"
PHASE_LABEL = "reconciler.dev/migration-phase"
# Set on a failed Job once its failure was reported: the Job is kept for
# ``kubectl describe``, and a later attempt must tell that old verdict (run the
# check again, replace the Job) from one that came while no pass was looking
# (record it: it is this attempt's failure).
REPORTED_ANNOTATION = "reconciler.dev/migration-reported"
# Labels that say which migration run a Job belongs to: a Job of the same name with
# other values is somebody else's and is never deleted or adopted.
OWNER_LABELS = (INSTANCE_LABEL, MIGRATION_LABEL, PHASE_LABEL)


@dataclass(frozen=True)
class JobOutcome:
    """How a migration Job ended, as the runner saw it."""

    succeeded: bool
    duration: float
    message: str = ""  # on failure: the pod's reason and the tail of its log
    # The wait ended before the Job did: it is left running, and the next call with
    # the same Job takes it over. A pass reads that as "still running"; a caller
    # that gave it the whole ``timeoutSeconds`` (``reconciler apply``) as a failure.
    timed_out: bool = False
    # The Job's ``status.startTime`` when ``duration`` comes from the Job's own
    # timestamps (a Job an earlier call started), else "".
    started_at: str = ""


class JobRunner(Protocol):
    """Creates a rendered Job, waits for it and cleans up (``reconciler.kube.KubeJobRunner``).

    Contract: create ``job``; wait at most ``timeout`` seconds for it to succeed
    or fail; delete it after success; keep it after failure and report its pod's
    reason and log tail in ``JobOutcome.message``. Never raises for a failed Job;
    raises only when the cluster cannot be reached.
    """

    def run_job(self, job: Mapping[str, Any], timeout: float) -> JobOutcome: ...


def job_verdict(job: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``("Complete"|"Failed", reason, message)`` once a terminal condition is True.

    https://kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions
    """
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("reason", "")), str(cond.get("message", ""))
    return None


def same_run(existing: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``existing`` was created for the same migration run as ``job`` (its labels)."""

    def owner(obj: Mapping[str, Any]) -> tuple[Any, ...]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return tuple(labels.get(key) for key in OWNER_LABELS)

    return owner(existing) == owner(job)


def in_flight(existing: Mapping[str, Any] | None, job: Mapping[str, Any]) -> bool:
    """Whether ``existing`` is a Job of ``job``'s run whose end nobody has reported yet.

    Running; or Complete (a succeeded Job is deleted as soon as its success is
    reported); or Failed without :data:`REPORTED_ANNOTATION`. Such a Job is this
    attempt's: its verdict is awaited or taken, and the state check is not run again.
    """
    if existing is None or not same_run(existing, job):
        return False
    verdict = job_verdict(existing)
    if verdict is None or verdict[0] == "Complete":
        return True
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    return REPORTED_ANNOTATION not in annotations


def job_span(job: Mapping[str, Any]) -> tuple[str, float] | None:
    """``(startTime, seconds)`` of an ended Job, from its own status; None if unknown.

    Kubernetes sets ``status.startTime`` when the Job controller starts the Job and
    ``status.completionTime`` only when it succeeds
    (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/#JobStatus);
    a failed Job's end is its ``Failed`` condition's ``lastTransitionTime``. Both are
    RFC 3339 with whole seconds, so the span is exact to a second.
    """
    status = job.get("status") or {}
    start = status.get("startTime")
    end = status.get("completionTime")
    if not end:
        for cond in status.get("conditions") or ():
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                end = cond.get("lastTransitionTime")
    began, ended = _timestamp(start), _timestamp(end)
    if began is None or ended is None:
        return None
    return str(start), max(0.0, (ended - began).total_seconds())


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def render_job(
    template: Template,
    instance: Instance,
    version: AppVersion,
    ctx: MigrationContext,
    timeout_seconds: int,
    *,
    images: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, tuple[Problem, ...]]:
    """The Job to create for one migration run, or the problems that prevent it.

    ``images``: the version's images with their pinned builds (SPEC section 8).
    """
    labels = {MIGRATION_LABEL: ctx.migration, PHASE_LABEL: ctx.phase}
    return render_job_with(
        template,
        instance,
        version,
        labels=labels,
        env=job_environment(ctx),
        timeout_seconds=timeout_seconds,
        images=images,
    )


def render_job_with(
    template: Template,
    instance: Instance,
    version: AppVersion,
    *,
    labels: Mapping[str, str],
    env: Mapping[str, str],
    timeout_seconds: int,
    images: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, tuple[Problem, ...]]:
    """A Job file rendered like a manifest, with the reconciler's labels and environment.

    Shared by migration Jobs and rollout analysis Jobs (``reconciler.rollout``), which
    differ only in the labels that find them again and the ``RECONCILER_*`` facts
    their containers get; ``activeDeadlineSeconds`` is capped by ``timeout_seconds``
    so Kubernetes itself stops a Job that would outlive its caller's patience.
    """
    rendered, problems = render_template(template.data, instance, version, images=images)
    if problems:
        return None, problems
    job: dict[str, Any] = copy.deepcopy(rendered)
    meta = job.setdefault("metadata", {})
    meta.setdefault("namespace", instance.namespace)
    meta["labels"] = {
        **(meta.get("labels") or {}),
        MANAGED_BY: "reconciler",
        INSTANCE_LABEL: instance.name,
        NAME_LABEL: version.app,
        VERSION_LABEL: version.key,
        **labels,
    }
    spec = job.setdefault("spec", {})
    deadline = spec.get("activeDeadlineSeconds")
    if not isinstance(deadline, int) or deadline > timeout_seconds:
        spec["activeDeadlineSeconds"] = timeout_seconds
    pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
    for key in ("initContainers", "containers"):
        for container in pod_spec.get(key) or ():
            if isinstance(container, dict):
                container["env"] = _with_env(container.get("env") or [], env)
    return job, ()


def _with_env(existing: list[Any], env: Mapping[str, str]) -> list[Any]:
    """``existing`` without our names, then ours: the reconciler's facts win."""
    kept = [e for e in existing if not (isinstance(e, dict) and e.get("name") in env)]
    return kept + [{"name": k, "value": v} for k, v in env.items()]


__all__ = [
    "MIGRATION_LABEL",
    "OWNER_LABELS",
    "PHASE_LABEL",
    "REPORTED_ANNOTATION",
    "JobOutcome",
    "JobRunner",
    "in_flight",
    "job_span",
    "job_verdict",
    "render_job",
    "render_job_with",
    "same_run",
]
