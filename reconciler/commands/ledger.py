"""``reconciler status``, ``history``, ``migrations`` and ``channel set``: Git as the UI.

Thin commands over ``reconciler.source``: read the status branch of a catalog
(path or URL, no manual clone needed) and print it as a table or JSON, or move a
channel pointer with a one-line commit. Called by ``reconciler.cli``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from reconciler.commands.output import (
    format_data,
    is_data,
    print_data,
    print_names,
    table_options,
)
from reconciler.commands.watching import View, follow
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, SourceError, UsageError
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.ledger import StatusLedger, StatusSnapshot
from reconciler.status import UnreadableStatus, history_table, status_table

if TYPE_CHECKING:
    from reconciler.migrations import LedgerRow


def status_command(args: argparse.Namespace) -> int:
    """Print each instance's current record from the status branch.

    ``--watch`` re-reads the branch (fetching a URL) every ``--interval`` and
    prints again when a commit changed it; Ctrl-C ends it.
    """
    if args.interval <= 0:
        raise UsageError("--interval must be a positive duration")
    ledger = read_ledger(args)
    reported: set[str] = set()
    problems: list[bool] = [False]
    refresh = fetched_by_the_check()

    def view() -> View:
        snap = ledger.snapshot(refresh=refresh())
        text, unreadable = _status_view(args, ledger, snap)
        for u in unreadable:
            if u.error not in reported:  # once per problem, not once per redraw
                reported.add(u.error)
                print(f"reconciler: unreadable status file {u.error}", file=sys.stderr)
        problems[0] = bool(unreadable)
        return text, snap.commit, False

    terminal = sys.stdout.isatty() and args.output in ("text", "wide")
    with repository_read(args.repo):
        require_known_cluster(ledger)
        follow(
            view,
            watch=args.watch,
            interval=args.interval,
            clear=terminal,
            separator="---\n" if args.output == "yaml" else "\n",
        )
    return EXIT_PROBLEMS if problems[0] else EXIT_OK


def _status_view(
    args: argparse.Namespace, ledger: StatusLedger, snap: StatusSnapshot
) -> tuple[str, list[UnreadableStatus]]:
    # an uninstalled instance keeps its last record (history) but leaves the table
    current = {n: s for n, s in snap.statuses.items() if s.phase is not Phase.REMOVED}
    unreadable = [
        UnreadableStatus(p.file.rsplit("/", 1)[-1].removesuffix(".yaml"), p.file, str(p))
        for p in snap.problems
    ]
    if args.namespace is not None:
        current = _in_namespace(ledger, current, args.namespace)
        unreadable = []  # no record, no catalog commit: its namespace is unknown
    if is_data(args.output):
        records: list[dict[str, Any]] = [s.to_dict() for s in current.values()]
        records += [u.to_dict() for u in unreadable]
        return format_data(sorted(records, key=lambda r: str(r["instance"])), args.output), (
            unreadable
        )
    if args.output == "name":
        names = sorted([*current, *(u.instance for u in unreadable)])
        return "".join(f"{n}\n" for n in names), unreadable
    if not snap.exists:
        return no_status(ledger) + "\n", unreadable
    if not current and not unreadable:
        return f"no instance status recorded on {ledger.branch} in {ledger.display}\n", []
    return status_table(current.values(), unreadable, **table_options(args)) + "\n", unreadable


def history_command(args: argparse.Namespace) -> int:
    """Print status changes, newest first, from the status branch's commits."""
    if args.limit < 0:
        raise UsageError("--limit must be 0 (all) or a positive number")
    ledger = read_ledger(args)
    with repository_read(args.repo):
        require_known_cluster(ledger)  # fetched the branch: read as fetched
        entries = ledger.history(args.instance, limit=args.limit, refresh=False)
    if is_data(args.output):
        print_data([e.to_dict() for e in entries], args.output)
    elif args.output == "name":
        print_names([e.commit for e in entries])
    elif entries:
        print(history_table(entries, **table_options(args)))
    elif args.instance:
        print(f"no status changes recorded for instance {args.instance} on {ledger.branch}")
    else:
        print(no_status(ledger))
    return EXIT_OK


