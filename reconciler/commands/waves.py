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
from reconciler.model.catalog import Catalog
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from reconciler.source import CatalogSource, ReleaseHistory, StatusLedger
from reconciler.source.approvals import approve_wave
from reconciler.waves import BoardWave, wave_board


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
    fleet = StatusLedger(repo, min(catalog.clusters)).fleet()
    fleet.refresh(catalog_ref)
    history = ReleaseHistory(fleet.repo, head)

    def fresh(cluster: str, instance: str, status: object) -> bool:
        inst = catalog.clusters[cluster].instances.get(instance)
        commit = getattr(status, "source_commit", "")
        return history.contains(app, version or "", inst.channel if inst else None, commit)

    return wave_board(
        waves, app, version, instances, fleet.records(), fresh, now or datetime.now(UTC)
    )


def _desired(catalog: Catalog, app: str) -> str:
    wanted: Counter[str] = Counter()
    for cluster, entry in catalog.clusters.items():
        if any(i.app == app for i in entry.instances.values()):
            for plan in plan_cluster(catalog, cluster, render=False):
                if plan.instance.app == app and plan.resolution.version:
                    wanted[plan.resolution.version] += 1
    if not wanted:
        raise UsageError(f"no instance of {app} resolves to a version; pass --version")
    return wanted.most_common(1)[0][0]


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
