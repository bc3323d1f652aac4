"""Where a command's catalog and cluster come from when the command line does not say.

One meaning for ``--repo`` in every command: the catalog repository, a checkout
path or a Git URL, defaulting to ``$RECONCILER_REPO``, else the current
directory. The older spelling (a positional ``CATALOG`` for ``validate``,
``resolve``, ``render``, ``diff``, ``apply``, ``preview`` and ``images``) keeps
working, with a deprecation line on stderr. Commands that only read a catalog
accept a URL too (a cached clone is read); commands that commit need a checkout.

``--cluster`` defaults to ``$RECONCILER_CLUSTER``, else the checkout's own
default (``reconciler config set-cluster NAME``, stored in its ``.git/config``
like kubectl's current context). ``cli.main`` calls ``apply_defaults`` once,
after parsing, so the commands themselves see complete arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from reconciler.model.errors import EXIT_OK, UsageError

# ``reconciler.source`` (GitPython, the ledger, the checkout) is imported where it is
# used: ``cli.main`` calls ``apply_defaults`` for every command, and the commands with
# neither ``--repo`` nor ``--cluster`` (``reconciler sandbox``, started as a child process
# by every benchmark and many tests) need none of it: 0.15 s of CPU at each start


class MissingCluster(UsageError):
    """No ``--cluster`` and no default: argparse's own "required" error, as before defaults."""


ENV_REPO = "RECONCILER_REPO"
ENV_CLUSTER = "RECONCILER_CLUSTER"

# commands that only read the catalog's files: a URL is read from a cached clone
_READS_CATALOG = frozenset(
    {"validate", "resolve", "render", "diff", "apply", "get", "images verify"}
)
# commands that commit to, or compare commits of, a checkout: a URL cannot do
_NEEDS_CHECKOUT = frozenset(
    {"channel set", "rollout promote", "rollout pause", "rollout resume", "images scan", "preview"}
)


def apply_defaults(command: str, args: argparse.Namespace) -> None:
    """Fill ``args.repo`` (and ``args.catalog``) and ``args.cluster`` as the module says."""
    if hasattr(args, "repo"):
        _fill_repo(command, args)
    if hasattr(args, "cluster") and args.cluster is None:
        args.cluster = default_cluster(getattr(args, "repo", None))
        if args.cluster is None:
            raise MissingCluster(
                "no cluster given: pass --cluster NAME, set $RECONCILER_CLUSTER, or run "
                "`reconciler config set-cluster NAME` in the catalog checkout"
            )


def default_cluster(repo: str | None) -> str | None:
    """``$RECONCILER_CLUSTER``, else the default stored in the checkout ``repo`` (if a path)."""
    from_env = os.environ.get(ENV_CLUSTER, "").strip()
    if from_env:
        return from_env
    from reconciler.source.defaults import checkout_cluster

    path = _local_path(repo or ".")
    return checkout_cluster(path) if path is not None else None


def _fill_repo(command: str, args: argparse.Namespace) -> None:
    positional = getattr(args, "catalog", None)
    if positional is not None:
        if args.repo is not None and args.repo != positional:
            raise UsageError("give the catalog either as CATALOG or with --repo, not both")
        # the positional CATALOG is the documented short form of --repo for the
        # catalog commands (validate, resolve, render, diff, apply, preview): same meaning
        args.repo = positional
    if args.repo is None:
        args.repo = os.environ.get(ENV_REPO, "").strip() or "."
    if command in _NEEDS_CHECKOUT and _local_path(args.repo) is None:
        from reconciler.source import RemoteAccess

        raise UsageError(
            f"--repo {RemoteAccess.parse(args.repo).display}: `{command}` needs a checkout "
            "(git clone the repository and pass its path)"
        )
    if hasattr(args, "catalog"):
        args.catalog = args.repo
        if command in _READS_CATALOG and _local_path(args.repo) is None:
            from reconciler.source import CatalogSource

            args.catalog = str(CatalogSource(args.repo).sync().path)


def _local_path(repo: str) -> Path | None:
    """The path ``repo`` names, or None for a URL."""
    from reconciler.source import RemoteAccess

    return RemoteAccess.parse(repo).local_path


def config_command(args: argparse.Namespace) -> int:
    """``config set-cluster|unset-cluster|get-cluster``: the checkout's default cluster."""
    from reconciler.source import StatusLedger
    from reconciler.source.defaults import CONFIG_KEY, checkout_cluster, set_checkout_cluster

    path = _local_path(args.repo)
    if path is None:
        raise UsageError(f"--repo {args.repo}: `config` needs a checkout path, not a URL")
    if args.config_command == "set-cluster":
        known = StatusLedger(str(path), args.name, remote_fallback=True).known_clusters()
        if known and args.name not in known:
            raise UsageError(f"no cluster named {args.name}; known: {', '.join(known)}")
        set_checkout_cluster(path, args.name)
        print(f"default cluster of {path} set to {args.name} ({CONFIG_KEY} in its Git config)")
    elif args.config_command == "unset-cluster":
        set_checkout_cluster(path, None)
        print(f"default cluster of {path} removed")
    else:
        from_env = os.environ.get(ENV_CLUSTER, "").strip()
        stored = checkout_cluster(path)
        if from_env:
            print(f"{from_env} (from ${ENV_CLUSTER})")
        elif stored:
            print(f"{stored} (from {CONFIG_KEY} in {path})")
        else:
            print(f"no default cluster for {path}", file=sys.stderr)
            return 1
    return EXIT_OK
