"""A checkout's default cluster, kept in its Git config like kubectl's current context.

``reconciler config set-cluster prod`` writes ``reconciler.cluster = prod`` into
the checkout's own ``.git/config``; every command that takes ``--cluster`` and is
run against that checkout (``--repo .``, the default) uses it when neither
``--cluster`` nor ``$RECONCILER_CLUSTER`` says otherwise. Git's config is the
natural home: it is per clone, never committed, and ``git config`` shows it.
Called by ``reconciler.commands.defaults``.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.model.errors import UsageError
from reconciler.source.runner import GitFailed, run

CONFIG_KEY = "reconciler.cluster"


def checkout_cluster(path: Path) -> str | None:
    """The default cluster stored in the repository at ``path`` (None: none, or no repository)."""
    if not path.is_dir():
        return None
    try:
        value = run(path, ["config", "--get", CONFIG_KEY]).strip()
    except GitFailed:  # exit 1: not set; 128: not a repository
        return None
    return value or None


def set_checkout_cluster(path: Path, cluster: str | None) -> None:
    """Store ``cluster`` as the checkout's default (None removes it); exit 2 outside a checkout."""
    try:
        run(path, ["rev-parse", "--git-dir"])
    except GitFailed as e:
        raise UsageError(f"--repo {path}: not a Git checkout ({e})") from e
    if cluster is None and checkout_cluster(path) is None:
        return  # nothing to unset (git config would exit 5)
    args = ["--unset-all", CONFIG_KEY] if cluster is None else [CONFIG_KEY, cluster]
    try:
        run(path, ["config", "--local", *args])
    except GitFailed as e:
        raise UsageError(f"--repo {path}: cannot write {CONFIG_KEY} ({e})") from e
