"""Commit messages people read with git log, and the trailers history parses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.model.status import InstanceStatus, Phase
from reconciler.status import commit_message, describe_change, parse_trailers
from reconciler.status.messages import summary_of
from reconciler.status.views import age, format_table, status_table

READY = InstanceStatus(
    cluster="prod",
    instance="web",
    app="podinfo",
    phase=Phase.READY,
    version="6.5.0",
    desired_version="6.5.0",
    source="channel:stable",
    source_commit="1a2b3c4d5e6f7a8b",
    objects=7,
)

ROLLING = RolloutRecord(
    from_version="6.5.0",
    to_version="6.6.0",
    state=RollingState.ROLLING,
    batches=3,
    batch=2,
    batch_state=BatchState.ROLLING,
    replicas=Replicas(desired=5, updated=3, ready=5),
    started_at="2026-01-01T00:00:00Z",
)


def test_subject_body_and_trailers() -> None:
    new = replace(READY, version="6.6.0", desired_version="6.6.0")
    message = commit_message(new, READY)
    subject, _, rest = message.partition("\n\n")
    assert subject == "prod/web: upgraded podinfo 6.5.0 -> 6.6.0 (Ready)"
    assert "Version: 6.5.0 -> 6.6.0" in rest
    assert "Source: channel:stable at 1a2b3c4d5e6f" in rest
    assert message.rstrip().endswith(
        "Reconciler-Cluster: prod\nReconciler-Instance: web\nReconciler-Phase: Ready\n"
        "Reconciler-Version: 6.6.0\nReconciler-Source-Commit: 1a2b3c4d5e6f7a8b"
    )


def test_what_happened_in_words() -> None:
    stalled = replace(
        READY,
        phase=Phase.STALLED,
        reason="DowngradeBlocked",
        message="6.4.0 is lower than deployed 6.5.0",
    )
    assert describe_change(stalled, READY) == (
        "podinfo 6.5.0 (Stalled: DowngradeBlocked) 6.4.0 is lower than deployed 6.5.0"
    )
    assert describe_change(READY, None) == "podinfo 6.5.0 (Ready)"
    installing = replace(READY, version=None, desired_version="6.6.0", phase=Phase.PROGRESSING)
    assert describe_change(installing, None) == "installing podinfo 6.6.0 (Progressing)"
    down = replace(READY, version="6.4.0")
    assert describe_change(down, READY) == "downgraded podinfo 6.5.0 -> 6.4.0 (Ready)"
    moving = replace(READY, desired_version="6.6.0", phase=Phase.PROGRESSING)
    assert describe_change(moving, READY) == "moving podinfo 6.5.0 -> 6.6.0 (Progressing)"
    more = replace(READY, objects=8)
    assert describe_change(more, READY) == "podinfo 6.5.0 objects 7 -> 8 (Ready)"
    rollout = replace(READY, rollout=replace(ROLLING, batch_state=BatchState.VERIFYING))
    assert describe_change(rollout, replace(READY, rollout=ROLLING)) == (
        "podinfo 6.5.0 rollout updated (Ready)"
    )


def test_long_and_multiline_messages_stay_one_subject_line() -> None:
    failed = replace(READY, phase=Phase.FAILED, reason="ApplyFailed", message="x\n" * 200)
    subject = commit_message(failed, READY).split("\n", 1)[0]
    assert len(subject) <= 120 and subject.endswith("...")


def test_parse_trailers_and_summary() -> None:
    trailers = parse_trailers("Reconciler-Cluster: prod\nReconciler-Instance: web\nnoise\n")
    assert trailers == {"Reconciler-Cluster": "prod", "Reconciler-Instance": "web"}
    assert summary_of("prod/web: podinfo 6.5.0 (Ready)", trailers) == "podinfo 6.5.0 (Ready)"
    assert summary_of("hand-made commit", trailers) == "hand-made commit"


def test_status_table_and_age() -> None:
    record = replace(READY, updated_at="2026-01-01T00:00:00Z")
    stalled = replace(
        READY, instance="api", phase=Phase.STALLED, reason="DowngradeBlocked", message="m"
    )
    table = status_table([record, stalled], now=1767225600 + 90)
    lines = table.splitlines()
    assert lines[0].split() == ["INSTANCE", "APP", "VERSION", "DESIRED", "PHASE", "AGE", "MESSAGE"]
    assert lines[1].split() == [
        "api",
        "podinfo",
        "6.5.0",
        "6.5.0",
        "Stalled",
        "-",
        "DowngradeBlocked:",
        "m",
    ]
    assert lines[2].split() == ["web", "podinfo", "6.5.0", "6.5.0", "Ready", "90s"]
    assert age("2026-01-01T00:00:00Z", now=1767225600 + 3 * 86400) == "3d"
    assert age("2026-01-01T00:00:00Z", now=1767225600 + 5 * 3600) == "5h"
    assert age("garbage") == "-"
    assert format_table(("A", "B"), [("x", "y")]) == "A   B\nx   y"


def test_a_ready_batch_is_told_as_spec_section_4_shows() -> None:
    before = replace(READY, phase=Phase.PROGRESSING, rollout=ROLLING)
    ready = replace(before, rollout=replace(ROLLING, batch_state=BatchState.READY))
    message = commit_message(ready, before)
    subject = message.partition("\n")[0]
    assert subject == "prod/web: rollout podinfo 6.5.0 -> 6.6.0: batch 2/3 ready (3/5 replicas)"
    trailers = parse_trailers(message.rstrip().rsplit("\n\n", 1)[1])
    assert trailers["Reconciler-Rollout"] == "6.5.0 -> 6.6.0"
    assert trailers["Reconciler-Rollout-State"] == "rollingInBatches"
    assert trailers["Reconciler-Batch"] == "2/3"
    assert trailers["Reconciler-Replicas"] == "3/5"
    assert trailers["Reconciler-Phase"] == "Progressing"


def test_each_noteworthy_rollout_step_has_its_words() -> None:
    def told(record: RolloutRecord) -> str:
        return describe_change(replace(READY, rollout=record), READY)

    start = replace(ROLLING, state=RollingState.INITIALIZING, batch=0)
    assert told(start) == "rollout podinfo 6.5.0 -> 6.6.0: started, 3 batches"
    waiting = replace(ROLLING, state=RollingState.WAITING, batch=1, batch_state=BatchState.READY)
    assert told(replace(waiting, replicas=Replicas(5, 1, 5))) == (
        "rollout podinfo 6.5.0 -> 6.6.0: batch 1/3 ready, waiting for promotion (1/5 replicas)"
    )
    assert told(replace(ROLLING, paused=True)) == (
        "rollout podinfo 6.5.0 -> 6.6.0: paused at batch 2/3 (3/5 replicas)"
    )
    failed = replace(ROLLING, state=RollingState.FAILED, message="batch 2 pods failing: x")
    assert told(failed) == (
        "rollout podinfo 6.5.0 -> 6.6.0: failed at batch 2/3 (3/5 replicas): batch 2 pods failing: x"
    )
    assert told(replace(ROLLING, state=RollingState.ROLLED_BACK)) == (
        "rollout podinfo 6.5.0 -> 6.6.0: rolled back at batch 2/3"
    )
    assert told(replace(ROLLING, state=RollingState.SUCCEEDED, replicas=Replicas(5, 5, 5))) == (
        "rollout podinfo 6.5.0 -> 6.6.0: succeeded (5/5 replicas)"
    )
    assert told(replace(ROLLING, state=RollingState.ABANDONED)) == (
        "rollout podinfo 6.5.0 -> 6.6.0: abandoned at batch 2/3 (3/5 replicas)"
    )


def test_an_unchanged_rollout_adds_no_rollout_trailers() -> None:
    before = replace(READY, rollout=ROLLING)
    after = replace(READY, rollout=ROLLING, objects=8)
    assert "Reconciler-Rollout" not in commit_message(after, before)
    assert "objects 7 -> 8" in commit_message(after, before)


def run(name: str, outcome: str, duration: float = 41.25, message: str = "") -> dict[str, Any]:
    record = {"name": name, "version": "2.0.0", "phase": "pre", "outcome": outcome}
    return {**record, "duration": duration, **({"message": message} if message else {})}


def test_each_migration_run_is_its_own_commit_in_spec_section_5_words() -> None:
    before = replace(READY, migrations=(run("add-index", "succeeded"),))
    ran = replace(before, migrations=(*before.migrations, run("split-totals", "succeeded")))
    message = commit_message(ran, before)
    assert message.startswith("prod/web: migration split-totals (pre, 2.0.0) succeeded in 41.2s\n")
    assert "\nReconciler-Migration: split-totals succeeded\n" in message
    skipped = replace(READY, migrations=(run("x", "notNeeded", 0.0, "ConfigMap/fin/x exists"),))
    assert describe_change(skipped, None) == (
        "migration x (pre, 2.0.0) not needed: ConfigMap/fin/x exists"
    )
    failed = replace(READY, migrations=(run("x", "failed", 0.05, "Job/fin/x failed\nlog"),))
    assert describe_change(failed, READY) == (
        "migration x (pre, 2.0.0) failed after 50ms: Job/fin/x failed log"
    )
    # the change the runs served: no new record, no migration subject nor trailer
    upgraded = replace(ran, version="6.6.0")
    assert describe_change(upgraded, ran) == "upgraded podinfo 6.5.0 -> 6.6.0 (Ready)"
    assert "Reconciler-Migration" not in commit_message(upgraded, ran)


def test_the_pass_trailer_comes_last_and_only_from_a_pass() -> None:
    """``Reconciler-Pass`` adds to section 3's trailers (they stay first and unchanged)."""
    new = replace(READY, version="6.6.0", desired_version="6.6.0")
    plain = commit_message(new, READY)
    with_pass = commit_message(new, READY, pass_id="1f2e3d4c")
    assert "Reconciler-Pass" not in plain
    assert with_pass == plain.rstrip("\n") + "\nReconciler-Pass: 1f2e3d4c\n"
    trailers = parse_trailers(with_pass.rsplit("\n\n", 1)[1])
    assert trailers["Reconciler-Instance"] == "web" and trailers["Reconciler-Pass"] == "1f2e3d4c"
