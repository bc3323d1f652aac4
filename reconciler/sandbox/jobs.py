"""The Job controller: pods that run to completion, retries, deadlines and the verdict.

Follows https://kubernetes.io/docs/concepts/workloads/controllers/job/: a Job keeps
``min(parallelism, completions - succeeded)`` pods running (named ``<job>-<suffix>``,
labelled ``batch.kubernetes.io/job-name`` and ``batch.kubernetes.io/controller-uid``);
each failed pod counts against ``backoffLimit`` (default 6) and the Job fails with
``BackoffLimitExceeded`` once more pods failed than it allows; past
``activeDeadlineSeconds`` it fails with ``DeadlineExceeded`` and its running pods are
deleted; ``suspend: true`` deletes running pods and starts none. The terminal
conditions are written as Kubernetes 1.31 does: ``SuccessCriteriaMet`` then
``Complete``, or ``FailureTarget`` then ``Failed``. What a pod does is the kubelet's:
it runs for the sandbox's job duration and succeeds unless failure is injected; the
annotation ``sandbox.reconciler.dev/fail-attempts: "N"`` on the Job makes only its
first N pods fail, to test retries. After a failed pod the next one waits the
back-off of https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy
(10 s·2ⁿ⁻¹, at most 6 minutes; ``Timing.job_backoff`` scales it for tests). Not
simulated: indexed completion, pod failure policies.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.apply import now
from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.events import NORMAL, WARNING
from reconciler.sandbox.kinds import JOBS, PODS
from reconciler.sandbox.owned import alive, pod_from_template, random_suffix
from reconciler.sandbox.pods import CRASH_LOOP, FAIL_ANNOTATION, is_ready

FAIL_ATTEMPTS = "sandbox.reconciler.dev/fail-attempts"
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
DEFAULT_BACKOFF_LIMIT = 6
# the Job controller's ``MaxPodCreateDeletePerSync``: a sync starts at most this many
# pods, and the pods' events bring the Job back for the rest
MAX_POD_CREATES_PER_SYNC = 500


def _finished(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and value >= 0 else default


class JobController:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._started: dict[str, float] = {}  # uid -> clock when it first ran pods
        self._failures: dict[str, tuple[int, float]] = {}  # uid -> (failed pods, clock seen)

    def forget(self, uid: str) -> None:
        self._started.pop(uid, None)
        self._failures.pop(uid, None)

    def _backoff(self, uid: str, failed: int, clock: float) -> float:
        """Seconds until the next pod may start: the back-off counts from the latest failure."""
        seen, since = self._failures.get(uid, (0, clock))
        if failed != seen:
            seen, since = failed, clock
            self._failures[uid] = (seen, since)
        return max(0.0, since + self.plane.timing.retry_delay(failed) - clock)

    def reconcile(self, job: dict[str, Any]) -> float | None:
        if not alive(job):
            return None
        spec = job.get("spec") or {}
        meta = job["metadata"]
        old = job.get("status") or {}
        pods = self.plane.pods_of(job)
        running = [
            p
            for p in pods
            if alive(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        if _finished(old):
            for pod in running:  # a finished Job leaves nothing running
                self.plane.delete(PODS, pod)
            return None
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        status: dict[str, Any] = {k: v for k, v in old.items() if k == "startTime"}
        if spec.get("suspend"):
            for pod in running:
                self.plane.delete(PODS, pod)
            status.update(self._counts(0, 0, succeeded, failed))
            self.plane.write_status(JOBS, job, {**old, **status})
            return None
        clock = self.plane.clock()
        started = self._started.setdefault(meta["uid"], clock)
        status.setdefault("startTime", now())
        completions = _int(spec.get("completions"), 1)
        verdict = self._verdict(spec, succeeded, failed, clock - started, completions)
        wait: float | None = None
        if verdict is None:
            want = min(_int(spec.get("parallelism"), 1), completions - succeeded)
            backoff = self._backoff(meta["uid"], failed, clock) if want > len(running) else 0.0
            if backoff > 0:
                want = len(running)  # the replacement waits out the back-off
                wait = backoff
            created = max(0, min(want - len(running), MAX_POD_CREATES_PER_SYNC))
            for _ in range(created):
                self._create_pod(job, attempt=len(pods))
                pods.append({})  # the next attempt number counts this one
            running_now = len(running) + created
            ready = sum(1 for p in running if is_ready(p))
            status.update(self._counts(running_now, ready, succeeded, failed))
            deadline = spec.get("activeDeadlineSeconds")
            if isinstance(deadline, int):
                until_deadline = max(0.0, started + deadline - clock)
                wait = until_deadline if wait is None else min(wait, until_deadline)
        else:
            for pod in running:
                self.plane.delete(PODS, pod)
                self._record(
                    job, NORMAL, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}"
                )
            status.update(self._counts(0, 0, succeeded, failed))
            status["conditions"] = self._conditions(old, *verdict)
            if verdict[0] == "Complete":
                self._record(job, NORMAL, "Completed", "Job completed")
            else:
                self._record(job, WARNING, verdict[1], verdict[2])
            if verdict[0] == "Complete":
                status["completionTime"] = now()
        self.plane.write_status(JOBS, job, status)
        return wait

    @staticmethod
    def _counts(active: int, ready: int, succeeded: int, failed: int) -> dict[str, Any]:
        counts = {"active": active, "succeeded": succeeded, "failed": failed}
        return {**{k: v for k, v in counts.items() if v}, "ready": ready, "terminating": 0}

    def _verdict(
        self, spec: dict[str, Any], succeeded: int, failed: int, elapsed: float, completions: int
    ) -> tuple[str, str, str] | None:
        if succeeded >= completions:
            return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
        if failed > _int(spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT):
            return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        if isinstance(deadline, int) and elapsed >= deadline:
            return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
        return None

    @staticmethod
    def _conditions(old: dict[str, Any], verdict: str, reason: str, message: str) -> list[Any]:
        stamp = now()
        first = "SuccessCriteriaMet" if verdict == "Complete" else "FailureTarget"
        kept = {c.get("type"): c for c in old.get("conditions") or []}
        return [
            kept.get(kind)
            or {
                "type": kind,
                "status": "True",
                "lastProbeTime": stamp,
                "lastTransitionTime": stamp,
                "reason": reason,
                "message": message,
            }
            for kind in (first, verdict)
        ]

    def _create_pod(self, job: dict[str, Any], attempt: int) -> None:
        meta = job["metadata"]
        template = dict((job.get("spec") or {}).get("template") or {})
        body = pod_from_template(
            job,
            template,
            f"{meta['name']}-{random_suffix()}",
            labels={
                JOB_NAME: meta["name"],
                CONTROLLER_UID: meta["uid"],
                "job-name": meta["name"],
                "controller-uid": meta["uid"],
            },
        )
        fail_attempts = (meta.get("annotations") or {}).get(FAIL_ATTEMPTS)
        if fail_attempts is not None and str(fail_attempts).isdigit():
            annotations = body["metadata"].setdefault("annotations", {})
            if attempt < int(fail_attempts):
                annotations[FAIL_ANNOTATION] = CRASH_LOOP
            else:
                annotations.pop(FAIL_ANNOTATION, None)
        if self.plane.create(PODS, meta.get("namespace", ""), body):
            self._record(
                job, NORMAL, "SuccessfulCreate", f"Created pod: {body['metadata']['name']}"
            )

    def _record(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.plane.events.emit(job, type_, reason, message, "job-controller")
