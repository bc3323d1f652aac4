"""Status records: file format, bad files, change detection and transition times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.model.status import (
    Condition,
    InstanceStatus,
    Phase,
    StatusFormatError,
    conditions_for,
)
from reconciler.status import StatusFileError, dump_status, parse_status, prepare_record

WEB = InstanceStatus(
    cluster="prod",
    instance="web",
    app="podinfo",
    phase=Phase.PROGRESSING,
    version="6.5.0",
    desired_version="6.6.0",
    source="channel:stable",
    source_commit="1a2b3c",
    objects=7,
    rollout=RolloutRecord(
        from_version="6.5.0",
        to_version="6.6.0",
        state=RollingState.ROLLING,
        batches=3,
        batch=2,
        batch_state=BatchState.VERIFYING,
        replicas=Replicas(desired=5, updated=3, ready=5),
        partition=2,
        started_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:01:00Z",
        batch_started_at="2026-01-01T00:00:40Z",
    ),
    migrations=({"name": "add-index", "outcome": "Succeeded"},),
)


def test_file_round_trips_with_the_keys_of_the_spec() -> None:
    record = prepare_record(WEB, None, now="2026-01-01T00:00:00Z").status
    text = dump_status(record).decode()
    assert text.startswith("apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: prod\n")
    for key in ("desiredVersion: 6.6.0", "sourceCommit: 1a2b3c", "phase: Progressing"):
        assert key in text
    assert parse_status(text.encode(), "instances/web.yaml") == record
    kinds = [c.type for c in record.conditions]
    assert kinds == ["Ready", "Reconciling"]


def test_unknown_keys_survive_a_round_trip() -> None:
    data = dump_status(WEB).decode() + "observedGeneration: 3\n"
    parsed = parse_status(data.encode(), "instances/web.yaml")
    assert parsed.extra == {"observedGeneration": 3}
    assert b"observedGeneration: 3" in dump_status(parsed)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a: 1\nphase: [unclosed\n", "instances/web.yaml:3: invalid YAML"),
        (b"\xff\xfe", "not UTF-8"),
        (b"- a list\n", "expected a mapping"),
        (b"apiVersion: reconciler/v1\nkind: Other\n", "kind must be InstanceStatus"),
        (b"apiVersion: v2\nkind: InstanceStatus\n", "apiVersion must be reconciler/v1"),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Happy\n",
            "phase must be one of",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nconditions: {a: 1}\n",
            "conditions must be a list",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nconditions: [{type: Ready, status: Maybe}]\n",
            "status must be one of True, False, Unknown",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nobjects: many\n",
            "objects must be an integer",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: api\n"
            b"phase: Ready\n",
            "instance is 'api', expected 'web'",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ninstance: web\nphase: Ready\n",
            "cluster is required",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nrollout: [1]\n",
            "rollout must be a mapping",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nrollout: {from: 1.0.0, to: 2.0.0, state: flying, batches: 3,"
            b" batchState: batchReady}\n",
            "rollout.state must be one of initializing",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nrollout: {from: 1.0.0, to: 2.0.0, state: rolloutSucceed,"
            b" batches: 3, batch: 4, batchState: batchReady}\n",
            "rollout.batch 4 is beyond batches 3",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nrollout: {from: 1.0.0, to: 2.0.0, state: rolloutSucceed,"
            b" batches: 3, batchState: batchReady, replicas: {desired: -1}}\n",
            "rollout.replicas.desired must be a count",
        ),
        (
            b"apiVersion: reconciler/v1\nkind: InstanceStatus\ncluster: p\ninstance: web\n"
            b"phase: Ready\nrollout: {to: 2.0.0, state: rolloutSucceed,"
            b" batches: 3, batchState: batchReady}\n",
            "rollout.from is required",
        ),
    ],
)
def test_bad_files_are_reported_with_the_file_name(content: bytes, message: str) -> None:
    with pytest.raises(StatusFileError, match=r"instances/web\.yaml") as info:
        parse_status(content, "instances/web.yaml")
    assert message in str(info.value)


def test_same_state_is_not_a_change_and_keeps_timestamps() -> None:
    first = prepare_record(WEB, None, now="2026-01-01T00:00:00Z")
    assert first.changed and first.status.updated_at == "2026-01-01T00:00:00Z"
    again = prepare_record(WEB, first.status, now="2026-01-02T00:00:00Z")
    assert not again.changed
    assert again.status == first.status


def test_transition_time_carries_over_while_condition_status_holds() -> None:
    first = prepare_record(WEB, None, now="2026-01-01T00:00:00Z").status
    progressed = replace(WEB, objects=8)
    second = prepare_record(progressed, first, now="2026-01-02T00:00:00Z")
    assert second.changed and second.status.updated_at == "2026-01-02T00:00:00Z"
    ready = second.status.condition("Ready")
    assert ready is not None and ready.last_transition_time == "2026-01-01T00:00:00Z"
    done = prepare_record(
        replace(WEB, phase=Phase.READY), second.status, now="2026-01-03T00:00:00Z"
    )
    ready = done.status.condition("Ready")
    assert ready is not None and ready.status == "True"
    assert ready.last_transition_time == "2026-01-03T00:00:00Z"


def test_conditions_for_every_phase() -> None:
    assert [c.status for c in conditions_for(Phase.READY)] == ["True"]
    stalled = conditions_for(Phase.STALLED, "DowngradeBlocked", "6.4.0 < 6.5.0")
    assert [(c.type, c.status, c.reason) for c in stalled] == [
        ("Ready", "False", "DowngradeBlocked"),
        ("Stalled", "True", "DowngradeBlocked"),
    ]
    assert conditions_for(Phase.FAILED)[1].reason == "Failed"
    assert conditions_for(Phase.SUSPENDED)[0].status == "Unknown"


def test_explicit_conditions_are_kept() -> None:
    cond = Condition("Ready", "False", "HealthCheckFailed", "pods not ready", "")
    record = prepare_record(replace(WEB, conditions=(cond,)), None, now="2026-01-01T00:00:00Z")
    assert record.status.conditions == (replace(cond, last_transition_time="2026-01-01T00:00:00Z"),)


def test_condition_from_dict_rejects_non_mappings() -> None:
    with pytest.raises(StatusFormatError, match="must be a mapping"):
        Condition.from_dict("Ready")


def test_a_new_source_commit_alone_is_not_a_change() -> None:
    """A catalog commit for another app must not write a status commit for this instance."""
    before = prepare_record(WEB, None, now="2026-01-01T00:00:00Z").status
    again = prepare_record(replace(WEB, source_commit="9f9f9f"), before, now="2026-02-01T00:00:00Z")
    assert not again.changed
    assert again.status.source_commit == "1a2b3c"  # where this state was established
    moved = prepare_record(
        replace(WEB, source_commit="9f9f9f", version="6.6.0"), before, now="2026-02-01T00:00:00Z"
    )
    assert moved.changed and moved.status.source_commit == "9f9f9f"


def test_rollout_round_trips_with_the_keys_of_section_4() -> None:
    text = dump_status(WEB).decode()
    parsed = parse_status(text.encode(), "instances/web.yaml")
    assert parsed.rollout == WEB.rollout
    data = WEB.to_dict()["rollout"]
    spec_keys = {"from", "to", "state", "batch", "batches", "batchState", "replicas"}
    spec_keys |= {"partition", "paused", "startedAt", "updatedAt", "message"}
    assert spec_keys <= set(data)
    assert data["replicas"] == {"desired": 5, "updated": 3, "ready": 5}
    assert data["state"] == "rollingInBatches" and data["batchState"] == "batchVerifying"


def test_pods_moving_within_a_batch_is_not_a_change_but_a_ready_batch_is() -> None:
    assert WEB.rollout is not None
    first = prepare_record(WEB, None, now="2026-01-01T00:00:00Z").status
    moving = replace(
        WEB, rollout=replace(WEB.rollout, replicas=Replicas(5, 4, 5), updated_at="later")
    )
    assert not prepare_record(moving, first, now="2026-01-01T00:00:05Z").changed
    ready = replace(WEB, rollout=replace(WEB.rollout, batch_state=BatchState.READY))
    assert prepare_record(ready, first, now="2026-01-01T00:00:05Z").changed
