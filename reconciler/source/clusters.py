"""Which clusters a repository knows, for ``no cluster named X; known: a, b``.

A read command given a cluster whose status branch does not exist cannot tell
"nothing recorded yet" from a typo unless it knows the clusters: those the
catalog declares (``clusters/<name>/`` at the repository's HEAD) and those that
have a status branch (``status/<name>``, local or a remote's copy in a checkout;
on the remote itself for a URL). Called by ``StatusLedger.known_clusters``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from reconciler.source import objects
from reconciler.source.namespaces import CATALOG_REF, fetch_catalog
from reconciler.source.runner import GitFailed, read_ref, run, run_remote
from reconciler.source.store import BranchStore, RemoteStore

log = logging.getLogger("reconciler.source")

_PREFIX = "refs/heads/status/"
# where a checkout keeps status branches: its own, and its remotes' copies
STATUS_REFS = ("refs/heads/status/", "refs/remotes/")
_CLUSTERS_DIR = "clusters"


def branch_clusters(refs: Iterable[str]) -> list[str]:
    """Cluster names of ``refs/heads/status/<name>`` and ``refs/remotes/<r>/status/<name>``.

    Branches deeper than ``status/<name>`` are not status branches of the default
    name and are left out.
    """
    found = set()
    for ref in refs:
        if ref.startswith("refs/remotes/"):
            ref = "refs/heads/" + ref.removeprefix("refs/remotes/").split("/", 1)[-1]
        name = ref.removeprefix(_PREFIX)
        if ref.startswith(_PREFIX) and name and "/" not in name:
            found.add(name)
    return sorted(found)


def known_clusters(store: BranchStore) -> list[str]:
    """Catalog clusters and status-branch clusters of the store's repository, sorted.

    Never raises for a repository that cannot say (an empty one, a remote whose
    HEAD cannot be fetched): what could not be read adds no names.
    """
    names = set(_branch_names(store))
    if isinstance(store, RemoteStore):
        head = read_ref(store.repo, CATALOG_REF) if fetch_catalog(store) else None
    else:
        head = read_ref(store.repo, "HEAD")
    if head is not None:
        root = objects.read_tree(store.repo, objects.root_tree_of(store.repo, head))
        entry = root.get(_CLUSTERS_DIR)
        if entry is not None and entry[1] == objects.TREE_MODE:
            sub = objects.read_tree(store.repo, entry[0])
            names |= {name for name, (_sha, mode) in sub.items() if mode == objects.TREE_MODE}
    return sorted(names)


def _branch_names(store: BranchStore) -> list[str]:
    try:
        if isinstance(store, RemoteStore):
            output = run_remote(
                store.repo,
                ["ls-remote", "--heads", "origin", "refs/heads/status/*"],
                store.access,
                what=f"list the status branches of {store.display}",
            )
            refs = [line.split("\t", 1)[-1].strip() for line in output.splitlines()]
        else:
            refs = run(store.repo, ["for-each-ref", "--format=%(refname)", *STATUS_REFS]).split()
    except GitFailed as e:
        log.warning("cannot list the status branches: %s", e)
        return []
    return branch_clusters(refs)
