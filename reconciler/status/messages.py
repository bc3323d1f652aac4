"""Commit messages of the status branch: subject, body and trailers (SPEC section 3).

People read the status branch with ``git log``, so the subject says what happened
in words (``prod/web: upgraded podinfo 6.5.0 -> 6.6.0 (Ready)``); ``history`` and
other tools read the trailers, which are machine-parsable and stable. The ledger
calls ``commit_message``; ``history`` calls ``parse_trailers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.model.rollout import RolloutRecord, builds_label, describe, noteworthy
from reconciler.model.status import InstanceStatus, Phase
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.model.waveanalysis import WAVE_KEY

TRAILER_CLUSTER = "Reconciler-Cluster"
TRAILER_INSTANCE = "Reconciler-Instance"
TRAILER_PHASE = "Reconciler-Phase"
TRAILER_VERSION = "Reconciler-Version"
TRAILER_SOURCE_COMMIT = "Reconciler-Source-Commit"
TRAILER_ROLLOUT = "Reconciler-Rollout"
TRAILER_ROLLOUT_STATE = "Reconciler-Rollout-State"
TRAILER_BATCH = "Reconciler-Batch"
TRAILER_REPLICAS = "Reconciler-Replicas"
TRAILER_MIGRATION = "Reconciler-Migration"
# The daemon pass that wrote the commit: the ID its log lines and Events carry
# (reconciler.daemon.logs). An addition to section 3's trailers; absent on commits
# written outside a pass.
TRAILER_PASS = "Reconciler-Pass"
TRAILER_KEYS = (
    TRAILER_CLUSTER,
    TRAILER_INSTANCE,
    TRAILER_PHASE,
    TRAILER_VERSION,
    TRAILER_SOURCE_COMMIT,
)
ROLLOUT_TRAILER_KEYS = (TRAILER_ROLLOUT, TRAILER_ROLLOUT_STATE, TRAILER_BATCH, TRAILER_REPLICAS)

_SUBJECT_LIMIT = 120


def commit_message(
    status: InstanceStatus,
    previous: InstanceStatus | None,
    *,
    note: str = "",
    pass_id: str | None = None,
) -> str:
    """The full commit message for recording ``status`` over ``previous``.

    ``pass_id``: the daemon pass recording it, as a last ``Reconciler-Pass`` trailer.
    """
    subject = f"{status.cluster}/{status.instance}: {describe_change(status, previous)}"
    if len(subject) > _SUBJECT_LIMIT:
        subject = subject[: _SUBJECT_LIMIT - 3].rstrip() + "..."
    body = _body(status, previous, note)
    pairs = trailers_for(status, previous, pass_id=pass_id).items()
    trailers = "\n".join(f"{key}: {value}" for key, value in pairs)
    return f"{subject}\n\n{body}\n\n{trailers}\n"


DROPPED_LISTED = 20  # names a "dropped records" commit lists; the rest are counted


def dropped_message(cluster: str, instances: Sequence[str], *, pass_id: str | None = None) -> str:
    """The commit that deletes records of instances neither Git nor the cluster has."""
    n = len(instances)
    subject = f"{cluster}: dropped {n} status record{'s' * (n != 1)} of unknown instances"
    listed = ", ".join(instances[:DROPPED_LISTED])
    more = f" and {n - DROPPED_LISTED} more" if n > DROPPED_LISTED else ""
    body = (
        "No instance file in the catalog and no inventory in the cluster: the records "
        f"describe nothing (a stale or forged record). Dropped: {listed}{more}."
    )
    trailers = {TRAILER_CLUSTER: _one_line(cluster)}
    if pass_id:
        trailers[TRAILER_PASS] = _one_line(pass_id)
    lines = "\n".join(f"{key}: {value}" for key, value in trailers.items())
    return f"{subject}\n\n{body}\n\n{lines}\n"


def trailers_for(
    status: InstanceStatus,
    previous: InstanceStatus | None = None,
    *,
    pass_id: str | None = None,
) -> dict[str, str]:
    """Section 3's trailers, plus section 4's when this commit records a rollout step,
    section 5's for a migration run, and the pass that wrote it."""
    out = {
        TRAILER_CLUSTER: _one_line(status.cluster),
        TRAILER_INSTANCE: _one_line(status.instance),
        TRAILER_PHASE: str(status.phase),
        TRAILER_VERSION: _one_line(status.version or "none"),
        TRAILER_SOURCE_COMMIT: _one_line(status.source_commit or "none"),
    }
    rollout = _rollout_step(status, previous)
    if rollout is not None:
        out.update(rollout_trailers(rollout))
    else:
        rebuilt = build_change(status, previous)
        if rebuilt is not None:  # a rebuild applied at once: named like a rollout
            out[TRAILER_ROLLOUT] = _one_line(rebuilt)
    run = new_migration(status, previous)
    if run is not None:
        out[TRAILER_MIGRATION] = _one_line(f"{run.get('name', '?')} {run.get('outcome', '?')}")
    if pass_id:
        out[TRAILER_PASS] = _one_line(pass_id)
    return out


