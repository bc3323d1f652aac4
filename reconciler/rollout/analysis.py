"""The analysis Job of a batch (SPEC section 4): its name, labels and environment. Pure.

``rollout.analysis`` names a Job file of the version rolled to; after each batch is
ready (and has baked for ``pauseSeconds``) the rollout runs it once, and the batch
is verified only when it succeeded. The file is rendered like a migration Job (the
same placeholders, ``reconciler.migrations.render_job_with``) under a name the
reconciler chooses, so a restarted daemon finds the Job it started instead of
starting another:

- ``<instance>-analysis-<batch>-<key>``, where ``key`` is a short hash of the
  rollout (``from -> to`` and its start time): a later attempt at the same versions
  (after the instance file changed) never mistakes the failed Job an earlier attempt
  left for inspection for its own;
- labelled ``reconciler.dev/instance``, ``reconciler.dev/rollout-analysis: <key>``
  and ``reconciler.dev/rollout-batch``, so the driver lists an instance's analysis
  Jobs with one request and cleans them up;
- every container gets ``RECONCILER_CLUSTER``, ``RECONCILER_INSTANCE``,
  ``RECONCILER_APP``, ``RECONCILER_FROM_VERSION``, ``RECONCILER_TO_VERSION``,
  ``RECONCILER_BATCH`` and ``RECONCILER_BATCHES`` (section 5's naming);
- ``activeDeadlineSeconds`` is capped by ``healthTimeoutSeconds``: an analysis that
  outlives the batch's timeout could not verify it anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.migrations import render_job_with
from reconciler.model.catalog import AppVersion, Instance, Template
from reconciler.model.problems import Problem

ANALYSIS_LABEL = "reconciler.dev/rollout-analysis"
OWNER_LABEL = "reconciler.dev/instance"
BATCH_LABEL = "reconciler.dev/rollout-batch"
_NAME_LIMIT = 63  # a Job's name becomes its pods' job-name label value


def rollout_key(from_version: str, to_version: str, started_at: str) -> str:
    """Eight hex characters that tell one rollout attempt from every other."""
    text = f"{from_version} -> {to_version} @ {started_at}"
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def analysis_job_name(instance: str, batch: int, key: str) -> str:
    """``<instance>-analysis-<batch>-<key>``, the instance part cut to stay within 63."""
    suffix = f"-analysis-{batch}-{key}"
    return instance[: _NAME_LIMIT - len(suffix)].rstrip("-") + suffix


@dataclass(frozen=True)
class AnalysisRun:
    """What one analysis Job checks: which rollout, which batch of how many."""

    cluster: str
    from_version: str
    to_version: str
    batch: int
    batches: int
    key: str


def render_analysis_job(
    template: Template,
    instance: Instance,
    version: AppVersion,
    run: AnalysisRun,
    *,
    timeout_seconds: int,
    images: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, tuple[Problem, ...]]:
    """The Job to create for ``run``, or the problems that prevent it.

    ``images``: the version's images with the builds ``to`` pins (SPEC section 8), so
    ``${images.NAME}`` in the Job is the build the batch moved to.
    """
    labels = {
        OWNER_LABEL: instance.name,
        ANALYSIS_LABEL: run.key,
        BATCH_LABEL: str(run.batch),
    }
    env = {
        "RECONCILER_CLUSTER": run.cluster,
        "RECONCILER_INSTANCE": instance.name,
        "RECONCILER_APP": instance.app,
        "RECONCILER_FROM_VERSION": run.from_version,
        "RECONCILER_TO_VERSION": run.to_version,
        "RECONCILER_BATCH": str(run.batch),
        "RECONCILER_BATCHES": str(run.batches),
    }
    job, problems = render_job_with(
        template,
        instance,
        version,
        labels=labels,
        env=env,
        timeout_seconds=timeout_seconds,
        images=images,
    )
    if job is None:
        return None, problems
    meta = job["metadata"]
    meta["name"] = analysis_job_name(instance.name, run.batch, run.key)
    meta["namespace"] = instance.namespace  # where the instance's pods are, always
    return job, ()


__all__ = [
    "ANALYSIS_LABEL",
    "BATCH_LABEL",
    "OWNER_LABEL",
    "AnalysisRun",
    "analysis_job_name",
    "render_analysis_job",
    "rollout_key",
]
