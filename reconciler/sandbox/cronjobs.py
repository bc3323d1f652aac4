"""The CronJob controller: a Job for each time the schedule fires, and the history kept.

Follows https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/: at each
time ``spec.schedule`` names (in ``spec.timeZone``, UTC by default) a Job is made from
``spec.jobTemplate``, named ``<cronjob>-<scheduled minutes since the epoch>``, owned by
the CronJob and annotated ``batch.kubernetes.io/cronjob-scheduled-timestamp``. Only the
latest missed time is run, and none older than ``startingDeadlineSeconds``;
``concurrencyPolicy`` ``Forbid`` skips a time while a Job still runs, ``Replace``
deletes the running one first; ``suspend`` starts nothing. The status lists the active
Jobs and ``lastScheduleTime``/``lastSuccessfulTime``; finished Jobs beyond
``successfulJobsHistoryLimit`` (3) and ``failedJobsHistoryLimit`` (1) are deleted,
oldest first. Events as the real controller's: ``SuccessfulCreate``
("Created job x"), ``SawCompletedJob``, ``SuccessfulDelete``.

Time runs at ``Timing.cron_minute`` seconds per schedule minute (60, the real pace,
unless a test or ``--cron-minute`` speeds it up): the controller's clock starts at the
wall clock and then advances that much faster.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.cron import CronError, Schedule, parse
from reconciler.sandbox.events import NORMAL
from reconciler.sandbox.kinds import CRONJOBS, JOBS
from reconciler.sandbox.owned import alive, owner_reference

SCHEDULED_AT = "batch.kubernetes.io/cronjob-scheduled-timestamp"
COMPONENT = "cronjob-controller"
_MISSED_LIMIT = 100  # the real controller gives up counting missed times beyond this
_SEARCH_DAYS = 366 * 5  # a schedule that fires on none of these days never fires


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_stamp(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _day_matches(schedule: Schedule, day: date) -> bool:
    """Day of month and weekday: either may match when both are restricted (cron's rule)."""
    in_month = day.day in schedule.days
    on_weekday = (day.isoweekday() % 7) in schedule.weekdays
    if schedule.any_day or schedule.any_weekday:
        return in_month and on_weekday
    return in_month or on_weekday


def next_time(schedule: Schedule, after: datetime) -> datetime | None:
    """The first time after ``after`` (aware, in the schedule's zone) the schedule fires."""
    if schedule.every:
        return after + timedelta(seconds=schedule.every)
    start = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = start.date()
    for _ in range(_SEARCH_DAYS):
        if day.month in schedule.months and _day_matches(schedule, day):
            for hour in sorted(schedule.hours):
                for minute in sorted(schedule.minutes):
                    moment = datetime(
                        day.year, day.month, day.day, hour, minute, tzinfo=start.tzinfo
                    )
                    if moment >= start:
                        return moment
        day += timedelta(days=1)
    return None


def latest_time(schedule: Schedule, after: datetime, now: datetime) -> datetime | None:
    """The latest time in (``after``, ``now``] the schedule fired, if any."""
    latest = None
    moment = next_time(schedule, after)
    for _ in range(_MISSED_LIMIT):
        if moment is None or moment > now:
            break
        latest = moment
        moment = next_time(schedule, moment)
    else:
        # too many missed: like the real controller, run only the one before now
        while moment is not None and moment <= now:
            latest, moment = moment, next_time(schedule, moment)
    return latest


def _finished(job: dict[str, Any]) -> str:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return ""


def _reference(job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "uid": meta["uid"],
        "resourceVersion": meta.get("resourceVersion", ""),
    }


class CronJobController:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._wall = time.time()
        self._clock = plane.clock()
        self._seen: set[str] = set()  # uids of finished Jobs already reported

    def forget(self, uid: str) -> None:
        self._seen.discard(uid)

    def now(self) -> datetime:
        """The controller's clock: the wall clock, ``60 / cron_minute`` times as fast."""
        elapsed = (self.plane.clock() - self._clock) * 60.0 / self.plane.timing.cron_minute
        return datetime.fromtimestamp(self._wall + elapsed, UTC)

    def _real_seconds(self, span: timedelta) -> float:
        return max(0.001, span.total_seconds() * self.plane.timing.cron_minute / 60.0)

    def reconcile(self, cj: dict[str, Any]) -> float | None:
        if not alive(cj):
            return None
        spec = cj.get("spec") or {}
        old = cj.get("status") or {}
        try:
            schedule = parse(str(spec.get("schedule") or ""))
            zone = ZoneInfo(str(spec.get("timeZone") or "UTC"))
        except (CronError, ZoneInfoNotFoundError, ValueError):
            return None  # validation refuses these; nothing to run
        jobs = sorted(self.plane.owned(JOBS, cj), key=lambda j: j["metadata"]["name"])
        status = dict(old)
        self._collect(cj, jobs, spec, status)
        active = [j for j in jobs if alive(j) and not _finished(j)]
        now = self.now().astimezone(zone)
        created = _parse_stamp(cj["metadata"].get("creationTimestamp")) or now
        after = _parse_stamp(old.get("lastScheduleTime")) or min(created, now)
        due = latest_time(schedule, after.astimezone(zone), now)
        if due is not None and not spec.get("suspend") and self._in_time(spec, due, now):
            active = self._run(cj, due, active, spec.get("concurrencyPolicy") or "Allow")
            status["lastScheduleTime"] = _stamp(due)
        status["active"] = [_reference(j) for j in active] or None
        status = {k: v for k, v in status.items() if v is not None}
        self.plane.write_status(CRONJOBS, cj, status)
        upcoming = next_time(schedule, max(due or after.astimezone(zone), now))
        return None if upcoming is None else self._real_seconds(upcoming - now)

    @staticmethod
    def _in_time(spec: dict[str, Any], due: datetime, now: datetime) -> bool:
        deadline = spec.get("startingDeadlineSeconds")
        return not isinstance(deadline, int) or (now - due).total_seconds() <= deadline

    def _run(
        self, cj: dict[str, Any], due: datetime, active: list[dict[str, Any]], policy: str
    ) -> list[dict[str, Any]]:
        """Start the Job for ``due`` as the concurrency policy allows; the active Jobs after."""
        name = f"{cj['metadata']['name']}-{int(due.timestamp()) // 60}"
        if any(j["metadata"]["name"] == name for j in active):
            return active
        if active and policy == "Forbid":
            return active
        if active and policy == "Replace":
            for job in active:
                self._delete(cj, job)
            active = []
        job = self._job(cj, name, due)
        stored = self.plane.create(JOBS, cj["metadata"].get("namespace", ""), job)
        if stored is None:
            return active
        self.plane.events.emit(cj, NORMAL, "SuccessfulCreate", f"Created job {name}", COMPONENT)
        return [*active, stored]

    @staticmethod
    def _job(cj: dict[str, Any], name: str, due: datetime) -> dict[str, Any]:
        template = (cj.get("spec") or {}).get("jobTemplate") or {}
        meta = template.get("metadata") or {}
        annotations = {**(meta.get("annotations") or {}), SCHEDULED_AT: _stamp(due)}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": cj["metadata"].get("namespace", ""),
                "labels": dict(meta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [owner_reference(cj)],
            },
            "spec": dict(template.get("spec") or {}),
        }

    def _collect(
        self,
        cj: dict[str, Any],
        jobs: list[dict[str, Any]],
        spec: dict[str, Any],
        status: dict[str, Any],
    ) -> None:
        """Report finished Jobs once, note the latest success, trim the history."""
        finished: dict[str, list[dict[str, Any]]] = {"Complete": [], "Failed": []}
        for job in jobs:
            verdict = _finished(job)
            if not verdict or not alive(job):
                continue
            finished[verdict].append(job)
            uid = job["metadata"]["uid"]
            if uid not in self._seen:
                self._seen.add(uid)
                message = f"Saw completed job: {job['metadata']['name']}, status: {verdict}"
                self.plane.events.emit(cj, NORMAL, "SawCompletedJob", message, COMPONENT)
            done = (job.get("status") or {}).get("completionTime")
            if verdict == "Complete" and done and done > str(status.get("lastSuccessfulTime", "")):
                status["lastSuccessfulTime"] = done
        limits = {
            "Complete": spec.get("successfulJobsHistoryLimit", 3),
            "Failed": spec.get("failedJobsHistoryLimit", 1),
        }
        for verdict, kept in finished.items():
            limit = limits[verdict] if isinstance(limits[verdict], int) else 0
            for job in kept[: max(0, len(kept) - limit)]:  # names sort by scheduled time
                self._delete(cj, job)

    def _delete(self, cj: dict[str, Any], job: dict[str, Any]) -> None:
        self.plane.delete(JOBS, job)
        message = f"Deleted job {job['metadata']['name']}"
        self.plane.events.emit(cj, NORMAL, "SuccessfulDelete", message, COMPONENT)
