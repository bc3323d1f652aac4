"""The command a person runs next for an instance that needs them, from its record alone.

The status page's problems panel shows each Stalled or Failed instance (and each
rollout waiting at a gate) with its reason and one command to run, so a page that
says something is wrong also says where to start. Pure: the record, its cluster
and the repository as people reach it (``--repo``; empty leaves it to the
checkout's default) decide the text.
"""

from __future__ import annotations

import shlex

from reconciler.model.rollout import RollingState
from reconciler.model.status import InstanceStatus


def next_command(cluster: str, status: InstanceStatus, repo: str = "") -> str:
    """One ``reconciler`` command line that moves ``status`` forward or explains it."""
    name = shlex.quote(status.instance)
    where = f"--cluster {shlex.quote(cluster)}" + (f" --repo {shlex.quote(repo)}" if repo else "")
    rollout = status.rollout
    if rollout is not None and rollout.state is RollingState.WAITING and not rollout.paused:
        return f"reconciler rollout promote {name} {where}"
    if rollout is not None and rollout.paused:
        return f"reconciler rollout resume {name} {where}"
    reason = status.reason
    if reason in ("CatalogInvalid", "EmptyRender"):
        return "reconciler validate" + (f" --repo {shlex.quote(repo)}" if repo else "")
    if reason in ("DowngradeBlocked", "NoUpgradePath", "ResolveFailed"):
        return f"reconciler resolve {where} --explain"
    if reason == "MigrationFailed":
        return f"reconciler migrations {where} {name}"
    if reason in ("RolledBack", "RolloutFailed") or rollout is not None:
        return f"reconciler rollout status {name} {where}"
    return f"reconciler history {where} {name}"
