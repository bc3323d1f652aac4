"""``RolloutAnalysis``: a batch's analysis Job created once, its verdict read, cleaned up.

Against the sandbox's Job controller and, in the ``real_cluster`` lane, a real one
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions:
``Complete`` or ``Failed`` becomes True when a Job ends).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.kube.rollout_analysis import RolloutAnalysis
from reconciler.rollout import ANALYSIS_LABEL, OWNER_LABEL, analysis_job_name, rollout_key
from tests.kube.conftest import Backend
from tests.kube.test_jobs import eventually, job, job_ref, namespace

KEY = rollout_key("1.0.0", "2.0.0", "2026-01-01T00:00:00Z")


def _analysis(backend: Backend, ns: str, failing: set[int]) -> RolloutAnalysis:
    def render(batch: int, key: str) -> Mapping[str, Any]:
        body = job(analysis_job_name("web", batch, key), ns, fail=batch in failing, log="bad")
        body["metadata"]["labels"] = {OWNER_LABEL: "web", ANALYSIS_LABEL: key}
        return body

    return RolloutAnalysis(backend.client, "web", ns, render)


def _jobs(backend: Backend, ns: str) -> list[Any]:
    return backend.client.list("batch/v1", "Job", namespace=ns)


def _settled(analysis: RolloutAnalysis) -> tuple[str | None, str, bool]:
    """The observation once the current batch's Job has ended."""

    def ended() -> tuple[str | None, str, bool] | None:
        seen = analysis.observe()
        return seen if seen[0] in ("succeeded", "failed") else None

    seen: tuple[str | None, str, bool] | None = eventually(ended)
    assert seen is not None, "the analysis Job did not finish"
    return seen


def test_one_job_per_batch_verdicts_and_cleanup(backend: Backend) -> None:
    ns = namespace(backend)
    analysis = _analysis(backend, ns, failing={2})
    analysis.follow(KEY, 1)
    assert analysis.observe() == (None, "", False)  # no Job yet
    analysis.run(1)
    first = backend.client.get(job_ref(analysis_job_name("web", 1, KEY), ns))
    assert first is not None
    analysis.run(1)  # idempotent by name: the same Job, not a second one
    again = backend.client.get(job_ref(analysis_job_name("web", 1, KEY), ns))
    assert again is not None and again["metadata"]["uid"] == first["metadata"]["uid"]
    assert _settled(analysis) == ("succeeded", "", True)  # a succeeded Job is still a helper

    analysis.follow(KEY, 2)
    analysis.clean(2)  # batch 2 scales: batch 1's verified Job goes
    assert analysis.observe() == (None, "", False)
    analysis.run(2)
    state, why, left = _settled(analysis)
    assert (state, left) == ("failed", False)  # a failed Job is kept, not a helper
    assert why.startswith(
        f"Job/{ns}/{analysis_job_name('web', 2, KEY)} failed (BackoffLimitExceeded"
    )
    assert "\n" not in why  # one line: it goes into the status message and commit

    analysis.clean_all(keep_failed=True)  # a rollback keeps it to be read
    assert len(_jobs(backend, ns)) == 1
    analysis.clean_all()  # success removes every one
    assert eventually(lambda: _jobs(backend, ns) == [])
