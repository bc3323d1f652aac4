"""``reconciler report``: the status branches as a static site (index + a page per instance).

Status lives in Git, so it can be shown without a server: this reads each
cluster's status branch with the same ledger ``status`` and ``history`` use and
writes plain HTML files (inline CSS, no script) that open from a directory, a CI
artifact or GitHub Pages. Without ``--cluster`` every ``status/<cluster>``
branch of the repository is shown. When the repository's catalog has a
``waves.yaml``, the index shows each app's release crossing the waves (``wave
status`` as a pipeline). Exit codes follow ``status``: 0, or 1 when a
status file could not be read (the pages are written either way and name it).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from reconciler.commands.ledger import repository_read
from reconciler.commands.waves import fleet_pipelines
from reconciler.daemon.status_site import now_stamp, read_report
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, ReconcilerError, UsageError
from reconciler.source import StatusLedger, status_branch_clusters
from reconciler.status.report import INDEX, PageOptions, Pipeline, build_site

ENV_COMMIT_URL = "RECONCILER_COMMIT_URL"
log = logging.getLogger("reconciler.report")


def report_command(args: argparse.Namespace) -> int:
    """Write the site to ``--html DIR`` and say where its index is."""
    if args.history_limit < 0:
        raise UsageError("--history-limit must be 0 (all) or a positive number")
    clusters = list(dict.fromkeys(c for given in args.cluster for c in given.split(",") if c))
    if args.status_branch and len(clusters) != 1:
        raise UsageError("--status-branch names one branch: give exactly one --cluster with it")
    if not clusters:
        with repository_read(args.repo):
            clusters = status_branch_clusters(args.repo)
        if not clusters:
            print(
                f"reconciler: no status/<cluster> branch in {args.repo} (in a clone, "
                "`git fetch` brings the remote's origin/status/* branches)",
                file=sys.stderr,
            )
    ledgers = [
        StatusLedger(args.repo, c, branch=args.status_branch, remote_fallback=True)
        for c in clusters
    ]
    with repository_read(args.repo):
        reports = [read_report(ledger, history_limit=args.history_limit) for ledger in ledgers]
    source = ledgers[0].display if ledgers else args.repo
    options = PageOptions(
        commit_url=args.commit_url or os.environ.get(ENV_COMMIT_URL, ""),
        repo="" if args.repo == "." else args.repo,
    )
    pipelines = _pipelines(args.repo) if ledgers else []
    pages = build_site(
        reports,
        title=args.title,
        source=source,
        generated=now_stamp(),
        options=options,
        pipelines=pipelines,
    )
    out = Path(args.html)
    write_site(pages, out)
    instances = sum(len(r.statuses) for r in reports)
    print(
        f"wrote {len(pages)} pages ({len(reports)} cluster{'s' * (len(reports) != 1)}, "
        f"{instances} instance{'s' * (instances != 1)}) to {out}; open {out / INDEX}"
    )
    problems = [f"{r.cluster}: {p}" for r in reports for p in r.problems]
    for problem in problems:
        print(f"reconciler: unreadable status file {problem}", file=sys.stderr)
    return EXIT_PROBLEMS if problems else EXIT_OK


def _pipelines(repo: str) -> list[Pipeline]:
    """The releases crossing the waves, when the repository's catalog has ``waves.yaml``.

    The status branches may live without a catalog beside them (or with one that does
    not load): the pages are written either way, and a broken ``waves.yaml`` is said.
    """
    try:
        return fleet_pipelines(repo)
    except UsageError as e:  # waves.yaml names its line
        print(f"reconciler: no wave pipelines: {e}", file=sys.stderr)
    except ReconcilerError as e:
        log.info("no wave pipelines from %s: %s", repo, e)
    return []


def write_site(pages: dict[str, str], directory: Path) -> None:
    """Write each page under ``directory`` (created); paths are slugs, never outside it."""
    try:
        for rel, text in pages.items():
            target = directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--html {directory}: {e.strerror or e}") from e


__all__ = ["report_command", "write_site"]
