"""The interface between the state machine and the cluster, and one pass's use of it.

The daemon builds one ``RolloutDriver`` per instance and pass (in ``kube/``: it holds
the client, the instance's rendered ``from`` and ``to`` objects and the pass's live
state) and calls ``drive_once``. Keeping the loop body here, against a Protocol,
lets the same code run against the pure model in the tests and against the API
server in the daemon, so what the property tests prove is what the daemon does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from reconciler.model.rollout import RollingState, RolloutRecord
from reconciler.rollout.machine import Action, Observation, Step, begin, retry_allowed, step
from reconciler.rollout.plan import RolloutSettings


class RolloutDriver(Protocol):
    """What the machine needs of a cluster, for one instance.

    ``observe`` counts pods (not spec) per workload of the instance: pods running
    ``to`` and ``from`` (by pod-template-hash / controller-revision-hash of the
    rendered revision), ready ones, moved pods failing (CrashLoopBackOff,
    ImagePullBackOff, ErrImagePull, a terminated container that restarts), the
    current batch's analysis Job state, whether preparation is complete and
    whether helpers (the Deployment copy, an OnDelete strategy set by the rollout)
    are left; it fills ``desired_version``, ``instance_digest`` and ``now`` from
    its arguments. ``execute`` runs the actions in order; each is idempotent and
    carries absolute targets (see docs/ROLLOUTS.md for what each does per kind).
    Neither waits for anything.
    """

    def observe(self, desired_version: str, now: datetime) -> Observation: ...

    def execute(self, actions: Sequence[Action]) -> None: ...


def drive_once(
    record: RolloutRecord | None,
    settings: RolloutSettings,
    driver: RolloutDriver,
    *,
    running: str,
    desired: str,
    now: datetime,
) -> Step | None:
    """One pass for one instance: observe, one transition, execute; never waits.

    ``record`` is the last rollout record (from memory, or from the status branch
    after a restart); ``running`` is the version most replicas run. ``running`` and
    ``desired`` are release keys (a version, plus its pinned image builds, see
    ``reconciler.model.rollout.release_key``): a rebuild is a change too. Returns the
    step (the caller records ``step.record`` and looks again after
    ``step.next_look``), or ``None`` when there is nothing to roll (no rollout and
    ``running == desired``). Helpers left after success, a rollback or an abandon
    are cleaned up before anything new starts; after a held failure they are the
    new rollout's starting point (``Prepare`` is absolute).
    """
    obs = driver.observe(desired, now)
    if record is not None and (
        not record.state.terminal
        or (
            obs.helpers_left
            and (record.state is not RollingState.FAILED or desired == record.from_key)
        )
        or not retry_allowed(record, obs)
        or (record.state is RollingState.SUCCEEDED and record.to_key == desired)
    ):
        out = step(record, settings, obs)
    elif running == desired:
        return None
    else:
        out = begin(running, desired, settings, obs)
    driver.execute(out.actions)
    return out
