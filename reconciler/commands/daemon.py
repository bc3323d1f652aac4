"""``reconciler run``: the daemon, or with ``--once`` a single pass that reports and exits.

``--once`` exits 0 when every instance is Ready after the pass, 1 otherwise
(a stalled, failed or suspended instance, or a pass that could not run), so CI
jobs and cron-style setups can use it directly.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from reconciler.analysis.client import PrometheusClient
from reconciler.commands.client import webhook_secret
from reconciler.commands.connect import connect
from reconciler.commands.output import is_data, print_data, print_names, table_options
from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.kube.lease import check_timings
from reconciler.kube.shards import check_shard_count
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageError
from reconciler.model.table import format_table
from reconciler.source.verify import SignaturePolicy


def default_identity() -> str:
    """The pod's name (a StatefulSet's is stable) or the host's, and the process id."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}-{os.getpid()}"


def check_shards(args: argparse.Namespace) -> int:
    """``--shards`` as given, or a usage error naming the conflict."""
    shards: int | None = getattr(args, "shards", None)
    if shards is None:
        return 0  # not asked for
    if shards < 1:
        raise UsageError(
            f"--shards must be at least 1 (got {shards}); leave it out to run unsharded"
        )
    if args.leader_elect:
        raise UsageError(
            "--shards and --leader-elect exclude each other: with --shards every shard "
            "has its own Lease and replicas share the work instead of one leading"
        )
    if getattr(args, "once", False):
        raise UsageError(
            "--shards needs the daemon: a --once pass reconciles every instance, "
            "with no Lease to say which shard is whose"
        )
    return check_shard_count(shards)


def check_scan_images(args: argparse.Namespace) -> float:
    """``--scan-images`` commits to the catalog branch: it needs a repository to push to."""
    interval = float(getattr(args, "scan_images", 0.0) or 0.0)
    if interval < 0:
        raise UsageError("--scan-images must be a positive duration (e.g. 1h)")
    if interval and args.watch:
        raise UsageError(
            "--scan-images commits to the catalog branch and pushes; with --watch the catalog "
            "is a directory being edited: run `reconciler images scan` in it instead"
        )
    return interval


def settings_from_args(args: argparse.Namespace) -> DaemonSettings:
    secret = webhook_secret(args.webhook_secret_file)
    verify = SignaturePolicy.from_files(args.verify_signatures) if args.verify_signatures else None
    shards = check_shards(args)
    identity = args.identity or default_identity()
    if shards or args.leader_elect:  # refused now, not once the daemon has started
        check_timings(identity, args.lease_duration, args.renew_deadline, args.retry_period)
    return DaemonSettings(
        repo=args.repo,
        cluster=args.cluster,
        branch=args.branch,
        status_branch=args.status_branch,
        interval=args.interval,
        drift_interval=args.drift_interval,
        health_timeout=args.health_timeout,
        # one pass and done: nothing else waits, so wait for health as ``apply`` does
        health_grace=args.health_timeout if getattr(args, "once", False) else args.health_grace,
        max_look=args.max_look,
        force_conflicts=args.force_conflicts,
        allow_empty_prune=args.allow_empty_prune,
        allow_mass_prune=args.allow_mass_prune,
        watch=args.watch,
        verify=verify,
        leader_elect=args.leader_elect,
        shards=shards,
        leader_namespace=args.leader_elect_namespace,
        lease_name=args.lease_name or f"reconciler-{args.cluster}",
        identity=identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        metrics_address=args.metrics_address,
        webhook_address=args.webhook_address,
        probe_address=args.probe_address,
        webhook_secret=secret,
        scan_images=check_scan_images(args),
        prometheus_url=check_prometheus_url(getattr(args, "prometheus_url", "")),
        commit_url=args.commit_url or os.environ.get("RECONCILER_COMMIT_URL", ""),
    )


def check_prometheus_url(url: str) -> str:
    """``--prometheus-url`` is an http(s) URL without credentials (those come from the
    environment), refused before the daemon starts."""
    if url:
        PrometheusClient(url).close()  # raises UsageError naming what is wrong
    return url


def run_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with connect(args) as client:
        daemon = Daemon(settings, client)
        if args.once:
            if settings.scan_images:
                scan_before_the_pass(settings)
            outcome = daemon.run_pass()
            daemon.flush_events()  # the Events of the one pass are sent before the exit
            daemon.close_events()
            print_outcome(outcome, settings, args)
            if outcome.reason == UsageError.reason:
                return EXIT_USAGE  # e.g. a cluster the catalog does not have
            return EXIT_OK if outcome.ok else EXIT_PROBLEMS
        from reconciler.daemon.service import serve

        return serve(daemon)


def scan_before_the_pass(settings: DaemonSettings) -> None:
    """``run --once --scan-images``: one scan, then the pass reconciles what it committed."""
    from reconciler.daemon.imagescans import ImageScanner
    from reconciler.daemon.triggers import TriggerQueue
    from reconciler.source import CatalogWorkClone

    clone = CatalogWorkClone(settings.repo, branch=settings.branch, cache_dir=settings.cache_dir)
    outcome = ImageScanner(clone, TriggerQueue(), settings.scan_images).scan_once()
    print(outcome.describe(), file=sys.stderr)


def print_outcome(outcome: PassOutcome, settings: DaemonSettings, args: argparse.Namespace) -> None:
    report = outcome.report
    output = args.output
    if is_data(output):
        print_data(
            {
                "cluster": settings.cluster,
                "commit": report.commit if report else None,
                "ok": outcome.ok,
                "error": outcome.error,
                "statuses": [s.to_dict() for s in report.statuses] if report else [],
                "changes": [e.to_dict() for e in report.changes.entries] if report else [],
                "commits": [
                    {"commit": c.commit, "instance": c.instance, "subject": c.subject}
                    for c in outcome.commits
                ],
            },
            output,
        )
        return
    if report is None:
        print(f"pass failed: {outcome.error}")
        return
    if output == "name":
        print_names([s.instance for s in report.statuses])
        return
    options = table_options(args)
    wide = options.pop("wide")
    rows = [
        [
            s.instance,
            s.app,
            s.version or "-",
            s.desired_version or "-",
            str(s.phase),
            *([s.source or "-", str(s.objects)] if wide else []),
            s.message,
        ]
        for s in report.statuses
    ]
    header = ["INSTANCE", "APP", "VERSION", "DESIRED", "PHASE"]
    header += ["SOURCE", "OBJECTS"] * wide + ["MESSAGE"]
    print(format_table(header, rows, gap=2, **options))
    for result in report.removed:
        print(f"removed from Git: {result.instance}: {result.message or result.changes.summary()}")
    phases = ", ".join(f"{n} {p}" for p, n in report.phase_counts().items() if n)
    branch = settings.status_branch or f"status/{settings.cluster}"
    print(
        f"pass at {report.commit[:12]}: {len(report.statuses)} instances ({phases or 'none'}); "
        f"objects: {report.changes.summary()}; {len(outcome.commits)} status commit(s) on {branch}"
    )
    if outcome.error:
        print(f"warning: {outcome.error}")
