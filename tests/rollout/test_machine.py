"""The rollout state machine against a pure model of the cluster (tests/rollout/sim.py).

Every test drives ``step`` one transition per call, as the daemon does, applies the
actions to the model, lets time pass, and checks the invariants of SPEC section 4
after every transition.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.catalog import Batch, Promotion
from reconciler.rollout import (
    BatchState,
    Consolidate,
    Observation,
    Prepare,
    RetireOld,
    RollingState,
    RolloutRecord,
    RolloutSettings,
    RunAnalysis,
    ScaleBatch,
    Step,
    Workload,
    begin,
    noteworthy,
    plan_batches,
    retry_allowed,
    step,
)
from tests.rollout.sim import Cluster

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PLAN = (Batch(1), Batch(50, percent=True), Batch(50, percent=True))


def run(
    cluster: Cluster,
    plan: RolloutSettings,
    *,
    desired: str = "2.0.0",
    readiness: list[int] | None = None,
    limit: int = 400,
    on_step: object = None,
) -> list[RolloutRecord]:
    """Drive a rollout to an end (or a gate); returns every record, checking invariants."""
    now = T0
    out = begin(cluster.from_v, cluster.to_v, plan, cluster.observe(now, desired))
    records = [out.record]
    speeds = readiness or [1]
    for i in range(limit):
        for action in out.actions:
            cluster.apply(action)
        cluster.tick(speeds[i % len(speeds)])
        now += timedelta(seconds=1)
        check_invariants(cluster, plan, out.record)
        if out.record.state.terminal and not out.actions:
            break
        if out.next_look is None and not out.actions:
            break
        out = step(out.record, plan, cluster.observe(now, desired))
        if out.record != records[-1]:
            records.append(out.record)
        if callable(on_step):
            on_step(out)
    return records


def check_invariants(cluster: Cluster, plan: RolloutSettings, record: RolloutRecord) -> None:
    assert cluster.versions() <= {cluster.from_v, cluster.to_v}
    to_pods = sum(p.version == cluster.to_v for p in cluster.pods)
    assert to_pods <= cluster.desired
    if not cluster.bad and record.state is not RollingState.ROLLED_BACK:
        assert cluster.ready() >= cluster.desired  # maxUnavailable 0: never below desired
    if record.batch_state is BatchState.READY and record.state in (
        RollingState.ROLLING,
        RollingState.WAITING,
    ):
        target = plan_batches(cluster.desired, plan.batches)[record.batch - 1]
        assert to_pods == target
        assert sum(p.version == cluster.from_v for p in cluster.pods) == cluster.desired - target


def settings_(**kw: object) -> RolloutSettings:
    return RolloutSettings(batches=PLAN, **kw)  # type: ignore[arg-type]


def test_three_batches_on_five_replicas_succeed_with_one_record_per_step() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_())
    assert records[-1].state is RollingState.SUCCEEDED
    ready = [(r.batch, r.replicas.updated) for r in records if r.batch_state is BatchState.READY]
    assert (1, 1) in ready and (2, 3) in ready
    assert cluster.versions() == {"2.0.0"}
    assert cluster.copy_replicas is None  # no helper object left
    states = [r.state for r in records]
    assert states[0] is RollingState.INITIALIZING and RollingState.FINALISING in states


def test_partition_waits_for_promotion_and_a_raise_continues() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    gated = settings_(partition=1)
    records = run(cluster, gated)
    last = records[-1]
    assert last.state is RollingState.WAITING and last.batch == 1 and last.partition == 1
    assert sum(p.version == "2.0.0" for p in cluster.pods) == 1
    waiting = step(last, gated, cluster.observe(T0 + timedelta(hours=1), "2.0.0"))
    assert waiting.record == replace(last, replicas=waiting.record.replicas)
    assert waiting.actions == () and waiting.next_look is None  # only a commit moves it
    promoted = step(last, settings_(partition=2), cluster.observe(T0, "2.0.0"))
    assert promoted.record.state is RollingState.ROLLING and promoted.record.batch == 2
    removed = step(last, settings_(), cluster.observe(T0, "2.0.0"))
    assert removed.record.batch == 2 and removed.record.partition is None


def test_an_approval_opens_batches_only_for_the_version_it_names() -> None:
    """SPEC section 4: batch b > partition of a rollout to V runs only while
    ``promoted.to == V`` and ``promoted.through >= b``; another version's approval
    is inert, so the gate re-arms for every release."""
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=1))
    waiting = records[-1]
    assert waiting.state is RollingState.WAITING and waiting.batch == 1
    obs = cluster.observe(T0, "2.0.0")
    other = settings_(partition=1, promoted=Promotion(to="1.5.0", through=3))
    inert = step(waiting, other, obs)
    assert inert.record == replace(waiting, replicas=inert.record.replicas)
    assert inert.actions == () and inert.next_look is None
    one_more = step(waiting, settings_(partition=1, promoted=Promotion("2.0.0", 2)), obs)
    assert one_more.record.state is RollingState.ROLLING and one_more.record.batch == 2
    assert one_more.record.partition == 2  # the gate of this rollout: after batch 2
    approved = settings_(partition=1, promoted=Promotion("2.0.0", 2))
    records = run(Cluster(5, "1.0.0", "2.0.0"), approved)
    assert records[-1].state is RollingState.WAITING and records[-1].batch == 2
    everything = settings_(partition=1, promoted=Promotion("2.0.0", 3))
    assert run(Cluster(5, "1.0.0", "2.0.0"), everything)[-1].state is RollingState.SUCCEEDED


def test_the_gate_rearms_for_the_next_release_with_the_old_approval_in_place() -> None:
    settings = settings_(partition=1, promoted=Promotion("2.0.0", 3))
    assert run(Cluster(5, "1.0.0", "2.0.0"), settings)[-1].state is RollingState.SUCCEEDED
    next_release = run(Cluster(5, "2.0.0", "3.0.0"), settings, desired="3.0.0")
    last = next_release[-1]
    assert last.state is RollingState.WAITING and last.batch == 1 and last.partition == 1


def test_withdrawing_an_approval_stops_before_the_next_batch() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    approved = settings_(partition=1, promoted=Promotion("2.0.0", 3))
    withdrawn = settings_(partition=1)
    out = begin("1.0.0", "2.0.0", approved, cluster.observe(T0, "2.0.0"))
    for _ in range(200):  # roll until batch 2 is ready, then the approval goes away
        for action in out.actions:
            cluster.apply(action)
        cluster.tick(1)
        if out.record.batch == 2 and out.record.batch_state is BatchState.READY:
            break
        out = step(out.record, approved, cluster.observe(T0, "2.0.0"))
    stopped = step(out.record, withdrawn, cluster.observe(T0, "2.0.0"))
    assert stopped.record.partition == 1
    held = step(stopped.record, withdrawn, cluster.observe(T0, "2.0.0"))
    assert held.record.state is RollingState.WAITING and held.record.batch == 2


def test_settings_gate_reads_partition_as_policy() -> None:
    assert settings_().gate("2.0.0") is None
    assert settings_(partition=1).gate("2.0.0") == 1
    assert settings_(partition=3).gate("2.0.0") is None  # at the last batch: gates nothing
    mine = settings_(partition=1, promoted=Promotion("2.0.0", 2))
    assert (mine.gate("2.0.0"), mine.gate("3.0.0")) == (2, 1)
    lower = settings_(partition=2, promoted=Promotion("2.0.0", 1))  # never below the policy
    assert lower.gate("2.0.0") == 2


def test_paused_starts_no_further_batch_and_resume_continues() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=1))
    waiting = records[-1]
    promoted = step(waiting, settings_(paused=True), cluster.observe(T0, "2.0.0"))
    assert promoted.record.paused is True and promoted.record.batch == 1
    held = step(promoted.record, settings_(paused=True), cluster.observe(T0, "2.0.0"))
    assert held.record.batch == 1 and held.actions == () and held.next_look is None
    resumed = step(held.record, settings_(), cluster.observe(T0, "2.0.0"))
    assert resumed.record.paused is False


def test_crash_looping_pods_fail_the_batch_at_once_and_hold_keeps_both_versions() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0", bad=True)
    records = run(cluster, settings_(health_timeout_seconds=3600))
    last = records[-1]
    assert last.state is RollingState.FAILED and last.reason == "RolloutFailed"
    assert "CrashLoopBackOff" in last.message
    assert last.batch == 1
    assert (datetime.fromisoformat(last.updated_at) - T0).total_seconds() < 60  # no timeout
    assert cluster.versions() == {"1.0.0", "2.0.0"}  # hold: both run as they are


def test_rollback_returns_every_replica_to_from() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0", bad=True)
    records = run(cluster, settings_(on_failure="rollback"))
    assert records[-1].state is RollingState.ROLLED_BACK
    assert cluster.versions() == {"1.0.0"}
    assert cluster.copy_replicas is None


def test_health_timeout_fails_a_batch_that_never_becomes_ready() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    plan = settings_(health_timeout_seconds=30)
    stuck: list[Step] = []
    records = run(cluster, plan, readiness=[5] * 3 + [0] * 300, on_step=stuck.append)
    assert records[-1].state is RollingState.FAILED
    assert "not verified within 30s" in records[-1].message


def test_analysis_job_runs_per_batch_and_failure_fails_the_batch() -> None:
    ok = Cluster(5, "1.0.0", "2.0.0")
    seen: list[Step] = []
    records = run(ok, settings_(analysis="checks/smoke.yaml"), on_step=seen.append)
    assert records[-1].state is RollingState.SUCCEEDED
    batches = {a.batch for s in seen for a in s.actions if isinstance(a, RunAnalysis)}
    assert batches == {1, 2, 3}
    bad = Cluster(5, "1.0.0", "2.0.0", analysis_result="failed")
    failed = run(bad, settings_(analysis="checks/smoke.yaml"))
    assert failed[-1].state is RollingState.FAILED and "analysis" in failed[-1].message


def test_pause_seconds_bakes_before_the_next_batch() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(pause_seconds=20))
    assert records[-1].state is RollingState.SUCCEEDED
    verifying = [r for r in records if r.batch_state is BatchState.VERIFYING]
    finalizing = [r for r in records if r.batch_state is BatchState.FINALIZING]
    for v, f in zip(verifying, finalizing, strict=False):
        assert datetime.fromisoformat(f.updated_at) - datetime.fromisoformat(v.updated_at) >= (
            timedelta(seconds=20)
        )


def test_reverting_the_desired_version_rolls_back() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=2))
    reverted = step(records[-1], settings_(partition=2), cluster.observe(T0, "1.0.0"))
    assert reverted.record.state is RollingState.ROLLED_BACK
    assert reverted.record.message == "desired version reverted"


def test_a_new_target_abandons_and_consolidates_on_the_majority() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=1))
    out = step(records[-1], settings_(partition=1), cluster.observe(T0, "3.0.0"))
    assert out.record.state is RollingState.ABANDONED
    assert out.actions == (Consolidate("1.0.0"),)  # 1 of 5 runs 2.0.0
    assert retry_allowed(out.record, cluster.observe(T0, "3.0.0"))


def test_a_failed_to_is_not_retried_until_the_file_or_version_changes() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0", bad=True)
    failed = run(cluster, settings_())[-1]
    same = cluster.observe(T0, "2.0.0", digest="d1")
    assert not retry_allowed(failed, same)
    assert step(failed, settings_(), same).actions == ()
    assert retry_allowed(failed, cluster.observe(T0, "2.0.0", digest="d2"))
    assert retry_allowed(failed, cluster.observe(T0, "2.1.0", digest="d1"))


def test_resume_from_a_stale_record_never_scales_back() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=2))
    at_batch_1 = next(r for r in records if r.batch == 1 and r.batch_state is BatchState.READY)
    # the cluster is at batch 2 (3 replicas run to); the record in Git says batch 1 ready
    out = step(at_batch_1, settings_(partition=2), cluster.observe(T0, "2.0.0"))
    out = step(out.record, settings_(partition=2), cluster.observe(T0, "2.0.0"))
    scales = [a for a in out.actions if isinstance(a, ScaleBatch)]
    assert scales and all(a.target >= 3 for a in scales)
    ahead = Workload("Deployment/web", desired=5, updated=5, ready=5, updated_ready=5)
    obs = Observation(now=T0, desired_version="2.0.0", workloads=(ahead,), prepared=True)
    stale = replace(out.record, batch_state=BatchState.INITIALIZING)
    again = step(stale, settings_(partition=2), obs)
    assert [a.target for a in again.actions if isinstance(a, ScaleBatch)] == [5]


def test_kill_at_every_transition_and_resume_from_the_last_noteworthy_record() -> None:

    full = run(Cluster(5, "1.0.0", "2.0.0"), settings_())
    committed = [full[0]] + [b for a, b in itertools.pairwise(full) if noteworthy(a, b)]
    for cut in range(1, len(full)):
        cluster = Cluster(5, "1.0.0", "2.0.0")
        plan = settings_()
        out = begin("1.0.0", "2.0.0", plan, cluster.observe(T0, "2.0.0"))
        seen = [out.record]
        now = T0
        while len(seen) < cut + 1 and not out.record.state.terminal:
            for action in out.actions:
                cluster.apply(action)
            cluster.tick(1)
            now += timedelta(seconds=1)
            out = step(out.record, plan, cluster.observe(now, "2.0.0"))
            if out.record != seen[-1]:
                seen.append(out.record)
        last_git = [r for r in seen if r in committed or r is seen[0]][-1]
        record, before = last_git, cluster.observe(now, "2.0.0").replicas.updated
        for _ in range(400):
            out = step(record, plan, cluster.observe(now, "2.0.0"))
            for action in out.actions:
                if isinstance(action, ScaleBatch):
                    assert action.target >= before  # nothing rolls back because of a restart
                cluster.apply(action)
            cluster.tick(1)
            now += timedelta(seconds=1)
            record = out.record
            check_invariants(cluster, plan, record)
            if record.state.terminal and not out.actions:
                break
        assert record.state is RollingState.SUCCEEDED, f"cut at {cut}"


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(min_value=1, max_value=12),
    batches=st.lists(
        st.one_of(
            st.integers(min_value=1, max_value=6).map(Batch),
            st.integers(min_value=1, max_value=100).map(lambda v: Batch(v, percent=True)),
        ),
        min_size=1,
        max_size=5,
    ),
    readiness=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=12),
)
def test_property_invariants_hold_for_any_plan_and_readiness(
    replicas: int, batches: list[Batch], readiness: list[int]
) -> None:
    if not any(readiness):
        readiness = [*readiness, 1]
    cluster = Cluster(replicas, "1.0.0", "2.0.0")
    plan = RolloutSettings(batches=tuple(batches), health_timeout_seconds=10_000)
    targets: list[int] = []

    def watch(out: Step) -> None:
        targets.extend(a.target for a in out.actions if isinstance(a, ScaleBatch))
        for a in out.actions:
            if isinstance(a, RetireOld):
                assert a.keep >= 0

    records = run(cluster, plan, readiness=readiness, limit=3000, on_step=watch)
    assert records[-1].state is RollingState.SUCCEEDED
    assert targets == sorted(targets) and all(t <= replicas for t in targets)
    assert cluster.versions() == {"2.0.0"} and cluster.copy_replicas is None
    ready_batches = [r.batch for r in records if r.batch_state is BatchState.READY]
    assert ready_batches == sorted(ready_batches)


def test_prepare_repeats_until_the_copy_is_ready() -> None:
    cluster = Cluster(3, "1.0.0", "2.0.0")
    plan = settings_()
    out = begin("1.0.0", "2.0.0", plan, cluster.observe(T0, "2.0.0"))
    out = step(out.record, plan, cluster.observe(T0, "2.0.0"))
    assert out.actions == (Prepare(),) and out.record.state is RollingState.INITIALIZING


def test_an_abandoned_rollout_keeps_the_majority_it_recorded_while_cleaning_up() -> None:
    """Issue 28: after the abandon, the pods of the new desired version (none yet) must
    not decide where the replicas go: 3 of 5 ran 2.0.0, so they all go to 2.0.0."""
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=2))
    abandoned = step(records[-1], settings_(partition=2), cluster.observe(T0, "3.0.0"))
    assert abandoned.record.state is RollingState.ABANDONED
    assert abandoned.record.replicas.updated == 3  # counted against 2.0.0, its own ``to``
    as_the_daemon_sees_3 = Observation(
        now=T0,
        desired_version="3.0.0",
        workloads=(Workload("Deployment/web", 5, updated=0, ready=5, old=5),),
        helpers_left=True,
    )
    cleanup = step(abandoned.record, settings_(partition=2), as_the_daemon_sees_3)
    assert cleanup.actions == (Consolidate("2.0.0"),)
    assert cleanup.record == abandoned.record  # the recorded counts stay as they were


def test_an_abandoned_rollout_consolidates_until_no_helper_is_left() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0")
    records = run(cluster, settings_(partition=2))  # 3 of 5 run 2.0.0
    out = step(records[-1], settings_(partition=2), cluster.observe(T0, "3.0.0"))
    assert out.actions == (Consolidate("2.0.0"),)
    now = T0
    for _ in range(30):
        for action in out.actions:
            cluster.apply(action)
        cluster.tick(5)
        now += timedelta(seconds=1)
        out = step(out.record, settings_(partition=2), cluster.observe(now, "3.0.0"))
        if not out.actions:
            break
    assert out.record.state is RollingState.ABANDONED and out.actions == ()
    assert cluster.versions() == {"2.0.0"} and cluster.copy_replicas is None


def test_a_rollback_looks_again_soon_to_clean_up() -> None:
    cluster = Cluster(5, "1.0.0", "2.0.0", bad=True)
    seen: list[Step] = []
    run(cluster, settings_(on_failure="rollback"), on_step=seen.append)
    back = next(s for s in seen if s.record.state is RollingState.ROLLED_BACK)
    assert back.next_look is not None and back.record.reason == "RolledBack"


def test_reverting_after_a_held_failure_rolls_back_both_versions_to_from() -> None:
    """Hold keeps both versions running; moving the desired version back to ``from``
    is a rollback (SPEC section 4: reverting rolls it back), never a silent no-op."""
    cluster = Cluster(5, "1.0.0", "2.0.0", bad=True)
    failed = run(cluster, settings_())[-1]
    assert failed.state is RollingState.FAILED and cluster.versions() == {"1.0.0", "2.0.0"}
    out = step(failed, settings_(), cluster.observe(T0, "1.0.0"))
    assert out.record.state is RollingState.ROLLED_BACK
    assert out.record.message == "desired version reverted"
    now = T0
    for _ in range(30):
        for action in out.actions:
            cluster.apply(action)
        cluster.tick(5)
        now += timedelta(seconds=1)
        out = step(out.record, settings_(), cluster.observe(now, "1.0.0"))
        if not out.actions:
            break
    assert cluster.versions() == {"1.0.0"} and cluster.copy_replicas is None
    # the same failure with the desired version unchanged stays held
    held = Cluster(5, "1.0.0", "2.0.0", bad=True)
    last = run(held, settings_())[-1]
    assert step(last, settings_(), held.observe(T0, "2.0.0")).actions == ()


def test_cleanup_after_success_converges_on_the_version_that_succeeded() -> None:
    """A copy left after success (a restart before its deletion) is cleaned up towards the
    version that succeeded, even when the desired version has moved on meanwhile: the
    next version must get its own rollout, never be applied at once by a cleanup."""
    cluster = Cluster(5, "1.0.0", "2.0.0")
    done = run(cluster, settings_())[-1]
    assert done.state is RollingState.SUCCEEDED
    left = replace(cluster.observe(T0, "3.0.0"), helpers_left=True)
    out = step(done, settings_(), left)
    assert out.actions == (Consolidate("2.0.0"),) and out.record.state is RollingState.SUCCEEDED
