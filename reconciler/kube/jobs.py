"""Run a migration Job to its end: the ``JobRunner`` of ``reconciler.migrations`` on a cluster.

SPEC section 5: a Job migration must succeed within its ``timeoutSeconds``; the
reconciler deletes the Job after success and keeps the last failed one, naming
its pod's reason and the tail of its log in the status. :class:`KubeJobRunner`
does exactly that through :class:`KubeClient`:

- create the Job (``POST``); a Job of the same name left by an earlier attempt of
  the same migration is taken over (``reconciler.migrations.in_flight``): a running
  one is waited for rather than started twice, a succeeded one counts as this run's
  success, a failed one whose failure nobody reported yet is this run's failure;
  a failed one already reported is deleted and created anew (the newest failure is
  the one kept). A Job of that name made for anything else is never touched;
- poll its ``status.conditions`` until ``Complete`` or ``Failed`` is ``True``
  (https://kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions).
  Polling, not a watch: the runner is called from a pass that already has a
  deadline, the intervals grow from tens of milliseconds to a second, and a watch
  would need a second connection per Job for little gain;
- after success, delete it with ``propagationPolicy: Background`` so its pods go too;
- after failure, keep it, mark it reported (``REPORTED_ANNOTATION``) and read its
  newest failed pod: the container's ``state.terminated`` reason and exit code, and
  the last lines of its log (``GET .../pods/NAME/log?container=C&tailLines=N``);
- when ``timeout`` passes first, delete nothing (``timed_out=True``): the Job goes
  on, the next call takes it over, and Kubernetes stops it at
  ``activeDeadlineSeconds`` anyway (``render_job`` caps it at the migration's
  ``timeoutSeconds``). A daemon pass calls with its short grace and comes back;
  ``reconciler apply`` calls with the whole ``timeoutSeconds``;
- a Job taken over reports its true duration, from its own ``startTime`` to its end
  (``job_span``), not the time this call happened to wait.

It never raises for a Job that failed or could not be created (an invalid Job is a
failed migration, with the API's message); it raises ``ClusterUnreachable`` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.kube.client import MERGE_PATCH, KubeClient, label_selector
from reconciler.kube.errors import ClusterUnreachable, KubeApiError
from reconciler.migrations import (
    REPORTED_ANNOTATION,
    JobOutcome,
    in_flight,
    job_span,
    job_verdict,
    same_run,
)
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LOG_LINES = 10
_LINE_LIMIT = 300  # characters kept of one log line: a status message is not a log store

JsonObject = dict[str, Any]
_Verdict = tuple[tuple[str, str, str], JsonObject]  # (type, reason, message) and the Job


@dataclass(frozen=True)
class _Started:
    """The live Job to wait for (None: see ``why``), and whether an earlier call made it."""

    live: JsonObject | None
    note: str = ""
    taken_over: bool = False
    busy: bool = False  # a deleted predecessor still holds the name: try again later


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
            started = self._start(job, ref, deadline)
            if started.busy:
                return outcome(False, started.note, timed_out=True)
            if started.live is None:
                return outcome(False, started.note)
            finished = self._ended(started.live) or self._wait(ref, deadline)
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
        (verdict, reason, message), final = finished
        took, began = self._clock() - start, ""
        span = job_span(final) if started.taken_over else None
        if span is not None:
            began, took = span
        if verdict == "Complete":
            self._delete(ref)
            return JobOutcome(True, took, started.note, started_at=began)
        text = self.explain_failure(ref, reason, message)
        self._mark_reported(ref, final)
        return JobOutcome(False, took, text, started_at=began)

    # -- create or take over ----------------------------------------------------------

    def _start(self, job: Mapping[str, Any], ref: ObjectRef, deadline: float) -> _Started:
        """The live Job to wait for, or why there is none."""
        existing = self.client.get(ref)
        note = ""
        if existing is not None:
            if not same_run(existing, job):
                return _Started(
                    None,
                    f"{ref} already exists and was not created for this migration; "
                    "rename the migration's Job or delete the other one",
                )
            if in_flight(existing, job):
                succeeded = (job_verdict(existing) or ("",))[0] == "Complete"
                note = "an earlier attempt's Job had succeeded" if succeeded else ""
                return _Started(existing, note, taken_over=True)
            self._delete(ref, uid=str(existing["metadata"].get("uid", "")))
            note = "replaced the Job of an earlier failed attempt"
        created = self._create(job, ref, deadline)
        if created is None:
            return _Started(
                None,
                f"{ref}: the failed Job of an earlier attempt is still being deleted; "
                "it is created again on the next attempt",
                busy=True,
            )
        return _Started(created, note)

    def _create(self, job: Mapping[str, Any], ref: ObjectRef, deadline: float) -> JsonObject | None:
        """POST the Job; a 409 while a deleted predecessor is still going is retried.

        None when the name is still taken at ``deadline``: not a failure of the
        migration, just not yet.
        """
        path = self.client.resource(ref.api_version, ref.kind).path(ref.namespace)
        delay = self.first_poll
        while True:
            try:
                return self.client.request(
                    "POST", path, subject=str(ref), verb="create", body=dict(job)
                ).body
            except KubeApiError as e:
                if e.status != 409:
                    raise
                if self._clock() + delay > deadline:
                    return None
            self._sleep(delay)
            delay = min(delay * 2, self.max_poll)

    # -- wait -------------------------------------------------------------------------

    def _wait(self, ref: ObjectRef, deadline: float) -> _Verdict | None:
        delay = self.first_poll
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None
            self._sleep(min(delay, remaining))
            delay = min(delay * 2, self.max_poll)
            live = self.client.get(ref)
            if live is None:
                return ("Failed", "Deleted", "the Job was deleted while it ran"), {}
            ended = self._ended(live)
            if ended is not None:
                return ended

    @staticmethod
    def _ended(live: JsonObject) -> _Verdict | None:
        verdict = job_verdict(live)
        return None if verdict is None else (verdict, live)

    # -- after the verdict --------------------------------------------------------------

    def _delete(self, ref: ObjectRef, uid: str = "") -> None:
        """Background propagation: the Job goes now, the garbage collector takes its pods."""
        self.client.delete(ref, uid=uid)

    def _mark_reported(self, ref: ObjectRef, live: Mapping[str, Any]) -> None:
        """Annotate the kept failed Job: its failure is told, a later attempt replaces it.

        Best effort: without the mark a later attempt reports the same failure once
        more, which is noise, not harm.
        """
        meta = live.get("metadata") or {}
        if not meta or REPORTED_ANNOTATION in (meta.get("annotations") or {}):
            return
        patch = {"metadata": {"annotations": {REPORTED_ANNOTATION: "true"}}}
        try:
            self.client.request(
                "PATCH",
                self.client.object_path(ref),
                subject=str(ref),
                verb="annotate",
                body=patch,
                content_type=MERGE_PATCH,
            )
        except ClusterUnreachable:
            raise
        except KubeError:
            pass

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