def new_migration(
    status: InstanceStatus, previous: InstanceStatus | None
) -> Mapping[str, Any] | None:
    """The migration record this commit adds, when it is one migration run (SPEC section 5).

    The daemon records each run as its own status (the instance's ledger with one
    more record), so ``git log`` tells each run apart from the change it served.
    """
    entries = status.migrations or ()
    if not entries:
        return None
    before = (previous.migrations or ()) if previous is not None else ()
    return None if entries[-1] in before else entries[-1]


def describe_migration(run: Mapping[str, Any]) -> str:
    """``migration add-orders-index (pre, 2.0.0) succeeded in 41.2s``."""
    head = f"migration {run.get('name', '?')} ({run.get('phase', '?')}, {run.get('version', '?')})"
    outcome = run.get("outcome")
    took = _seconds(run.get("duration"))
    message = _one_line(str(run.get("message") or ""))
    if outcome == "succeeded":
        return f"{head} succeeded in {took}"
    if outcome == "notNeeded":
        return f"{head} not needed" + (f": {message}" if message else "")
    return f"{head} failed after {took}" + (f": {message}" if message else "")


def _seconds(value: object) -> str:
    seconds = float(value) if isinstance(value, int | float) else 0.0
    return f"{seconds:.1f}s" if seconds >= 0.1 else f"{seconds * 1000:.0f}ms"


def rollout_trailers(record: RolloutRecord) -> dict[str, str]:
    """``Reconciler-Rollout: 6.5.0 -> 6.6.0``, its state, ``Batch: 2/3``, ``Replicas: 3/5``."""
    return {
        TRAILER_ROLLOUT: _one_line(record.label),
        TRAILER_ROLLOUT_STATE: str(record.state),
        TRAILER_BATCH: f"{record.batch}/{record.batches}",
        TRAILER_REPLICAS: f"{record.replicas.updated}/{record.replicas.desired}",
    }


def build_change(status: InstanceStatus, previous: InstanceStatus | None) -> str | None:
    """``2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1`` when this record runs other builds of the
    same version than ``previous`` (SPEC section 8), else None."""
    if previous is None or status.version is None or status.version != previous.version:
        return None
    if status.images == previous.images:
        return None
    return builds_label(previous.images, status.images)


def _rollout_step(status: InstanceStatus, previous: InstanceStatus | None) -> RolloutRecord | None:
    """The rollout record when this commit is about a step of it (SPEC section 4)."""
    before = previous.rollout if previous is not None else None
    return status.rollout if noteworthy(before, status.rollout) else None


