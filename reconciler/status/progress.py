"""The progress view of ``reconciler rollout status``, drawn from a status record.

Read from Git only: the rollout record on the status branch says which batches
are done, which one is in flight and whether it waits for a promotion commit, so
anyone with read access to the repository can follow a rollout without cluster
credentials. Pure: the command fetches the record and prints what this returns.
"""

from __future__ import annotations

from typing import Any

from reconciler.model.rollout import BatchState, RollingState, RolloutRecord, analysis_summary
from reconciler.model.status import InstanceStatus
from reconciler.model.words import plural

DONE = "done"
IN_FLIGHT = "in flight"
WAITING = "waiting for promotion"
PAUSED = "paused"
PENDING = "pending"
FAILED = "failed"
ROLLED_BACK = "rolled back"
ABANDONED = "abandoned"


def batch_rows(record: RolloutRecord) -> list[dict[str, Any]]:
    """One row per batch: number, cumulative target (when recorded) and its state."""
    rows = []
    for number in range(1, record.batches + 1):
        target = record.targets[number - 1] if number <= len(record.targets) else None
        rows.append({"batch": number, "target": target, "state": _batch_state(record, number)})
    return rows


def _batch_state(record: RolloutRecord, number: int) -> str:
    state = record.state
    if state is RollingState.SUCCEEDED or state is RollingState.FINALISING:
        return DONE
    if state is RollingState.INITIALIZING:
        if number > 1:
            return PENDING
        return PAUSED if record.paused else IN_FLIGHT
    ready = record.batch_state is BatchState.READY
    done = record.batch if ready else record.batch - 1
    if number <= done:
        return DONE
    if number == done + 1 and state is RollingState.WAITING:
        return WAITING
    if number == done + 1 and ready and state is RollingState.ROLLING and not record.paused:
        # the status branch records batches ready, not batches started: with no gate
        # in the way the daemon starts the next one at once
        return IN_FLIGHT
    if number == record.batch and not ready:
        ending = {
            RollingState.FAILED: FAILED,
            RollingState.ROLLED_BACK: ROLLED_BACK,
            RollingState.ABANDONED: ABANDONED,
        }
        return ending.get(state, PAUSED if record.paused else IN_FLIGHT)
    if number == done + 1 and record.paused:
        return PAUSED
    return PENDING


def progress_dict(status: InstanceStatus) -> dict[str, Any]:
    """The JSON of ``rollout status -o json``: the record plus its batches as rows."""
    record = status.rollout
    out: dict[str, Any] = {
        "cluster": status.cluster,
        "instance": status.instance,
        "app": status.app,
        "phase": str(status.phase),
        "version": status.version,
        "desiredVersion": status.desired_version,
        "rollout": None,
    }
    if record is not None:
        out["rollout"] = record.to_dict()
        out["batches"] = batch_rows(record)
    return out


def progress_text(status: InstanceStatus) -> str:
    """The plan as a progress view, one line per batch."""
    record = status.rollout
    head = f"{status.cluster}/{status.instance}"
    if record is None:
        version = status.version or status.desired_version or "?"
        return f"{head}: no rollout recorded ({status.app} {version}, {status.phase})\n"
    lines = [
        f"{head}: {status.app} {record.label}  {record.state}"
        + (" (paused)" if record.paused else "")
    ]
    gate = "none" if record.partition is None else f"after batch {record.partition}"
    lines.append(f"  started {record.started_at or '?'}, updated {record.updated_at or '?'}")
    lines.append(f"  partition: {gate}")
    width = len(str(record.batches))
    for row in batch_rows(record):
        target = "" if row["target"] is None else _replicas(row["target"])
        detail = row["state"]
        if (
            detail == IN_FLIGHT
            and row["batch"] == record.batch
            and record.state is (RollingState.ROLLING)
        ):
            detail = f"{IN_FLIGHT} ({record.batch_state})"
        mark = {DONE: "[x]", IN_FLIGHT: "[>]", WAITING: "[=]", PAUSED: "[=]"}.get(row["state"])
        lines.append(
            f"  {mark or '[ ]'} batch {row['batch']:>{width}}/{record.batches}"
            f"  {target:<13} {detail}"
        )
        summary = analysis_summary(record, row["batch"])
        if summary:  # the batch's Prometheus measurements (SPEC section 4c)
            lines.append(f"  {'':>{width + 10}}  analysis: {summary}")
    r = record.replicas
    lines.append(f"  replicas: {r.updated}/{r.desired} updated, {r.ready}/{r.desired} ready")
    if record.message:
        lines.append(f"  {record.message}")
    return "\n".join(lines) + "\n"


def _replicas(count: int) -> str:
    return plural(count, "replica")
