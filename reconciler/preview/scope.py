"""Which part of the catalog a change between two commits can affect, loaded at both commits.

A full load of a 1,000-app catalog takes seconds, and a preview needs two of
them; but what the loader computes is local (``reconciler.catalog.incremental``
explains why): an app depends only on ``apps/<app>/``, an instance only on its
file and its cluster's ``cluster.yaml``. So a preview reads:

* ``git diff --name-only`` between the commits (the changed paths);
* every cluster at both commits (instance files are small; they tell which
  instances use a changed app);
* only the apps the change touches, and the apps of instances it touches.

The base is loaded from a temporary tree holding just those directories; the
head is *reloaded* from the base's catalog with ``reload_catalog`` (only what
the diff names is parsed again). Everything else is identical at both commits,
so it can neither change what runs nor add a validation problem.

Validation runs on a catalog narrowed to the instances whose app was loaded
(and those naming an app that does not exist, which fail on their own): the
cross-file checks of ``check_catalog`` (resolution, rendering, one owner per
object) then see every instance the change can move. What lies outside is
reported as unchanged; the one check it cannot see is an object rendered by
both an instance in scope and one outside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.catalog import MAX_FILE_BYTES, load_catalog
from reconciler.catalog.incremental import FullReloadNeeded, reload_catalog
from reconciler.model.catalog import Catalog, ClusterEntry
from reconciler.model.errors import SourceError, UsageError
from reconciler.model.problems import Problem
from reconciler.model.waves import WAVES_FILE
from reconciler.source import (
    changed_between,
    export_paths,
    list_directory,
    resolve_commit,
    resolve_commits,
)

InstanceKey = tuple[str, str]  # (cluster, instance)


@dataclass(frozen=True)
class Side:
    """One commit's catalog, loaded as far as the change needs."""

    rev: str  # as the user named it
    commit: str
    catalog: Catalog  # every cluster; only the apps in scope
    app_dirs: frozenset[str]  # every app directory at this commit

    def scoped(self) -> Catalog:
        """The catalog narrowed to instances whose app was loaded (or that no commit has)."""
        loaded = set(self.catalog.apps)
        clusters = {
            name: ClusterEntry(
                name=name,
                cluster=entry.cluster,
                instances={
                    key: inst
                    for key, inst in entry.instances.items()
                    if inst.app in loaded or inst.app not in self.app_dirs
                },
            )
            for name, entry in self.catalog.clusters.items()
        }
        return Catalog(
            root=self.catalog.root,
            apps=self.catalog.apps,
            clusters=clusters,
            problems=[p for p in self.catalog.problems if not self._out_of_scope(p)],
            files_with_errors=self.catalog.files_with_errors,
            waves=self.catalog.waves,
        )

    def _out_of_scope(self, problem: Problem) -> bool:
        """A ``waves.yaml`` warning about an approval whose app exists at this commit but
        was not loaded (out of the change's scope): the loader could not see the app."""
        waves = self.catalog.waves
        if problem.file != WAVES_FILE or problem.is_error or waves is None:
            return False
        return any(
            a.line == problem.line and a.app not in self.catalog.apps and a.app in self.app_dirs
            for a in waves.approvals
        )


@dataclass(frozen=True)
class Scope:
    """The two sides, the paths that differ and the instances those paths can affect."""

    base: Side
    head: Side
    changed: frozenset[str]
    instances: frozenset[InstanceKey]  # instances whose files, cluster or app changed
    whole_catalog: bool = False  # the diff touched apps/ or clusters/ themselves


@dataclass
class _Touched:
    apps: set[str] = field(default_factory=set)
    clusters: set[str] = field(default_factory=set)  # cluster.yaml or the directory itself
    instances: set[InstanceKey] = field(default_factory=set)
    everything: bool = False

    @classmethod
    def of(cls, paths: Iterable[str]) -> _Touched:
        out = cls()
        for path in paths:
            parts = path.strip("/").split("/")
            if parts[0] not in ("apps", "clusters"):
                continue  # nothing else moves what an instance runs (waves.yaml: only when)
            if len(parts) == 1:
                out.everything = True
            elif parts[0] == "apps":
                out.apps.add(parts[1])
            elif len(parts) == 4 and parts[2] == "instances":
                out.instances.add((parts[1], Path(parts[3]).stem))
            else:
                out.clusters.add(parts[1])
        return out


