"""``KubeJobRunner``: a migration Job runs to its end, is cleaned up or explained (SPEC 5).

Against the sandbox's Job controller, which follows
https://kubernetes.io/docs/concepts/workloads/controllers/job/ (pods run to
completion, ``backoffLimit``, ``activeDeadlineSeconds``, terminal conditions), and
against a real cluster in the ``real_cluster`` lane: the containers really do what
the sandbox's annotations make its simulated pods do (print lines, exit non-zero).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.kube import ClusterUnreachable, KubeClient, KubeJobRunner
from reconciler.migrations import (
    MIGRATION_LABEL,
    PHASE_LABEL,
    REPORTED_ANNOTATION,
    in_flight,
    job_span,
    job_verdict,
)
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.kube.conftest import FAST_RETRY, Backend

FAIL = "sandbox.reconciler.dev/fail"
LOG = "sandbox.reconciler.dev/log"
FAIL_ATTEMPTS = "sandbox.reconciler.dev/fail-attempts"
LINES = "\n".join(f"line {i}" for i in range(1, 16))


def job(
    name: str,
    namespace: str,
    *,
    script: str = "echo migrated",
    fail: bool = False,
    log: str = "",
    migration: str = "add-index",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Job as ``render_job`` makes one; the sandbox annotations mirror ``script``."""
    template_notes = {LOG: log} if log else {}
    if fail:
        template_notes[FAIL] = "true"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "reconciler",
                "app.kubernetes.io/instance": "books",
                MIGRATION_LABEL: migration,
                PHASE_LABEL: "pre",
            },
            "annotations": annotations or {},
        },
        "spec": {
            "backoffLimit": 0,
            **spec,
            "template": {
                "metadata": {"annotations": template_notes},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "migrate",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", script],
                        }
                    ],
                },
            },
        },
    }


def fast(client: KubeClient) -> KubeJobRunner:
    """Short polls: the sandbox's Jobs end within a tenth of a second."""
    return KubeJobRunner(client, first_poll=0.01, max_poll=0.05)


def namespace(be: Backend, client: KubeClient | None = None) -> str:
    name = be.namespace("jobs")
    (client or be.client).apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def job_ref(name: str, ns: str) -> ObjectRef:
    return ObjectRef("batch/v1", "Job", ns, name)


def eventually(check: Any, timeout: float = 30.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.02)


def pods(client: KubeClient, ns: str, name: str) -> list[Any]:
    return client.list("v1", "Pod", namespace=ns, label_selector=f"job-name={name}")


def test_a_succeeded_job_is_deleted_with_its_pods(backend: Backend) -> None:
    ns = namespace(backend)
    outcome = fast(backend.client).run_job(job("migrate", ns), timeout=120)
    assert outcome.succeeded and not outcome.timed_out, outcome
    assert outcome.duration > 0 and outcome.message == ""
    assert backend.client.get(job_ref("migrate", ns)) is None
    # background propagation: the garbage collector removes the pods after the Job
    assert eventually(lambda: not pods(backend.client, ns, "migrate"))


def test_a_failed_job_is_kept_and_its_pod_reason_exit_code_and_log_tail_reported(
    backend: Backend,
) -> None:
    ns = namespace(backend)
    script = "for i in $(seq 1 15); do echo line $i; done; exit 3"
    body = job("broken", ns, script=script, fail=True, log=LINES)
    outcome = fast(backend.client).run_job(body, timeout=120)
    assert not outcome.succeeded and not outcome.timed_out
    message = outcome.message
    assert message.startswith(f"Job/{ns}/broken failed (BackoffLimitExceeded: "), message
    assert "container migrate terminated: Error, exit code " in message
    lines = message.split("; log tail:\n", 1)[1].splitlines()
    assert len(lines) == 10 and "line 15" in lines and "line 5" not in lines
    if backend.sandbox is not None:
        assert "exit code 1" in message and lines[-1].endswith("exited with code 1 (Error)")
    kept = backend.client.get(job_ref("broken", ns))
    assert kept is not None  # the last failed Job stays for kubectl describe
    assert len(pods(backend.client, ns, "broken")) == 1


def test_a_retry_replaces_the_kept_failed_job_of_the_same_migration(backend: Backend) -> None:
    ns = namespace(backend)
    runner = fast(backend.client)
    failed = runner.run_job(job("again", ns, script="exit 1", fail=True), timeout=120)
    first = backend.client.get(job_ref("again", ns))
    assert not failed.succeeded and first is not None
    fixed = runner.run_job(job("again", ns), timeout=120)
    assert fixed.succeeded, fixed.message
    assert fixed.message == "replaced the Job of an earlier failed attempt"
    assert backend.client.get(job_ref("again", ns)) is None


def test_a_job_of_that_name_made_for_something_else_is_left_alone(backend: Backend) -> None:
    ns = namespace(backend)
    runner = fast(backend.client)
    other = job("shared-name", ns, migration="other", script="exit 1", fail=True)
    assert not runner.run_job(other, timeout=120).succeeded
    outcome = runner.run_job(job("shared-name", ns), timeout=120)
    assert not outcome.succeeded
    assert "already exists and was not created for this migration" in outcome.message
    kept = backend.client.get(job_ref("shared-name", ns))
    assert kept is not None and kept["metadata"]["labels"][MIGRATION_LABEL] == "other"


