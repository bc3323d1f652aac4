"""Run a migration Job to its end: the ``JobRunner`` of ``reconciler.migrations`` on a cluster.

SPEC section 5: a Job migration must succeed within its ``timeoutSeconds``; the
reconciler deletes the Job after success and keeps the last failed one, naming
its pod's reason and the tail of its log in the status. :class:`KubeJobRunner`
does exactly that through :class:`KubeClient`:

- create the Job (``POST``); a Job of the same name left by an earlier attempt of
  the same migration is taken over: a failed one is deleted and created anew (the
  newest failure is the one kept), a running one (an earlier attempt timed out) is
  waited for rather than started twice, a succeeded one counts as this run's
  success. A Job of that name made for anything else is never touched;
- poll its ``status.conditions`` until ``Complete`` or ``Failed`` is ``True``
  (https://kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions).
  Polling, not a watch: the runner is called from a pass that already has a
  deadline, the intervals grow from tens of milliseconds to a second, and a watch
  would need a second connection per Job for little gain;
- after success, delete it with ``propagationPolicy: Background`` so its pods go too;
- after failure, keep it and read its newest failed pod: the container's
  ``state.terminated`` reason and exit code, and the last lines of its log
  (``GET .../pods/NAME/log?container=C&tailLines=N``);
- on timeout, delete nothing (``timed_out=True``): the Job may still finish, and
  Kubernetes stops it at ``activeDeadlineSeconds`` anyway (``render_job`` caps it).

It never raises for a Job that failed or could not be created (an invalid Job is a
failed migration, with the API's message); it raises ``ClusterUnreachable`` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.kube.client import KubeClient, label_selector
from reconciler.kube.errors import ClusterUnreachable, KubeApiError
from reconciler.migrations import MIGRATION_LABEL, PHASE_LABEL, JobOutcome
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

INSTANCE_LABEL = "app.kubernetes.io/instance"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LOG_LINES = 10
_LINE_LIMIT = 300  # characters kept of one log line: a status message is not a log store
# Labels that say which migration run a Job belongs to: a Job of the same name with
# other values is somebody else's and is never deleted or adopted.
_OWNER_LABELS = (INSTANCE_LABEL, MIGRATION_LABEL, PHASE_LABEL)

JsonObject = dict[str, Any]


def job_verdict(job: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``("Complete"|"Failed", reason, message)`` once a terminal condition is True."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("reason", "")), str(cond.get("message", ""))
    return None


class KubeJobRunner:
    """Creates a rendered Job, waits for its verdict, cleans up or explains the failure."""

    def __init__(
        self,
        client: KubeClient,
        *,
        first_poll: float = 0.02,
        max_poll: float = 1.0,
        log_lines: int = LOG_LINES,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.first_poll = first_poll
        self.max_poll = max_poll
        self.log_lines = log_lines
        self._clock = clock
        self._sleep = sleep

    def run_job(self, job: Mapping[str, Any], timeout: float) -> JobOutcome:
        """Run ``job`` and wait at most ``timeout`` seconds for it (see the module doc)."""
        start = self._clock()
        deadline = start + timeout
        ref = ObjectRef.of(job)

        def outcome(ok: bool, message: str = "", timed_out: bool = False) -> JobOutcome:
            return JobOutcome(ok, self._clock() - start, message, timed_out)

        try:
            live, note = self._start(job, ref, deadline)
            if live is None:
                return outcome(False, note)
            finished = job_verdict(live) or self._wait(ref, deadline)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            return outcome(False, f"{ref}: {e}")
        if finished is None:
            return outcome(
                False,
                f"{ref} did not finish within {timeout:g}s; it is left as it is "
                f"(kubectl -n {ref.namespace} describe job {ref.name})",
                timed_out=True,
            )
        verdict, reason, message = finished
        if verdict == "Complete":
            self._delete(ref)
            return outcome(True, note)
        return outcome(False, self.explain_failure(ref, reason, message))

    # -- create or take over ----------------------------------------------------------

    def _start(
        self, job: Mapping[str, Any], ref: ObjectRef, deadline: float
    ) -> tuple[JsonObject | None, str]:
        """The live Job to wait for, or None and why it cannot run."""
        existing = self.client.get(ref)
        note = ""
        if existing is not None:
            if not _same_run(existing, job):
                return None, (
                    f"{ref} already exists and was not created for this migration; "
                    "rename the migration's Job or delete the other one"
                )
            verdict = job_verdict(existing)
            if verdict is None:
                return existing, "took over the Job an earlier attempt started"
            if verdict[0] == "Complete":
                return existing, "an earlier attempt's Job had succeeded"
            self._delete(ref, uid=str(existing["metadata"].get("uid", "")))
            note = "replaced the Job of an earlier failed attempt"
        return self._create(job, ref, deadline), note

    def _create(self, job: Mapping[str, Any], ref: ObjectRef, deadline: float) -> JsonObject:
        """POST the Job; a 409 while a deleted predecessor is still going is retried."""
        path = self.client.resource(ref.api_version, ref.kind).path(ref.namespace)
        delay = self.first_poll
        while True:
            try:
                return self.client.request(
                    "POST", path, subject=str(ref), verb="create", body=dict(job)
                ).body
            except KubeApiError as e:
                if e.status != 409 or self._clock() + delay > deadline:
                    raise
            self._sleep(delay)
            delay = min(delay * 2, self.max_poll)

    # -- wait -------------------------------------------------------------------------

    def _wait(self, ref: ObjectRef, deadline: float) -> tuple[str, str, str] | None:
        delay = self.first_poll
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None
            self._sleep(min(delay, remaining))
            delay = min(delay * 2, self.max_poll)
            live = self.client.get(ref)
            if live is None:
                return "Failed", "Deleted", "the Job was deleted while it ran"
            verdict = job_verdict(live)
            if verdict is not None:
                return verdict

    # -- after the verdict --------------------------------------------------------------

    def _delete(self, ref: ObjectRef, uid: str = "") -> None:
        """Background propagation: the Job goes now, the garbage collector takes its pods."""
        self.client.delete(ref, uid=uid)

    def explain_failure(self, ref: ObjectRef, reason: str, message: str) -> str:
        """What the status says of a failed Job: its reason, its pod's end, its log's tail.

        Public for the rollout's analysis Jobs, which fail a batch and say why the same way.
        """
        text = f"{ref} failed ({reason or 'Failed'}: {message or 'no message'})"
        live = self.client.get(ref)
        pod = _newest_failed_pod(self._pods(ref, live)) if live is not None else None
        if pod is None:
            return text + "; no failed pod is left to explain it"
        name = str(pod["metadata"].get("name", ""))
        container, ended = _failed_container(pod)
        if container:
            text += (
                f"; pod {name} container {container} terminated: "
                f"{ended.get('reason') or 'unknown reason'}, exit code {ended.get('exitCode', '?')}"
            )
        else:
            text += f"; pod {name}: {pod.get('status', {}).get('reason') or 'failed'}"
        return text + self._log_tail(ref.namespace, name, container)

    def _pods(self, ref: ObjectRef, job: Mapping[str, Any]) -> list[JsonObject]:
        labels = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not labels:
            labels = {CONTROLLER_UID: str(job["metadata"].get("uid", ""))}
        return self.client.list(
            "v1", "Pod", namespace=ref.namespace, label_selector=label_selector(labels)
        )

    def _log_tail(self, namespace: str, pod: str, container: str) -> str:
        path = self.client.resource("v1", "Pod").path(namespace, pod) + "/log"
        query = [("tailLines", str(self.log_lines))]
        if container:
            query.append(("container", container))
        try:
            text = self.client.read_text(
                path, subject=f"Pod/{namespace}/{pod}", verb="log", query=query
            )
        except ClusterUnreachable:
            raise
        except KubeError as e:
            return f"; its log cannot be read: {e}"
        lines = [_clip(line) for line in text.splitlines()][-self.log_lines :]
        if not lines:
            return "; its log is empty"
        return "; log tail:\n" + "\n".join(lines)


def _same_run(existing: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    def owner(obj: Mapping[str, Any]) -> tuple[Any, ...]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return tuple(labels.get(key) for key in _OWNER_LABELS)

    return owner(existing) == owner(job)


def _newest_failed_pod(pods: list[JsonObject]) -> JsonObject | None:
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    if not failed:
        return None
    return max(
        failed,
        key=lambda p: (
            str(p["metadata"].get("creationTimestamp", "")),
            str(p["metadata"].get("name", "")),
        ),
    )


def _failed_container(pod: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The container that ended badly (else the first that ended) and its ``terminated``."""
    ended: list[tuple[str, Mapping[str, Any]]] = []
    status_of = pod.get("status") or {}
    statuses = [
        *(status_of.get("initContainerStatuses") or ()),
        *(status_of.get("containerStatuses") or ()),
    ]
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping):
            ended.append((str(status.get("name", "")), terminated))
    bad = [e for e in ended if e[1].get("exitCode") not in (0, None)]
    return (bad or ended or [("", {})])[0]


def _clip(line: str) -> str:
    return line if len(line) <= _LINE_LIMIT else line[:_LINE_LIMIT] + "..."


__all__ = ["LOG_LINES", "KubeJobRunner", "job_verdict"]
