"""``reconciler rollout analyze``: run an instance's Prometheus queries once, now.

Users write queries against their own metrics; this is how they try one before a
release depends on it (SPEC section 4c). The placeholders are filled for the rollout
in flight (from the status branch's record: its ``from``, ``to`` and batch) or,
when none is, for the next one (``from`` what the record says runs, ``to`` the
version the catalog resolves now). Each query is asked once, as the daemon asks it
after a batch, and its value and verdict are printed. Nothing is recorded.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from reconciler.catalog import load_catalog
from reconciler.commands.ledger import repository_read
from reconciler.commands.output import is_data, print_data
from reconciler.daemon.analysing import measure_now, placeholder_values
from reconciler.daemon.plan import plan_cluster, require_cluster
from reconciler.model.analysis import PASSED, Measurement, PrometheusAnalysis, format_value
from reconciler.model.catalog import AppVersion, Catalog, Instance
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from reconciler.model.rollout import RolloutRecord
from reconciler.model.table import format_table
from reconciler.rollout import PlanError, merge_plans
from reconciler.source import StatusLedger


def rollout_analyze_command(args: argparse.Namespace) -> int:
    """Measure INSTANCE's queries once; exit 1 when any is not ``passed``."""
    catalog = load_catalog(args.repo)
    require_cluster(catalog, args.cluster)
    instance = catalog.clusters[args.cluster].instances.get(args.instance)
    if instance is None:
        raise UsageError(f'cluster {args.cluster} has no instance "{args.instance}"')
    running, record = _recorded(args)
    from_version, to_version, batch = _rollout(catalog, args.cluster, instance, running, record)
    version = _version(catalog, instance, to_version)
    analysis = _analysis(version, instance, args.cluster)
    values = placeholder_values(instance, version, from_version, to_version)
    at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    measured = measure_now(analysis, args.prometheus_url, batch=batch, values=values, at=at)
    if is_data(args.output):
        print_data(
            {
                "cluster": args.cluster,
                "instance": instance.name,
                "from": from_version,
                "to": to_version,
                "batch": batch,
                "measurements": [m.to_dict() for m in measured],
            },
            args.output,
        )
    else:
        print(
            f"{args.cluster}/{instance.name}: {instance.app} {from_version or '(none)'} -> "
            f"{to_version}, batch {batch}, "
            f"{'in flight' if record is not None else 'the next rollout'}"
        )
        print(format_table(("QUERY", "VALUE", "CONDITION", "RESULT"), _rows(measured)), end="")
    return EXIT_OK if all(m.result == PASSED for m in measured) else EXIT_PROBLEMS


def _rows(measured: tuple[Measurement, ...]) -> list[list[str]]:
    return [
        [
            m.name,
            format_value(m.value),
            m.condition,
            m.result + (f": {m.reason}" if m.reason else ""),
        ]
        for m in measured
    ]


def _recorded(args: argparse.Namespace) -> tuple[str | None, RolloutRecord | None]:
    """(the version the status record says runs, the rollout in flight if any)."""
    where = args.status_repo or args.repo
    ledger = StatusLedger(where, args.cluster, branch=args.status_branch)
    with repository_read(where):
        snap = ledger.snapshot()
    status = snap.statuses.get(args.instance) if snap.exists else None
    if status is None:
        return None, None
    record = status.rollout
    unfinished = record is not None and not record.state.terminal
    return status.version, record if unfinished else None


def _rollout(
    catalog: Catalog,
    cluster: str,
    instance: Instance,
    running: str | None,
    record: RolloutRecord | None,
) -> tuple[str, str, int]:
    if record is not None:
        return record.from_version, record.to_version, max(record.batch, 1)
    deployed = {instance.name: running} if running else None
    plans = [p for p in plan_cluster(catalog, cluster, deployed, render=False)]
    plan = next((p for p in plans if p.name == instance.name), None)
    if plan is None or plan.version is None:
        why = plan.resolution.error if plan is not None else "not planned"
        raise UsageError(f"{cluster}/{instance.name}: no version to analyse: {why}")
    return running or "", plan.version.key, 1


def _version(catalog: Catalog, instance: Instance, key: str) -> AppVersion:
    entry = catalog.apps.get(instance.app)
    version = entry.versions.get(key) if entry is not None else None
    if version is None:
        raise UsageError(f"{instance.app} {key} is not in the catalog")
    return version


def _analysis(version: AppVersion, instance: Instance, cluster: str) -> PrometheusAnalysis:
    try:
        settings = merge_plans(version.rollout, instance.rollout)
    except PlanError as e:
        raise UsageError(f"{cluster}/{instance.name}: {e}") from e
    if settings is None or settings.prometheus is None:
        raise UsageError(
            f"{cluster}/{instance.name}: {instance.app} {version.key} has no "
            "rollout.analysis.prometheus (in its version.yaml or the instance file)"
        )
    return settings.prometheus


__all__ = ["rollout_analyze_command"]