def test_an_invalid_job_is_a_failed_run_with_the_api_message(backend: Backend) -> None:
    ns = namespace(backend)
    body = job("invalid", ns)
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"  # Jobs need Never/OnFailure
    outcome = fast(backend.client).run_job(body, timeout=120)
    assert not outcome.succeeded and not outcome.timed_out
    assert "create failed (Invalid)" in outcome.message and "restartPolicy" in outcome.message


def test_a_pod_that_fails_once_is_retried_by_the_job_and_the_run_succeeds(
    sandbox: SandboxHandle,
) -> None:
    """Sandbox only: ``fail-attempts`` makes the first pod fail (backoffLimit allows one)."""
    with KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY) as client:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}})
        body = job("flaky", "fin", annotations={FAIL_ATTEMPTS: "1"}, backoffLimit=1)
        outcome = fast(client).run_job(body, timeout=60)
        assert outcome.succeeded, outcome.message
        assert client.get(job_ref("flaky", "fin")) is None


@pytest.fixture(scope="module")
def slow_jobs() -> Iterator[KubeClient]:
    """A sandbox whose Job containers run for 30 s: deadlines and timeouts come first."""
    timing = Timing(
        pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.02, job_duration=30.0
    )
    with (
        running_sandbox(timing=timing) as sandbox,
        KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY) as client,
    ):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}})
        yield client


def test_a_job_past_its_active_deadline_fails_with_deadline_exceeded(
    slow_jobs: KubeClient,
) -> None:
    body = job("too-slow", "fin", activeDeadlineSeconds=1)
    outcome = fast(slow_jobs).run_job(body, timeout=30)
    assert not outcome.succeeded and not outcome.timed_out
    assert outcome.message.startswith("Job/fin/too-slow failed (DeadlineExceeded: ")
    # Kubernetes deleted the running pod: nothing is left to read a log from
    assert outcome.message.endswith("no failed pod is left to explain it")
    assert slow_jobs.get(job_ref("too-slow", "fin")) is not None


def test_a_timed_out_run_deletes_nothing_and_the_next_attempt_waits_for_the_same_job(
    slow_jobs: KubeClient,
) -> None:
    runner = fast(slow_jobs)
    outcome = runner.run_job(job("long", "fin"), timeout=0.2)
    assert outcome.timed_out and not outcome.succeeded
    assert "did not finish within 0.2s" in outcome.message
    live = slow_jobs.get(job_ref("long", "fin"))
    assert live is not None
    again = runner.run_job(job("long", "fin"), timeout=0.1)
    assert again.timed_out
    same = slow_jobs.get(job_ref("long", "fin"))
    assert same is not None and same["metadata"]["uid"] == live["metadata"]["uid"]


def test_a_job_that_fails_while_nobody_waits_is_the_next_calls_failure_with_its_own_span(
    slow_jobs: KubeClient,
) -> None:
    """A pass waits briefly and leaves the Job; it ends (here: past its deadline, which
    Kubernetes enforces as ``activeDeadlineSeconds``) before the next pass looks. That
    pass takes its verdict over, with the Job's own span (``startTime`` to the ``Failed``
    condition: a failed Job has no ``completionTime``,
    https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/#JobStatus),
    and marks it reported: the attempt after that replaces it."""
    runner = fast(slow_jobs)
    body = job("deadline", "fin", activeDeadlineSeconds=1)
    first = runner.run_job(body, timeout=0.1)
    assert first.timed_out and not first.succeeded
    ref = job_ref("deadline", "fin")
    ended = eventually(lambda: job_verdict(slow_jobs.get(ref) or {}))
    assert ended is not None and ended[1] == "DeadlineExceeded"
    live = slow_jobs.get(ref)
    assert live is not None and in_flight(live, body)  # ended, but nobody reported it

    taken = runner.run_job(body, timeout=0.1)
    assert not taken.succeeded and not taken.timed_out
    assert taken.message.startswith("Job/fin/deadline failed (DeadlineExceeded: ")
    span = job_span(live)
    assert span is not None and (taken.started_at, taken.duration) == span
    assert taken.duration >= 1.0  # its deadline, not this call's wait
    kept = slow_jobs.get(ref)
    assert kept is not None and kept["metadata"]["uid"] == live["metadata"]["uid"]
    assert kept["metadata"]["annotations"][REPORTED_ANNOTATION] == "true"
    assert not in_flight(kept, body)

    retry = runner.run_job(body, timeout=0.1)  # a new attempt: a new Job
    assert retry.timed_out
    new = slow_jobs.get(ref)
    assert new is not None and new["metadata"]["uid"] != live["metadata"]["uid"]


def test_an_unreachable_cluster_raises() -> None:
    with running_sandbox() as sandbox:
        client = KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY)
        client.resource("batch/v1", "Job")  # discovery cached: the failure is the request
        sandbox.stop()
        with client, pytest.raises(ClusterUnreachable):
            fast(client).run_job(job("x", "fin"), timeout=5)
