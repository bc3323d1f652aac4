"""Which Kubernetes namespace each recorded instance lives in, for ``status -n``.

A status record (SPEC section 3) names the instance, not its namespace; the
instance file in the catalog does. So ``status -n NS`` and ``migrations -n NS``
read ``clusters/<cluster>/instances/<instance>.yaml`` at the record's
``sourceCommit``, the catalog commit the record was made from, in the repository
the ledger reads: the namespace the instance had when its state was recorded.
A local repository holds those commits. A mirror of a URL holds only the status
branch, so when a commit is missing the remote's default branch is fetched into
the mirror (once per call) and the lookup is tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import git
import yaml

from reconciler.source.runner import GitFailed, run_remote
from reconciler.source.store import BranchStore, RemoteStore

log = logging.getLogger("reconciler.source")

CATALOG_REF = "refs/reconciler/catalog-head"
_MAX_FILE = 256 * 1024  # instance files are a few hundred bytes; never parse a huge blob


class _Missing:
    """The commit is not in the repository (as opposed to: no such file in it)."""


MISSING = _Missing()


def instance_namespaces(
    store: BranchStore, cluster: str, commits: Mapping[str, str]
) -> dict[str, str | None]:
    """``instance -> namespace`` for ``commits`` (``instance -> sourceCommit``).

    None when it cannot be known: no such commit (even after a fetch), no file,
    an unreadable file. Never raises for one instance's lookup.
    """
    found = {name: _namespace(store.repo, cluster, name, sha) for name, sha in commits.items()}
    missing = [name for name, value in found.items() if value is MISSING]
    if missing and isinstance(store, RemoteStore) and fetch_catalog(store):
        for name in missing:
            found[name] = _namespace(store.repo, cluster, name, commits[name])
    return {name: value if isinstance(value, str) else None for name, value in found.items()}


def _namespace(repo: git.Repo, cluster: str, instance: str, sha: str) -> str | _Missing | None:
    commit_id = sha.removesuffix("-dirty")  # a --watch record of a checkout with edits
    if not commit_id:
        return None
    try:
        tree = repo.commit(commit_id).tree
        tree.trees  # noqa: B018 - reads the tree object now: a missing one raises here
    except (ValueError, git.BadName, git.BadObject):
        return MISSING
    for suffix in (".yaml", ".yml"):
        try:
            blob = tree / f"clusters/{cluster}/instances/{instance}{suffix}"
        except KeyError:
            continue
        if blob.size > _MAX_FILE:
            return None
        try:
            data = yaml.safe_load(blob.data_stream.read())
        except (yaml.YAMLError, ValueError):
            return None
        value = data.get("namespace") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None
    return None


def fetch_catalog(store: RemoteStore) -> bool:
    try:
        run_remote(
            store.repo,
            ["fetch", "--quiet", "--no-tags", "origin", f"+HEAD:{CATALOG_REF}"],
            store.access,
            what=f"fetch the catalog from {store.display}",
        )
    except GitFailed as e:
        log.warning("cannot fetch the catalog to find namespaces: %s", e)
        return False
    return True