def resolve_revision(repo: Path, rev: str, option: str) -> str:
    """The commit ``rev`` names; a revision that names none is a usage error (exit 2)."""
    try:
        return resolve_commit(repo, rev)
    except SourceError as e:
        raise UsageError(f"{option} {rev}: {e} (try a branch, a tag or a commit SHA)") from e


def resolve_revisions(repo: Path, base_rev: str, head_rev: str) -> tuple[str, str]:
    """The commits ``--base`` and ``--head`` name, from one ``git rev-parse`` when both
    are commits; otherwise each is resolved alone, to name the one at fault."""
    both = resolve_commits(repo, [base_rev, head_rev])
    if both is not None:
        return both[0], both[1]
    return resolve_revision(repo, base_rev, "--base"), resolve_revision(repo, head_rev, "--head")


def load_scope(repo: Path, base_rev: str, head_rev: str, workdir: Path) -> Scope:
    """Load what the change from ``base_rev`` to ``head_rev`` can affect, under ``workdir``."""
    if not (repo / ".git").exists() and not (repo / "HEAD").is_file():
        raise UsageError(
            f"{repo} is not the top directory of a Git checkout (preview reads two of its commits)"
        )
    base_commit, head_commit = resolve_revisions(repo, base_rev, head_rev)
    changed = frozenset(changed_between(repo, base_commit, head_commit))
    touched = _Touched.of(changed)
    base_dir, head_dir = workdir / "base", workdir / "head"
    app_dirs = {
        commit: frozenset(list_directory(repo, commit, "apps"))
        for commit in {base_commit, head_commit}
    }
    for commit, root in ((base_commit, base_dir), (head_commit, head_dir)):
        # waves.yaml: when a release reaches each cluster (the wave plan), checked too
        paths = ["clusters", WAVES_FILE]
        export_paths(repo, commit, paths, root, max_file_bytes=MAX_FILE_BYTES)
        if app_dirs[commit]:
            # the commit has apps even if none is in scope: not "an empty checkout"
            (root / "apps").mkdir(exist_ok=True)
    clusters_base = load_catalog(base_dir)
    # the two trees differ only by the changed paths: parse just those instance files again
    clusters_head = _reload(clusters_base, head_dir, [p for p in changed if _in_clusters(p)])
    keys = _affected(touched, clusters_base, clusters_head)
    needed = set(touched.apps)
    for catalog in (clusters_base, clusters_head):
        for cluster, name in keys:
            entry = catalog.clusters.get(cluster)
            inst = entry.instances.get(name) if entry is not None else None
            if inst is not None and inst.app:
                needed.add(inst.app)
    if touched.everything:
        needed |= app_dirs[base_commit] | app_dirs[head_commit]
    app_paths = [f"apps/{app}" for app in sorted(needed)]
    loaded = export_paths(repo, base_commit, app_paths, base_dir, max_file_bytes=MAX_FILE_BYTES)
    base = _reload(clusters_base, base_dir, loaded)
    export_paths(repo, head_commit, app_paths, head_dir, max_file_bytes=MAX_FILE_BYTES)
    head = _reload(base, head_dir, changed)
    return Scope(
        base=Side(base_rev, base_commit, base, app_dirs[base_commit]),
        head=Side(head_rev, head_commit, head, app_dirs[head_commit]),
        changed=changed,
        instances=frozenset(keys),
        whole_catalog=touched.everything,
    )


def _affected(touched: _Touched, *catalogs: Catalog) -> set[InstanceKey]:
    keys = set(touched.instances)
    for catalog in catalogs:
        for cluster, entry in catalog.clusters.items():
            for name, inst in entry.instances.items():
                if (
                    touched.everything
                    or cluster in touched.clusters
                    or inst.app in touched.apps
                    or (cluster, name) in touched.instances
                ):
                    keys.add((cluster, name))
    # an instance file that exists at neither commit (a renamed or stray file) names nothing
    present = {
        (cluster, name)
        for catalog in catalogs
        for cluster, entry in catalog.clusters.items()
        for name in entry.instances
    }
    return keys & present


def _in_clusters(path: str) -> bool:
    return path == "clusters" or path.startswith("clusters/")


def _reload(previous: Catalog, root: Path, changed: Iterable[str]) -> Catalog:
    """``previous`` moved to the tree at ``root`` (which differs from it by ``changed``)."""
    try:
        return reload_catalog(previous, root, changed)
    except FullReloadNeeded:
        return load_catalog(root)


__all__ = ["InstanceKey", "Scope", "Side", "load_scope", "resolve_revision"]
