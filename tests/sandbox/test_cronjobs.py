"""The CronJob controller: Jobs on schedule, concurrency, suspension and history.

Pages imitated: https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/
(schedule syntax and time zones, ``concurrencyPolicy``, ``suspend``, the jobs history
limits, "Jobs are named <cronjob>-<scheduled time in minutes>").
The schedule minute is shrunk to a fraction of a second (``Timing.cron_minute``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.cron import parse
from reconciler.sandbox.cronjobs import SCHEDULED_AT, latest_time, next_time
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.sandbox.helpers import eventually, job
from tests.sandbox.workloads import fast_sandbox

# a schedule minute lasts 0.1 s: "every minute" fires ten times a second
QUICK = Timing(
    pod_grace_scale=TEST_GRACE_SCALE,
    controller_delay=0.01,
    pod_start=0.01,
    job_duration=0.02,
    cron_minute=0.1,
)


@pytest.fixture
def batch() -> Iterator[client.BatchV1Api]:
    with fast_sandbox(QUICK) as (_, api):
        yield client.BatchV1Api(api)


def cronjob(name: str, schedule: str = "* * * * *", **spec: Any) -> dict[str, Any]:
    body = job(name, schedule)
    body["spec"].update(spec)
    body["spec"]["jobTemplate"]["metadata"] = {"labels": {"app": name}}
    return body


def jobs_of(batch: client.BatchV1Api, name: str) -> list[Any]:
    return list(batch.list_namespaced_job("default", label_selector=f"app={name}").items)


def test_jobs_are_made_on_schedule_and_the_history_is_trimmed(batch: client.BatchV1Api) -> None:
    batch.create_namespaced_cron_job("default", cronjob("tick"))
    core = client.CoreV1Api(batch.api_client)

    def trimmed() -> set[str]:
        """The reasons recorded, once old successes were deleted and three at most remain."""
        events = core.list_namespaced_event("default").items
        reasons = {e.reason for e in events if e.involved_object.name == "tick"}
        done = [j for j in jobs_of(batch, "tick") if j.status.succeeded]
        return reasons if "SuccessfulDelete" in reasons and len(done) <= 3 else set()

    reasons = eventually(trimmed)
    assert {"SuccessfulCreate", "SawCompletedJob"} <= reasons
    cj = batch.read_namespaced_cron_job("tick", "default")
    assert cj.status.last_schedule_time and cj.status.last_successful_time
    for j in jobs_of(batch, "tick"):
        owner = j.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("CronJob", "tick", True)
        minutes = int(j.metadata.name.removeprefix("tick-"))
        scheduled = j.metadata.annotations[SCHEDULED_AT]
        stamp = datetime.strptime(scheduled, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert minutes * 60 == stamp.timestamp()


def test_forbid_runs_one_job_at_a_time(batch: client.BatchV1Api) -> None:
    body = cronjob("long", concurrencyPolicy="Forbid")
    body["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] = 3600
    body["metadata"]["annotations"] = {}
    body["spec"]["jobTemplate"]["spec"]["template"]["metadata"] = {
        "annotations": {"sandbox.reconciler.dev/fail": "ImagePullBackOff"}  # never finishes
    }
    batch.create_namespaced_cron_job("default", body)
    first = eventually(lambda: jobs_of(batch, "long"))
    for _ in range(10):  # ten schedule minutes later: still the one Job
        eventually(lambda: batch.read_namespaced_cron_job("long", "default").status.active)
    assert [j.metadata.name for j in jobs_of(batch, "long")] == [first[0].metadata.name]
    cj = batch.read_namespaced_cron_job("long", "default")
    assert [a.name for a in cj.status.active] == [first[0].metadata.name]


def test_a_suspended_cronjob_starts_nothing(batch: client.BatchV1Api) -> None:
    batch.create_namespaced_cron_job("default", cronjob("held", suspend=True))
    batch.create_namespaced_cron_job("default", cronjob("runs"))
    eventually(lambda: len(jobs_of(batch, "runs")) >= 2)  # many schedule minutes passed
    assert jobs_of(batch, "held") == []
    assert batch.read_namespaced_cron_job("held", "default").status.last_schedule_time is None


def test_next_and_latest_times() -> None:
    at = datetime(2026, 3, 1, 10, 7, 30, tzinfo=UTC)  # a Sunday
    assert next_time(parse("*/15 * * * *"), at) == datetime(2026, 3, 1, 10, 15, tzinfo=UTC)
    assert next_time(parse("0 9 * * MON"), at) == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    # day of month and weekday both restricted: either one matches
    assert next_time(parse("0 0 13 * FRI"), at) == datetime(2026, 3, 6, 0, 0, tzinfo=UTC)
    assert next_time(parse("@yearly"), at) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_time(parse("0 0 30 2 *"), at) is None  # February has no 30th
    later = datetime(2026, 3, 1, 11, 0, 1, tzinfo=UTC)
    assert latest_time(parse("*/15 * * * *"), at, later) == datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
    assert latest_time(parse("0 0 * * *"), at, later) is None


def test_a_schedule_runs_in_its_time_zone() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    at = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)  # 11:00 in Berlin
    due = next_time(parse("0 9 * * *"), at.astimezone(berlin))
    assert due == datetime(2026, 3, 2, 9, 0, tzinfo=berlin)
    assert due is not None and due.astimezone(UTC).hour == 8


@pytest.mark.parametrize(
    ("zone", "message"),
    [
        ("Mars/Base", "unknown time zone Mars/Base"),
        (
            "Local",
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ),
        ("", "timeZone must be nil or non-empty string"),
    ],
)
def test_an_unknown_time_zone_is_refused(batch: client.BatchV1Api, zone: str, message: str) -> None:
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_cron_job("default", cronjob("zoned", timeZone=zone))
    assert refused.value.status == 422
    cause = json.loads(refused.value.body)["details"]["causes"][0]
    assert cause["field"] == "spec.timeZone" and cause["message"].endswith(message)
