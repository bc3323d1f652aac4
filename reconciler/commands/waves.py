"""``reconciler wave approve|status``: approvals as commits, the release's progress from Git.

``status`` reads the catalog (waves.yaml, clusters and their instances) at the head of
the catalog branch and every cluster's status branch, then asks the same gate the
daemons ask (``reconciler.waves.wave_board``), so what it prints is what the daemons
decide. ``fleet_board`` is the reusable part (the status page and the bench call it).
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime

from reconciler.catalog import load_catalog
from reconciler.commands.ledger import repository_read
from reconciler.commands.output import is_data, print_data
from reconciler.daemon.plan import plan_cluster
from reconciler.daemon.status_site import pipeline_of
from reconciler.daemon.waving import app_board
from reconciler.model.catalog import Catalog
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from reconciler.source import CatalogSource, FleetStatus, ReleaseHistory, StatusLedger
from reconciler.source.approvals import approve_wave
from reconciler.status.report import Pipeline
from reconciler.waves import BoardWave


def wave_approve_command(args: argparse.Namespace) -> int:
    """Approve WAVE for APP VERSION with a one-line commit to waves.yaml."""
    done = approve_wave(args.repo, args.app, args.version, args.wave, push=args.push)
    if is_data(args.output):
        print_data(done.to_dict(), args.output)
        return EXIT_OK
    if done.commit is None:
        print(f"wave {done.wave} is already approved for {done.app} {done.version}")
    else:
        print(
            f"approved wave {done.wave} for {done.app} {done.version} "
            f"({done.file}, commit {done.commit[:12]})"
        )
    if done.pushed_to:
        print(f"pushed to {done.pushed_to}")
    return EXIT_OK


def wave_status_command(args: argparse.Namespace) -> int:
    """Print each wave's gate and clusters for APP's release; exit 1 when it is halted."""
    board = read_board(args.repo, args.app, args.version, branch=args.branch)
    if is_data(args.output):
        print_data({"app": args.app, "waves": [w.to_dict() for w in board]}, args.output)
    else:
        print(board_text(board))
    return EXIT_PROBLEMS if any(w.state == "halted" for w in board) else EXIT_OK


def read_board(
    repo: str, app: str, version: str | None, *, branch: str | None = None
) -> list[BoardWave]:
    """The board of ``app``'s release at the head of the catalog ``branch`` of ``repo``
    (a local path or a Git URL): what ``wave status`` prints and the demo shows."""
    with repository_read(repo):
        source = CatalogSource(repo, branch=branch)
        synced = source.sync()
        catalog = load_catalog(synced.path)
        return fleet_board(
            catalog,
            repo,
            app,
            version,
            synced.commit,
            catalog_ref=f"refs/heads/{synced.branch}",
        )


def fleet_board(
    catalog: Catalog,
    repo: str,
    app: str,
    version: str | None,
    head: str,
    *,
    catalog_ref: str | None = None,
    now: datetime | None = None,
) -> list[BoardWave]:
    """The board of ``app``'s release ``version`` (default: what most instances resolve to).

    ``repo`` holds the status branches; ``head`` is the catalog commit ``catalog`` was
    loaded from (where releases began is read from its history, which a URL's mirror
    fetches from ``catalog_ref``).
    """
    waves = catalog.waves
    if waves is None:
        raise UsageError(f"{repo}: the catalog has no waves.yaml")
    if not waves.valid:
        raise UsageError(f"waves.yaml is invalid: {waves.error}")
    instances = {
        name: sorted(i.name for i in entry.instances.values() if i.app == app)
        for name, entry in catalog.clusters.items()
    }
    if not any(instances.values()):
        raise UsageError(f"no cluster of the catalog runs an instance of {app}")
    version = version or _desired(catalog, app)
    fleet, history = _fleet_read(catalog, repo, head, catalog_ref)
    return app_board(
        catalog, app, version, fleet.records(), history.contains, now or datetime.now(UTC)
    )


def _fleet_read(
    catalog: Catalog, repo: str, head: str, catalog_ref: str | None
) -> tuple[FleetStatus, ReleaseHistory]:
    """Every status branch of ``repo`` (one fetch) and the catalog's release history."""
    fleet = StatusLedger(repo, min(catalog.clusters)).fleet()
    fleet.refresh(catalog_ref)
    return fleet, ReleaseHistory(fleet.repo, head)


def fleet_pipelines(
    repo: str, *, branch: str | None = None, now: datetime | None = None
) -> list[Pipeline]:
    """Each app's release in flight across the waves, for the status page.

    The release of an app is the version most of its instances resolve to at the
    head of the catalog branch (as ``wave status`` defaults to). Empty when the
    catalog has no ``waves.yaml``; a ``waves.yaml`` that is invalid is a
    ``UsageError`` naming its line (a page must not draw gates nobody trusts).
    """
    when = now or datetime.now(UTC)
    with repository_read(repo):
        synced = CatalogSource(repo, branch=branch).sync()
        catalog = load_catalog(synced.path)
        waves = catalog.waves
        if waves is None:
            return []
        if not waves.valid:
            raise UsageError(f"waves.yaml is invalid: {waves.error}")
        versions = _desired_versions(catalog)
        if not versions:
            return []
        fleet, history = _fleet_read(catalog, repo, synced.commit, f"refs/heads/{synced.branch}")
        records = fleet.records()
        return [
            pipeline_of(
                app,
                version,
                app_board(catalog, app, version, records, history.contains, when),
                when,
            )
            for app, version in sorted(versions.items())
        ]


def _desired(catalog: Catalog, app: str) -> str:
    version = _desired_versions(catalog, app).get(app)
    if version is None:
        raise UsageError(f"no instance of {app} resolves to a version; pass --version")
    return version


def _desired_versions(catalog: Catalog, only: str | None = None) -> dict[str, str]:
    """Each app's (or ``only``'s) version most of its instances resolve to: one plan
    per cluster, not one per app and cluster."""
    wanted: dict[str, Counter[str]] = {}
    for cluster, entry in catalog.clusters.items():
        if only is not None and not any(i.app == only for i in entry.instances.values()):
            continue
        for plan in plan_cluster(catalog, cluster, render=False):
            app = plan.instance.app
            if (only is None or app == only) and plan.resolution.version:
                wanted.setdefault(app, Counter())[plan.resolution.version] += 1
    return {app: counts.most_common(1)[0][0] for app, counts in wanted.items()}


def board_text(board: list[BoardWave]) -> str:
    lines = []
    for wave in board:
        gates = [f"soak {wave.soak}"] if wave.soak else []
        gates += ["approval required"] if wave.approval else []
        gates += [f"maxFailures {wave.max_failures}"] if wave.max_failures else []
        extra = f" ({', '.join(gates)})" if gates else ""
        lines.append(f"wave {wave.name}{extra}: {wave.state.upper()}: {wave.decision.message}")
        for item in wave.instances:
            if item.record is None:
                lines.append(f"  {item.cluster}/{item.instance}: no status record")
                continue
            status = item.record.status
            reason = f" {status.reason}" if status.reason else ""
            lines.append(
                f"  {item.cluster}/{item.instance}: {status.version or '-'} "
                f"{status.phase}{reason} since {item.record.since:%Y-%m-%d %H:%M:%S}Z"
            )
        if not wave.instances:
            lines.append("  (no instance of the app: passed through)")
    return "\n".join(lines)
