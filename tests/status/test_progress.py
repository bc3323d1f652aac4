"""The batch rows of `rollout status`: which batches are done, in flight, waiting, pending."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.status.progress import batch_rows

BASE = RolloutRecord(
    from_version="1.0.0",
    to_version="2.0.0",
    state=RollingState.ROLLING,
    batches=3,
    batch=2,
    batch_state=BatchState.VERIFYING,
    replicas=Replicas(5, 3, 5),
    targets=(1, 3, 5),
)


@pytest.mark.parametrize(
    ("changes", "states"),
    [
        ({}, ["done", "in flight", "pending"]),
        ({"batch_state": BatchState.READY}, ["done", "done", "in flight"]),
        ({"batch_state": BatchState.READY, "paused": True}, ["done", "done", "paused"]),
        ({"paused": True}, ["done", "paused", "pending"]),
        (
            {"state": RollingState.WAITING, "batch": 1, "batch_state": BatchState.READY},
            ["done", "waiting for promotion", "pending"],
        ),
        ({"state": RollingState.INITIALIZING, "batch": 0}, ["in flight", "pending", "pending"]),
        ({"state": RollingState.FAILED}, ["done", "failed", "pending"]),
        ({"state": RollingState.ROLLED_BACK}, ["done", "rolled back", "pending"]),
        ({"state": RollingState.ABANDONED}, ["done", "abandoned", "pending"]),
        ({"state": RollingState.FINALISING, "batch": 3}, ["done", "done", "done"]),
        ({"state": RollingState.SUCCEEDED, "batch": 3}, ["done", "done", "done"]),
    ],
)
def test_batch_states(changes: dict[str, object], states: list[str]) -> None:
    rows = batch_rows(replace(BASE, **changes))  # type: ignore[arg-type]
    assert [r["state"] for r in rows] == states
    assert [r["target"] for r in rows] == [1, 3, 5]


def test_a_record_without_targets_shows_none() -> None:
    assert [r["target"] for r in batch_rows(replace(BASE, targets=()))] == [None, None, None]