def describe_change(status: InstanceStatus, previous: InstanceStatus | None) -> str:
    """What happened, in a few words, ending with the phase (and reason when not Ready).

    A rollout step is told in SPEC section 4's words and without the phase:
    ``rollout podinfo 6.5.0 -> 6.6.0: batch 2/3 ready (3/5 replicas)``; a migration
    run in section 5's: ``migration add-orders-index (pre, 2.0.0) succeeded in 41.2s``.
    """
    run = new_migration(status, previous)
    if run is not None:
        return describe_migration(run)
    if status.phase is Phase.REMOVED:
        return status.message or "removed"
    app = status.app or "app"
    rollout = _rollout_step(status, previous)
    if rollout is not None:
        return describe(rollout, app)
    outcome = _outcome(status)
    if previous is None or previous.version is None:
        if status.version is None:
            target = status.desired_version or "?"
            return f"installing {app} {target} {outcome}"
        return f"{app} {status.version} {outcome}"
    if status.version != previous.version:
        verb = _direction(previous.version, status.version)
        return f"{verb} {app} {previous.version} -> {status.version or 'none'} {outcome}"
    rebuilt = build_change(status, previous)
    if rebuilt is not None:
        return f"rebuilt {app} {status.version}: builds {rebuilt} {outcome}"
    if (
        status.desired_version != previous.desired_version
        and status.desired_version != status.version
        and status.phase is Phase.PROGRESSING
    ):
        return f"moving {app} {status.version} -> {status.desired_version} {outcome}"
    if status.phase is not previous.phase or status.reason != previous.reason:
        return f"{app} {status.version} {outcome}"
    if status.message and status.extra.get(WAVE_KEY) != previous.extra.get(WAVE_KEY):
        # a wave's analysis measured: the message says the values and how many so far
        return _one_line(status.message)
    return f"{app} {status.version} {_details(status, previous)} {outcome}"


def _details(status: InstanceStatus, previous: InstanceStatus) -> str:
    """The fields that changed when neither version nor phase did (rollout steps, objects)."""
    changed = []
    if status.objects != previous.objects:
        changed.append(f"objects {previous.objects} -> {status.objects}")
    if status.desired_version != previous.desired_version:
        changed.append(f"desired {previous.desired_version} -> {status.desired_version}")
    for label, before, after in (
        ("rollout", previous.rollout, status.rollout),
        ("migrations", previous.migrations, status.migrations),
        ("message", previous.message, status.message),
        ("source", previous.source, status.source),
    ):
        if before != after:
            changed.append(f"{label} updated")
    if not changed and status.source_commit != previous.source_commit:
        # objects changed and nothing else did: a parameter edit, say which commit runs
        changed.append(f"applied catalog {status.source_commit[:12]}")
    return ", ".join(changed) or "status updated"


def _outcome(status: InstanceStatus) -> str:
    if status.phase is Phase.READY or not status.reason or status.reason == str(status.phase):
        label = f"({status.phase})"
    else:
        label = f"({status.phase}: {status.reason})"
    if status.phase in (Phase.STALLED, Phase.FAILED) and status.message:
        return f"{label} {_one_line(status.message)}"
    return label


def _direction(before: str, after: str | None) -> str:
    if after is None:
        return "removed"
    try:
        return "upgraded" if parse_version(after) > parse_version(before) else "downgraded"
    except VersionSyntaxError:
        return "changed"


def _body(status: InstanceStatus, previous: InstanceStatus | None, note: str) -> str:
    lines = []
    if previous is None:
        lines.append(f"First record of {status.instance} on cluster {status.cluster}.")
    for label, before, after in (
        ("Phase", previous.phase if previous else None, status.phase),
        ("Reason", previous.reason if previous else None, status.reason),
        ("Version", previous.version if previous else None, status.version),
        ("Desired", previous.desired_version if previous else None, status.desired_version),
        ("Objects", previous.objects if previous else None, status.objects),
    ):
        if previous is not None and before != after:
            lines.append(f"{label}: {before or 'none'} -> {after or 'none'}")
        elif previous is None and after not in (None, ""):
            lines.append(f"{label}: {after}")
    if status.source:
        at = f" at {status.source_commit[:12]}" if status.source_commit else ""
        lines.append(f"Source: {status.source}{at}")
    if status.message:
        lines.append("")
        lines.append(status.message.strip())
    if note:
        lines.append("")
        lines.append(note)
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_trailers(text: str) -> dict[str, str]:
    """``Key: value`` lines (as ``%(trailers:only,unfold)`` prints them) into a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def summary_of(subject: str, trailers: Mapping[str, str]) -> str:
    """The subject without its ``cluster/instance:`` prefix, for the history table."""
    prefix = f"{trailers.get(TRAILER_CLUSTER, '')}/{trailers.get(TRAILER_INSTANCE, '')}: "
    return subject[len(prefix) :] if subject.startswith(prefix) else subject
