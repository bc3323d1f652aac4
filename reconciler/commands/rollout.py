"""``reconciler rollout promote|pause|resume|status``: gates as commits, progress from Git."""

from __future__ import annotations

import argparse

from reconciler.catalog import load_catalog
from reconciler.commands.ledger import (
    fetched_by_the_check,
    no_status,
    read_ledger,
    repository_read,
    require_known_cluster,
)
from reconciler.commands.output import format_data, is_data, print_data
from reconciler.commands.watching import View, follow
from reconciler.daemon.plan import plan_cluster, require_cluster
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from reconciler.model.rollout import RollingState
from reconciler.model.status import InstanceStatus
from reconciler.rollout import PlanError, merge_plans
from reconciler.source import StatusLedger, change_gate
from reconciler.status.progress import progress_dict, progress_text


def rollout_gate_command(args: argparse.Namespace) -> int:
    """Promote, pause or resume INSTANCE's rollout with a one-line commit."""
    batches, target = _plan(args.repo, args.cluster, args.instance)
    change = change_gate(
        args.repo,
        args.cluster,
        args.instance,
        args.rollout_command,
        batches=batches,
        target=target,
        approve_all=bool(getattr(args, "all", False)),
        push=args.push,
    )
    if is_data(args.output):
        print_data(change.to_dict(), args.output)
    else:
        print(
            f"{change.cluster}/{change.instance}: rollout {change.action}: "
            f"{change.before} -> {change.after} ({change.file}, commit {change.commit[:12]})"
        )
        if change.pushed_to:
            print(f"pushed to {change.pushed_to}")
    return EXIT_OK


def _plan(repo: str, cluster: str, instance: str) -> tuple[int | None, str | None]:
    """How many batches the instance's effective plan has (None: it has no plan), and
    the version it rolls to (None: the catalog cannot resolve it).

    The version's plan counts, so it resolves the version the instance would move
    to now: that is also the rollout a promotion approves. An instance the catalog
    cannot resolve counts its own file's plan.
    """
    catalog = load_catalog(repo)
    require_cluster(catalog, cluster)
    entry = catalog.clusters[cluster].instances.get(instance)
    if entry is None:
        return None, None  # change_gate names the missing file
    plans = [p for p in plan_cluster(catalog, cluster, render=False) if p.name == instance]
    version = plans[0].version if plans else None
    try:
        settings = merge_plans(version.rollout if version else None, entry.rollout)
    except PlanError as e:
        raise UsageError(f"{cluster}/{instance}: {e}") from e
    target = version.key if version is not None else None
    return (None if settings is None else len(settings.batches)), target


def rollout_status_command(args: argparse.Namespace) -> int:
    """Draw INSTANCE's rollout from the status branch; ``--watch`` follows it."""
    if args.interval <= 0:
        raise UsageError("--interval must be a positive duration")
    ledger = read_ledger(args)
    seen: list[InstanceStatus] = []
    refresh = fetched_by_the_check()

    def view() -> View:
        status = _read(ledger, args.instance, refresh=refresh())
        seen[:] = [status]  # the last one decides the exit code
        shown = _show(status, args.output)
        return shown, shown, _finished(status)

    separator = "---\n" if args.output == "yaml" else ""
    with repository_read(args.repo):
        require_known_cluster(ledger)
        follow(view, watch=args.watch, interval=args.interval, separator=separator)
    status = seen[-1]
    return EXIT_OK if status.rollout is None or _healthy(status) else EXIT_PROBLEMS


def _read(ledger: StatusLedger, instance: str, *, refresh: bool) -> InstanceStatus:
    snap = ledger.snapshot(refresh=refresh)
    if not snap.exists:
        raise UsageError(no_status(ledger))
    status = snap.statuses.get(instance)
    if status is None:
        for problem in snap.problems:
            if problem.file.endswith(f"/{instance}.yaml"):
                raise UsageError(f"unreadable status file {problem}")
        known = ", ".join(sorted(snap.statuses)) or "none"
        raise UsageError(
            f'instance "{instance}" has no status on {ledger.branch} (recorded: {known})'
        )
    return status


def _show(status: InstanceStatus, output: str) -> str:
    if is_data(output):
        return format_data(progress_dict(status), output)
    return progress_text(status)


def _finished(status: InstanceStatus) -> bool:
    return status.rollout is None or status.rollout.state.terminal


def _healthy(status: InstanceStatus) -> bool:
    assert status.rollout is not None
    return status.rollout.state not in (RollingState.FAILED, RollingState.ROLLED_BACK)
