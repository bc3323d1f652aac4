"""``drive_once``: the daemon's per-pass body, run against the pure cluster model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.rollout import (
    Action,
    Observation,
    RollingState,
    RolloutDriver,
    RolloutRecord,
    RolloutSettings,
    Step,
    drive_once,
)
from tests.rollout.sim import Cluster
from tests.rollout.test_machine import PLAN, T0


@dataclass
class SimDriver:
    cluster: Cluster
    digest: str = "d1"
    executed: list[Action] = field(default_factory=list)

    def observe(self, desired_version: str, now: datetime) -> Observation:
        return self.cluster.observe(now, desired_version, self.digest)

    def execute(self, actions: Sequence[Action]) -> None:
        self.executed.extend(actions)
        for action in actions:
            self.cluster.apply(action)


def passes(
    driver: RolloutDriver,
    cluster: Cluster,
    record: RolloutRecord | None,
    *,
    running: str,
    desired: str,
) -> Iterator[Step]:
    """Run passes until nothing is left to do; yields each step."""
    plan = RolloutSettings(batches=PLAN)
    now = T0
    for _ in range(300):
        out = drive_once(record, plan, driver, running=running, desired=desired, now=now)
        if out is None:
            return
        yield out
        record = out.record
        if out.next_look is None and not out.actions:
            return
        cluster.tick(1)
        now += timedelta(seconds=1)


def test_nothing_to_roll_when_running_is_desired() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    assert list(passes(SimDriver(cluster), cluster, None, running="1.0.0", desired="1.0.0")) == []


def test_a_rollout_runs_to_success_one_transition_per_pass() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    steps = list(passes(SimDriver(cluster), cluster, None, running="1.0.0", desired="2.0.0"))
    assert steps[0].record.state is RollingState.INITIALIZING
    assert steps[-1].record.state is RollingState.SUCCEEDED
    assert cluster.versions() == {"2.0.0"} and cluster.copy_replicas is None


def test_a_failed_rollout_is_not_started_again_by_later_passes() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0", bad=True)
    driver = SimDriver(cluster)
    steps = list(passes(driver, cluster, None, running="1.0.0", desired="2.0.0"))
    failed = steps[-1].record
    assert failed.state is RollingState.FAILED
    again = drive_once(
        failed, RolloutSettings(batches=PLAN), driver, running="1.0.0", desired="2.0.0", now=T0
    )
    assert again is not None and again.record == failed and again.actions == ()
    driver.digest = "d2"  # the instance file changed: a new rollout starts
    retried = drive_once(
        failed, RolloutSettings(batches=PLAN), driver, running="1.0.0", desired="2.0.0", now=T0
    )
    assert retried is not None and retried.record.state is RollingState.INITIALIZING
