"""``reconciler run``: the daemon, or with ``--once`` a single pass that reports and exits.

``--once`` exits 0 when every instance is Ready after the pass, 1 otherwise
(a stalled, failed or suspended instance, or a pass that could not run), so CI
jobs and cron-style setups can use it directly.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from reconciler.commands.output import print_json, table
from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.kube import KubeClient
from reconciler.kube.client import DEFAULT_MAX_REQUESTS_IN_FLIGHT
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageError
from reconciler.source.verify import SignaturePolicy


def settings_from_args(args: argparse.Namespace) -> DaemonSettings:
    secret = os.environ.get("RECONCILER_WEBHOOK_SECRET", "")
    if args.webhook_secret_file:
        try:
            secret = Path(args.webhook_secret_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise UsageError(
                f"{args.webhook_secret_file}: cannot read webhook secret ({e.strerror})"
            ) from e
    verify = SignaturePolicy.from_files(args.verify_signatures) if args.verify_signatures else None
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
        force_conflicts=args.force_conflicts,
        allow_empty_prune=args.allow_empty_prune,
        allow_mass_prune=args.allow_mass_prune,
        watch=args.watch,
        verify=verify,
        leader_elect=args.leader_elect,
        leader_namespace=args.leader_elect_namespace,
        lease_name=args.lease_name or f"reconciler-{args.cluster}",
        identity=f"{socket.gethostname()}-{os.getpid()}",
        metrics_address=args.metrics_address,
        webhook_secret=secret,
    )


def max_requests_in_flight(args: argparse.Namespace) -> int:
    """``--max-requests-in-flight``, or the client's default (cli.py does not import it)."""
    value = getattr(args, "max_requests_in_flight", None)
    return int(value) if value else DEFAULT_MAX_REQUESTS_IN_FLIGHT


def run_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with KubeClient.connect(
        args.kubeconfig, args.context, max_requests_in_flight=max_requests_in_flight(args)
    ) as client:
        daemon = Daemon(settings, client)
        if args.once:
            outcome = daemon.run_pass()
            print_outcome(outcome, settings, args.output)
            if outcome.reason == UsageError.reason:
                return EXIT_USAGE  # e.g. a cluster the catalog does not have
            return EXIT_OK if outcome.ok else EXIT_PROBLEMS
        from reconciler.daemon.service import serve

        return serve(daemon)


def print_outcome(outcome: PassOutcome, settings: DaemonSettings, output: str) -> None:
    report = outcome.report
    if output == "json":
        print_json(
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
            }
        )
        return
    if report is None:
        print(f"pass failed: {outcome.error}")
        return
    rows = [
        [s.instance, s.app, s.version or "-", s.desired_version or "-", str(s.phase), s.message]
        for s in report.statuses
    ]
    print(table(["INSTANCE", "APP", "VERSION", "DESIRED", "PHASE", "MESSAGE"], rows))
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
