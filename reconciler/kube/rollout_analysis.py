"""A rollout's analysis Jobs in the cluster: create one per batch, read its verdict, clean up.

The rollout driver (``rollout_driver.py``) delegates here for ``RunAnalysis`` and for
the ``analysis`` and ``helpers_left`` parts of its observation. The Job body comes
rendered from the daemon (``reconciler.rollout.render_analysis_job``: it has the
catalog); this module only talks to the API server, and never waits:

- ``run(batch)`` creates the batch's Job when it is absent (idempotent by name; a
  ``409`` from a concurrent create is the same outcome), after deleting every other
  analysis Job of the instance: the succeeded ones of earlier batches and the
  failure an earlier attempt left for inspection, now superseded;
- ``observe()`` reads the current batch's Job: ``Complete`` -> ``"succeeded"``,
  ``Failed`` -> ``"failed"`` with its pod's reason and log tail (as a failed
  migration Job says, ``KubeJobRunner.explain_failure``), otherwise ``"running"``,
  ``None`` when there is none
  (https://kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions);
  any analysis Job that has not failed counts as a helper still left, so a rollout
  is not recorded as succeeded while one remains;
- ``clean(batch)`` when the next batch scales deletes the succeeded Jobs of earlier
  batches, ``clean_all()`` at ``Finalize`` deletes every one (no helper left after
  success), ``clean_all(keep_failed=True)`` on a rollback or abandon keeps the
  failed one for ``kubectl logs``, like a failed migration Job.

Deletes use ``propagationPolicy: Background`` (``KubeClient.delete``), so the Job's
pods go with it (https://kubernetes.io/docs/concepts/architecture/garbage-collection/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.kube.client import KubeClient
from reconciler.kube.errors import KubeApiError
from reconciler.kube.jobs import KubeJobRunner, job_verdict
from reconciler.model.changeset import ObjectRef
from reconciler.rollout import ANALYSIS_LABEL, OWNER_LABEL, analysis_job_name

JsonObject = dict[str, Any]
# (batch, rollout key) -> the rendered analysis Job to create for that batch
RenderAnalysis = Callable[[int, str], Mapping[str, Any]]
_MESSAGE_LIMIT = 600  # the record's message is a status line, not a log store


def _state(job: Mapping[str, Any]) -> str:
    verdict = job_verdict(job)
    if verdict is None:
        return "running"
    return "succeeded" if verdict[0] == "Complete" else "failed"


@dataclass
class RolloutAnalysis:
    """One instance's analysis Jobs, for one pass; ``follow`` says which rollout and batch."""

    client: KubeClient
    instance: str
    namespace: str
    render: RenderAnalysis
    key: str = ""  # ``rollout_key`` of the rollout in progress ("" when none)
    batch: int = 0  # the batch whose Job ``observe`` reports (0: none)

    def follow(self, key: str, batch: int) -> None:
        """The rollout and batch the next observation is about (from the current record)."""
        self.key, self.batch = key, batch

    # --- observe ------------------------------------------------------------------------

    def observe(self) -> tuple[str | None, str, bool]:
        """(current batch's state, why it failed, whether a non-failed analysis Job is left)."""
        jobs = self._jobs()
        left = any(_state(j) != "failed" for j in jobs)
        if not self.key or self.batch <= 0:
            return None, "", left
        name = analysis_job_name(self.instance, self.batch, self.key)
        job = next((j for j in jobs if j["metadata"]["name"] == name), None)
        if job is None:
            return None, "", left
        state = _state(job)
        if state != "failed":
            return state, "", left
        return state, self._why(job), left

    def _why(self, job: Mapping[str, Any]) -> str:
        verdict = job_verdict(job) or ("Failed", "", "")
        text = KubeJobRunner(self.client).explain_failure(ObjectRef.of(job), *verdict[1:])
        line = " | ".join(part.strip() for part in text.splitlines() if part.strip())
        return line if len(line) <= _MESSAGE_LIMIT else line[: _MESSAGE_LIMIT - 3] + "..."

    def _jobs(self) -> list[JsonObject]:
        selector = f"{OWNER_LABEL}={self.instance},{ANALYSIS_LABEL}"
        return self.client.list(
            "batch/v1", "Job", namespace=self.namespace, label_selector=selector
        )

    # --- act ----------------------------------------------------------------------------

    def run(self, batch: int) -> None:
        """Create ``batch``'s Job unless it exists; every other analysis Job goes."""
        name = analysis_job_name(self.instance, batch, self.key)
        present = False
        for job in self._jobs():
            if job["metadata"]["name"] == name:
                present = True
            else:
                self._delete(job)
        if present:
            return
        body = dict(self.render(batch, self.key))
        ref = ObjectRef.of(body)
        path = self.client.resource(ref.api_version, ref.kind).path(ref.namespace)
        try:
            self.client.request("POST", path, subject=str(ref), verb="create", body=body)
        except KubeApiError as e:
            if e.status != 409:  # 409: created meanwhile, which is what we wanted
                raise

    def clean(self, batch: int) -> None:
        """Delete the succeeded Jobs other than ``batch``'s: their batches are verified."""
        name = analysis_job_name(self.instance, batch, self.key)
        for job in self._jobs():
            if job["metadata"]["name"] != name and _state(job) == "succeeded":
                self._delete(job)

    def clean_all(self, *, keep_failed: bool = False) -> None:
        """Delete every analysis Job of the instance (``keep_failed``: not the failed ones)."""
        for job in self._jobs():
            if not (keep_failed and _state(job) == "failed"):
                self._delete(job)

    def _delete(self, job: Mapping[str, Any]) -> None:
        uid = str(job["metadata"].get("uid", ""))
        try:
            self.client.delete(ObjectRef.of(job), uid=uid)  # False when already gone
        except KubeApiError as e:
            if e.status != 409:  # 409: another Job of that name now, not the one we read
                raise


__all__ = ["RenderAnalysis", "RolloutAnalysis"]
