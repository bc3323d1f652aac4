"""Job migrations: the rendered Job (pure) and the runner interface that executes it.

Rendering follows SPEC section 5: the Job file is rendered like a manifest (same
placeholders, the instance's namespace when it names none, the recommended
labels) and every container gets the ``RECONCILER_*`` environment. The Job must
finish within the migration's ``timeoutSeconds``, so ``activeDeadlineSeconds`` is
capped by it and Kubernetes itself stops a runaway Job.

Executing it (create, watch its pods, delete after success, keep the last failed
one and read its pod's reason and log tail) needs the sandbox's Jobs with pods and
lives behind :class:`JobRunner`, implemented by ``reconciler.kube.KubeJobRunner``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.migrations.context import MigrationContext, job_environment
from reconciler.model.catalog import AppVersion, Instance, Template
from reconciler.model.problems import Problem
from reconciler.render import INSTANCE_LABEL, MANAGED_BY, NAME_LABEL, VERSION_LABEL, render_template

MIGRATION_LABEL = "reconciler.dev/migration"
PHASE_LABEL = "reconciler.dev/migration-phase"


@dataclass(frozen=True)
class JobOutcome:
    """How a migration Job ended, as the runner saw it."""

    succeeded: bool
    duration: float
    message: str = ""  # on failure: the pod's reason and the tail of its log
    timed_out: bool = False


class JobRunner(Protocol):
    """Creates a rendered Job, waits for it and cleans up (``reconciler.kube.KubeJobRunner``).

    Contract: create ``job``; wait at most ``timeout`` seconds for it to succeed
    or fail; delete it after success; keep it after failure and report its pod's
    reason and log tail in ``JobOutcome.message``. Never raises for a failed Job;
    raises only when the cluster cannot be reached.
    """

    def run_job(self, job: Mapping[str, Any], timeout: float) -> JobOutcome: ...


def render_job(
    template: Template,
    instance: Instance,
    version: AppVersion,
    ctx: MigrationContext,
    timeout_seconds: int,
) -> tuple[dict[str, Any] | None, tuple[Problem, ...]]:
    """The Job to create for one migration run, or the problems that prevent it."""
    labels = {MIGRATION_LABEL: ctx.migration, PHASE_LABEL: ctx.phase}
    return render_job_with(
        template,
        instance,
        version,
        labels=labels,
        env=job_environment(ctx),
        timeout_seconds=timeout_seconds,
    )


def render_job_with(
    template: Template,
    instance: Instance,
    version: AppVersion,
    *,
    labels: Mapping[str, str],
    env: Mapping[str, str],
    timeout_seconds: int,
) -> tuple[dict[str, Any] | None, tuple[Problem, ...]]:
    """A Job file rendered like a manifest, with the reconciler's labels and environment.

    Shared by migration Jobs and rollout analysis Jobs (``reconciler.rollout``), which
    differ only in the labels that find them again and the ``RECONCILER_*`` facts
    their containers get; ``activeDeadlineSeconds`` is capped by ``timeout_seconds``
    so Kubernetes itself stops a Job that would outlive its caller's patience.
    """
    rendered, problems = render_template(template.data, instance, version)
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
    "PHASE_LABEL",
    "JobOutcome",
    "JobRunner",
    "render_job",
    "render_job_with",
]