def migrations_command(args: argparse.Namespace) -> int:
    """Print the migration ledger each instance's status records on the status branch."""
    ledger = read_ledger(args)
    with repository_read(args.repo):
        require_known_cluster(ledger)  # fetched the branch: read as fetched
        snap = ledger.snapshot(refresh=False)
    # imported here: ``status`` and ``history`` start without the migrations stack
    from reconciler.migrations import ledger_rows, ledger_table

    rows: list[LedgerRow] = []
    problems = [str(p) for p in snap.problems]
    statuses = snap.statuses
    if args.namespace is not None:
        statuses = _in_namespace(ledger, statuses, args.namespace)
    for name in sorted(statuses):
        if args.instance and name != args.instance:
            continue
        found, bad = ledger_rows(name, statuses[name].migrations)
        rows += found
        problems += bad
    if is_data(args.output):
        print_data([r.to_dict() for r in rows], args.output)
    elif args.output == "name":
        print_names([f"{r.instance}/{r.record.name}" for r in rows])
    elif not snap.exists:
        print(no_status(ledger))
    elif args.instance and args.instance not in snap.statuses:
        print(f"no status recorded for instance {args.instance} on {ledger.branch}")
    elif not rows:
        print(f"no migration recorded yet on {ledger.branch} in {ledger.display}")
    else:
        print(ledger_table(rows, **table_options(args)))
    for problem in problems:
        print(f"reconciler: unreadable migration record {problem}", file=sys.stderr)
    return EXIT_PROBLEMS if problems else EXIT_OK


def channel_set_command(args: argparse.Namespace) -> int:
    """Move APP's CHANNEL to VERSION with one commit (and push it with --push)."""
    from reconciler.source.channels import set_channel  # only this command needs it

    move = set_channel(
        args.repo, args.app, args.channel, args.version, force=args.force, push=args.push
    )
    if is_data(args.output):
        print_data(move.to_dict(), args.output)
    elif move.commit is None:
        print(f"{move.app}: channel {move.channel} already points to {move.version}")
    else:
        print(
            f"{move.app}: channel {move.channel} {move.previous} -> {move.version}"
            f" ({move.file}, commit {move.commit[:12]})"
        )
        if move.pushed_to:
            print(f"pushed to {move.pushed_to}")
    return EXIT_OK


def _in_namespace(
    ledger: StatusLedger, statuses: dict[str, InstanceStatus], namespace: str
) -> dict[str, InstanceStatus]:
    """``-n``: the records of instances whose file names ``namespace``."""
    found = ledger.namespaces(statuses.values())
    return {name: s for name, s in statuses.items() if found.get(name) == namespace}


def read_ledger(args: argparse.Namespace) -> StatusLedger:
    """The ledger a read command reads: a checkout's remote copy when it has no branch."""
    return StatusLedger(args.repo, args.cluster, branch=args.status_branch, remote_fallback=True)


def require_known_cluster(ledger: StatusLedger) -> None:
    """A cluster with no status branch must at least be known: a typo exits 2, naming the rest.

    Only asked when the branch is missing (one fetch, one ref read otherwise). A
    repository that knows no cluster at all (empty, or a bare status remote) cannot
    tell a typo from "nothing recorded yet", so it is left to say the latter. The
    fetch is the command's: what it reads next is the branch as fetched here
    (``refresh=False``), not a second fetch a moment later (a second connection to
    the remote, and four Git processes for a file:// one).
    """
    if ledger.head(refresh=True) is not None:
        return
    known = ledger.known_clusters()
    if known and ledger.cluster not in known:
        raise UsageError(f"no cluster named {ledger.cluster}; known: {', '.join(known)}")


def fetched_by_the_check() -> Callable[[], bool]:
    """For a command's views after ``require_known_cluster``: whether the next one fetches.

    The first does not (the check fetched the branch just before it); each later one
    (``--watch``) does.
    """
    views = 0

    def refresh() -> bool:
        nonlocal views
        views += 1
        return views > 1

    return refresh


@contextmanager
def repository_read(repo: str) -> Iterator[None]:
    """Reading a status branch that cannot be fetched is an environment error (exit 2).

    These commands only read: a remote that is gone, refuses us or times out is not
    something they found (exit 1, like an unreadable status file) but something
    wrong around them, as a missing local ``--repo`` already is (docs/CLI.md).
    """
    try:
        yield
    except SourceError as e:
        raise UsageError(f"--repo {repo}: {e}") from e


def no_status(ledger: StatusLedger) -> str:
    """What a read command says about a known cluster with no status branch yet."""
    return (
        f"no status recorded yet for cluster {ledger.cluster}: "
        f"branch {ledger.branch} does not exist in {ledger.display}"
    )
