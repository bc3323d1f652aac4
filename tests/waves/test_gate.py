"""The wave gate (SPEC section 4b) as a pure function: every way it opens, waits and halts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.model.rollout import RollingState, RolloutRecord
from reconciler.model.status import InstanceStatus, Phase
from reconciler.model.waves import Approval, Wave, Waves
from reconciler.waves import (
    Halted,
    Open,
    SeenRecord,
    Waiting,
    change_waits,
    gate,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FRESH = "c" * 40
STALE = "a" * 40

WAVES = Waves(
    waves=(
        Wave("canary", names=("staging", "prod-canary")),
        Wave("eu", names=("prod-eu-*",), soak=3600, soak_text="1h", approval=True),
        Wave("rest", names=("*",), soak=1800, soak_text="30m", max_failures=1),
    ),
    approvals=(Approval("podinfo", "6.6.0", "eu"),),
    members={"staging": 0, "prod-canary": 0, "prod-eu-1": 1, "prod-us": 2, "prod-ap": 2},
)
INSTANCES = {
    "staging": ["web"],
    "prod-canary": ["web"],
    "prod-eu-1": ["web", "api"],
    "prod-us": ["web"],
    "prod-ap": [],
}


def fresh(cluster: str, instance: str, status: InstanceStatus) -> bool:
    return status.source_commit == FRESH


def seen(
    cluster: str,
    instance: str,
    version: str | None,
    phase: Phase = Phase.READY,
    *,
    since: datetime = T0,
    commit: str = FRESH,
    desired: str | None = None,
    reason: str = "",
    rollout: RolloutRecord | None = None,
) -> tuple[tuple[str, str], SeenRecord]:
    status = InstanceStatus(
        cluster=cluster,
        instance=instance,
        app="podinfo",
        phase=phase,
        version=version,
        desired_version=desired or version,
        source_commit=commit,
        reason=reason,
        rollout=rollout,
    )
    return (cluster, instance), SeenRecord(status, since)


def canary_ready(**kwargs: object) -> dict[tuple[str, str], SeenRecord]:
    return dict(
        [
            seen("staging", "web", "6.6.0", **kwargs),  # type: ignore[arg-type]
            seen("prod-canary", "web", "6.6.0", **kwargs),  # type: ignore[arg-type]
        ]
    )


def decide(
    cluster: str,
    records: dict[tuple[str, str], SeenRecord],
    *,
    version: str = "6.6.0",
    now: datetime = T0 + timedelta(hours=2),
    waves: Waves = WAVES,
) -> object:
    return gate(waves, waves.wave_of(cluster), "podinfo", version, INSTANCES, records, fresh, now)


def test_first_wave_is_open() -> None:
    decision = decide("staging", {})
    assert isinstance(decision, Open) and decision.wave == "canary"


def test_waits_for_an_earlier_instance_without_a_record() -> None:
    records = dict([seen("staging", "web", "6.6.0")])
    decision = decide("prod-eu-1", records)
    assert isinstance(decision, Waiting) and decision.remaining is None
    assert decision.message == "waiting for wave canary: prod-canary/web has no status record yet"


def test_waits_for_an_instance_still_on_the_old_version_or_progressing() -> None:
    records = dict(
        [
            seen("staging", "web", "6.5.0", Phase.PROGRESSING, desired="6.6.0"),
            seen("prod-canary", "web", "6.6.0", Phase.PROGRESSING),
        ]
    )
    decision = decide("prod-eu-1", records)
    assert isinstance(decision, Waiting)
    assert decision.message == (
        "waiting for wave canary: prod-canary/web 6.6.0 is Progressing (and 1 more)"
    )
    records.update([seen("prod-canary", "web", "6.6.0")])
    decision = decide("prod-eu-1", records)
    assert isinstance(decision, Waiting)
    assert decision.message == "waiting for wave canary: staging/web runs 6.5.0 (Progressing)"


def test_soak_counts_from_the_status_commit_and_says_what_remains() -> None:
    records = canary_ready(since=T0)
    decision = decide("prod-eu-1", records, now=T0 + timedelta(minutes=12))
    assert isinstance(decision, Waiting)
    assert decision.message == "waiting for wave canary: prod-canary/web 6.6.0 Ready for 12m of 1h"
    assert decision.remaining == pytest.approx(48 * 60)
    # the least soaked instance is the one named
    records.update([seen("staging", "web", "6.6.0", since=T0 + timedelta(minutes=10))])
    decision = decide("prod-eu-1", records, now=T0 + timedelta(minutes=12))
    assert isinstance(decision, Waiting) and "staging/web 6.6.0 Ready for 2m of 1h" in (
        decision.message
    )
    assert isinstance(decide("prod-eu-1", records, now=T0 + timedelta(minutes=70)), Open)


def test_a_soak_later_in_its_course_is_the_same_wait() -> None:
    records = canary_ready(since=T0)
    early = decide("prod-eu-1", records, now=T0 + timedelta(minutes=12))
    later = decide("prod-eu-1", records, now=T0 + timedelta(minutes=40))
    assert isinstance(early, Waiting) and isinstance(later, Waiting)
    assert later.message.endswith("Ready for 40m of 1h")
    assert later.same_wait(early.message) and later.same_wait(later.message)
    # another instance, another version, another wait: not the same
    assert not later.same_wait(early.message.replace("prod-canary/web", "staging/web"))
    assert not later.same_wait(early.message.replace("6.6.0", "6.6.1"))
    assert not later.same_wait("waiting for wave canary: prod-canary/web 6.6.0 Ready for  of 1h")
    waiting = decide("prod-eu-1", dict([seen("staging", "web", "6.6.0")]))
    assert isinstance(waiting, Waiting) and waiting.soak_frame is None
    assert not waiting.same_wait(early.message) and waiting.same_wait(waiting.message)


def test_approval_is_bound_to_app_and_version() -> None:
    records = canary_ready()
    assert isinstance(decide("prod-eu-1", records), Open)
    records = dict([seen("staging", "web", "6.7.0"), seen("prod-canary", "web", "6.7.0")])
    decision = decide("prod-eu-1", records, version="6.7.0")
    assert isinstance(decision, Waiting) and decision.remaining is None
    assert decision.message == (
        "waiting for an approval of wave eu for podinfo 6.7.0 "
        "(reconciler wave approve podinfo 6.7.0 --wave eu)"
    )


def test_approval_on_the_first_wave() -> None:
    waves = Waves(waves=(Wave("canary", names=("*",), approval=True),), members={"staging": 0})
    assert isinstance(decide("staging", {}, waves=waves), Waiting)
    approved = Waves(
        waves=waves.waves,
        approvals=(Approval("podinfo", "6.6.0", "canary"),),
        members=waves.members,
    )
    assert isinstance(decide("staging", {}, waves=approved), Open)


def test_later_wave_needs_every_earlier_wave_soaked_for_its_own_soak() -> None:
    records = canary_ready()
    records.update([seen("prod-eu-1", "web", "6.6.0", since=T0 + timedelta(hours=1))])
    records.update([seen("prod-eu-1", "api", "6.6.0", since=T0 + timedelta(hours=1))])
    decision = decide("prod-us", records, now=T0 + timedelta(hours=1, minutes=20))
    assert isinstance(decision, Waiting)
    assert decision.message.startswith("waiting for wave eu: prod-eu-1/")
    assert "Ready for 20m of 30m" in decision.message
    assert isinstance(decide("prod-us", records, now=T0 + timedelta(hours=1, minutes=31)), Open)


def test_a_wave_with_no_instance_of_the_app_passes_through() -> None:
    instances = {**INSTANCES, "prod-eu-1": []}
    decision = gate(
        WAVES,
        WAVES.wave_of("prod-us"),
        "podinfo",
        "6.6.0",
        instances,
        canary_ready(),
        fresh,
        T0 + timedelta(hours=2),
    )
    assert isinstance(decision, Open)


def test_a_stale_ready_from_an_older_release_never_opens() -> None:
    records = canary_ready(commit=STALE)
    decision = decide("prod-eu-1", records, now=T0 + timedelta(days=30))
    assert isinstance(decision, Waiting)
    assert "6.6.0 Ready is from an older release (catalog aaaaaaaaaaaa predates it)" in (
        decision.message
    )


def test_a_stale_failure_does_not_halt() -> None:
    records = canary_ready()
    records.update([seen("staging", "web", "6.6.0", Phase.FAILED, commit=STALE)])
    decision = decide("prod-eu-1", records)
    assert isinstance(decision, Waiting) and "older release" in decision.message


@pytest.mark.parametrize(
    "failure",
    [
        {"phase": Phase.FAILED},
        {"phase": Phase.STALLED, "reason": "HealthCheckFailed"},
        {"phase": Phase.STALLED, "reason": "RolloutFailed", "version": "6.5.0", "desired": "6.6.0"},
        {
            "phase": Phase.READY,
            "version": "6.5.0",
            "desired": "6.6.0",
            "rollout": RolloutRecord("6.5.0", "6.6.0", RollingState.ROLLED_BACK, 3),
        },
    ],
    ids=["failed", "stalled", "stalled-on-the-way", "rolled-back"],
)
def test_failures_beyond_max_failures_halt(failure: dict[str, object]) -> None:
    records = canary_ready()
    version = failure.pop("version", "6.6.0")
    records.update([seen("staging", "web", version, **failure)])  # type: ignore[arg-type]
    decision = decide("prod-eu-1", records)  # eu: maxFailures 0
    assert isinstance(decision, Halted)
    assert decision.failed == ("staging/web",)
    assert decision.message.startswith(
        "halted: podinfo 6.6.0 failed in earlier waves on staging/web (1 > maxFailures 0)"
    )


def test_failures_within_max_failures_do_not_halt() -> None:
    records = canary_ready()
    records.update(
        [
            seen("prod-eu-1", "web", "6.6.0"),
            seen("prod-eu-1", "api", "6.6.0", Phase.FAILED),
        ]
    )
    decision = decide("prod-us", records)  # rest: maxFailures 1
    assert isinstance(decision, Open)
    assert "1 failure(s) within maxFailures" in decision.message
    records.update([seen("staging", "web", "6.6.0", Phase.FAILED)])
    decision = decide("prod-us", records)
    assert isinstance(decision, Halted)
    assert decision.failed == ("prod-eu-1/api", "staging/web")


def test_an_earlier_wave_held_by_waves_is_not_a_failure() -> None:
    records = canary_ready()
    records.update(
        [
            seen("prod-eu-1", "web", "6.5.0", Phase.STALLED, desired="6.6.0", reason="WaveHalted"),
            seen(
                "prod-eu-1",
                "api",
                "6.5.0",
                Phase.PROGRESSING,
                desired="6.6.0",
                reason="WaitingForWave",
            ),
        ]
    )
    decision = decide("prod-us", records)
    assert isinstance(decision, Waiting)
    assert decision.message.startswith("waiting for wave eu: prod-eu-1/web runs 6.5.0")


def test_failures_of_another_version_do_not_count() -> None:
    records = canary_ready()
    records.update([seen("staging", "web", "6.6.0", Phase.READY)])
    records.update([seen("prod-canary", "web", "6.6.0", Phase.READY)])
    other = dict([seen("prod-eu-1", "web", "6.4.0", Phase.FAILED)])
    records.update(other)
    decision = decide("prod-eu-1", records)
    assert isinstance(decision, Open)


def test_a_cluster_in_no_wave_waits_for_every_wave() -> None:
    waves = Waves(waves=WAVES.waves[:1], members={"staging": 0, "prod-canary": 0})
    decision = decide("prod-us", {}, waves=waves)
    assert isinstance(decision, Waiting) and decision.wave == "(after every wave)"
    assert isinstance(decide("prod-us", canary_ready(), waves=waves), Open)


def test_gate_by_index_gives_every_wave_its_answer() -> None:
    answers = [
        gate(
            WAVES, i, "podinfo", "6.6.0", INSTANCES, canary_ready(), fresh, T0 + timedelta(hours=2)
        )
        for i in range(3)
    ]
    assert [type(a).__name__ for a in answers] == ["Open", "Open", "Waiting"]
    assert [a.wave for a in answers] == ["canary", "eu", "rest"]


@pytest.mark.parametrize(
    ("source", "deployed", "target", "rollback_to", "waits"),
    [
        ("channel:stable", "6.5.0", "6.6.0", None, True),
        ("range:>=6.0.0", "6.5.0", "6.6.0", None, True),
        ("latest", "6.5.0", "6.6.0", None, True),
        ("exact", "6.5.0", "6.6.0", None, False),
        ("channel:stable", None, "6.6.0", None, False),
        ("channel:stable", "6.6.0", "6.6.0", None, False),
        ("channel:stable", "6.6.0", "6.5.0", "6.5.0", False),
        ("channel:stable", "6.6.0", "6.5.0", None, False),
        ("channel:stable", "6.6.0", None, None, False),
    ],
)
def test_who_waits(
    source: str, deployed: str | None, target: str | None, rollback_to: str | None, waits: bool
) -> None:
    assert change_waits(source, deployed, target, rollback_to) is waits
