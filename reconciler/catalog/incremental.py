"""Reload a catalog after a change by reading only the parts the change touched.

A full ``load_catalog`` parses and checks every file: 17 s of CPU at 5,000
apps, spent again on every commit even when one file changed. What the loader
computes is local by construction: an app's entry and problems depend only on
files under ``apps/<app>/``, a cluster's settings only on ``clusters/<c>/``
(its ``cluster.yaml`` and the names in it), and an instance only on its own
file(s) in ``clusters/<c>/instances/`` (every read is checked to stay inside its
directory, see ``LoadContext.check_contained``). The checks that cross those
boundaries (instance -> app, channel -> version resolution, one object rendered
by two instances) are not part of loading; ``reconcile_checkout`` and
``check_catalog`` run them on the whole catalog each time.

So, given the previous catalog and the paths that changed since, this module
keeps every app, cluster and instance whose directory or file did not change,
together with its problems, and loads the rest exactly as the full loader does.
The result equals ``load_catalog`` of the new tree (the property test in
``tests/catalog/test_incremental.py`` checks it on random edits). Anything it
cannot prove local (a symlinked app or cluster directory, which may alias
another; a symlinked ``instances/``; a change to ``apps`` or ``clusters``
themselves; problems outside any unit; an instance file naming an analysis Job,
which the loader reads from its app's version directories) raises
``FullReloadNeeded`` and the caller loads everything.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from reconciler.catalog.context import LoadContext
from reconciler.catalog.loader import (
    _instance_files,
    _is_documentation,
    _load_app,
    _load_cluster,
    _load_cluster_head,
    _load_instance_group,
    load_catalog,
    sorted_problems,
)
from reconciler.catalog.waves import load_waves
from reconciler.model.catalog import Catalog, ClusterEntry, Instance
from reconciler.model.errors import ReconcilerError
from reconciler.model.gcpause import gc_paused
from reconciler.model.problems import Problem
from reconciler.model.waves import WAVES_FILE

log = logging.getLogger(__name__)


class FullReloadNeeded(Exception):
    """The change cannot be applied incrementally; load the whole catalog instead."""


@dataclass
class _OldProblems:
    """The previous load's problems by the unit whose reload would report them again."""

    apps: dict[str, list[Problem]] = field(default_factory=dict)
    clusters: dict[str, list[Problem]] = field(default_factory=dict)  # the cluster's own
    instances: dict[str, dict[str, list[Problem]]] = field(default_factory=dict)  # by file name

    @classmethod
    def of(cls, problems: Iterable[Problem]) -> _OldProblems:
        out = cls()
        for problem in problems:
            if problem.file == WAVES_FILE:
                continue  # waves.yaml is read again by every load (``catalog.waves``)
            parts = problem.file.split("/")
            if len(parts) >= 2 and parts[0] == "apps":
                out.apps.setdefault(parts[1], []).append(problem)
            elif len(parts) >= 4 and parts[0] == "clusters" and parts[2] == "instances":
                by_file = out.instances.setdefault(parts[1], {})
                by_file.setdefault(parts[3], []).append(problem)
            elif len(parts) >= 2 and parts[0] == "clusters":
                out.clusters.setdefault(parts[1], []).append(problem)
            else:
                raise FullReloadNeeded(f"a problem outside any app or cluster: {problem.file}")
        return out

    def of_cluster(self, name: str) -> list[Problem]:
        """A cluster kept whole: its own problems and its instances'."""
        out = list(self.clusters.get(name, ()))
        for found in self.instances.get(name, {}).values():
            out.extend(found)
        return out

    def of_instance(self, cluster: str, file: str) -> list[Problem]:
        return self.instances.get(cluster, {}).get(file, [])


@dataclass
class _Changes:
    """Changed paths sorted by the unit they can affect."""

    apps: set[str] = field(default_factory=set)
    cluster_heads: set[str] = field(default_factory=set)  # cluster.yaml, entries, the dir itself
    whole_clusters: set[str] = field(default_factory=set)
    instance_stems: dict[str, set[str]] = field(default_factory=dict)  # cluster -> stems

    @classmethod
    def of(cls, paths: Iterable[str]) -> _Changes:
        out = cls()
        for path in paths:
            parts = path.strip("/").split("/")
            top = parts[0]
            if top not in ("apps", "clusters"):
                continue  # the loader reads nothing outside apps/ and clusters/
            if len(parts) == 1:
                raise FullReloadNeeded(f"{top} itself changed")
            name = parts[1]
            if top == "apps":
                out.apps.add(name)
            elif len(parts) == 2:
                out.whole_clusters.add(name)
            elif len(parts) == 4 and parts[2] == "instances":
                out.instance_stems.setdefault(name, set()).add(Path(parts[3]).stem)
            else:
                # cluster.yaml, an unknown entry, instances/ replaced by a file, or a
                # path below an entry of instances/ (that entry is a directory: an error
                # the listing reports again)
                out.cluster_heads.add(name)
        return out

    def touches_cluster(self, name: str) -> bool:
        return (
            name in self.cluster_heads or name in self.whole_clusters or name in self.instance_stems
        )


def reload_catalog(previous: Catalog, root: str | Path, changed: Iterable[str]) -> Catalog:
    """The catalog at ``root``, given ``previous`` (loaded from the tree before ``changed``).

    ``changed`` holds every path (relative to the root, POSIX) that differs
    between the two trees: added, removed or modified files, as ``git diff
    --name-only`` lists them. Raises ``FullReloadNeeded`` when the change is not
    provably local; the caller then runs ``load_catalog``.
    """
    with gc_paused(keeps=True):
        return _reload(previous, Path(root), _Changes.of(changed))


def _reload(previous: Catalog, base: Path, changes: _Changes) -> Catalog:
    apps_dir, clusters_dir = base / "apps", base / "clusters"
    if not base.is_dir() or not (apps_dir.is_dir() or clusters_dir.is_dir()):
        raise FullReloadNeeded("not a catalog checkout")
    if os.path.islink(apps_dir) or os.path.islink(clusters_dir):
        raise FullReloadNeeded("apps/ or clusters/ is a symlink")
    old = _OldProblems.of(previous.problems)

    ctx = LoadContext.for_root(base)
    problems: list[Problem] = []
    catalog = Catalog(root=str(base))
    for name in _listed_dirs(ctx, apps_dir):
        entry = previous.apps.get(name)
        if entry is not None and name not in changes.apps:
            catalog.apps[name] = entry
            problems.extend(old.apps.get(name, ()))
        else:
            catalog.apps[name] = _load_app(ctx, apps_dir / name)
    for name in _listed_dirs(ctx, clusters_dir):
        cluster = previous.clusters.get(name)
        if cluster is not None and not changes.touches_cluster(name):
            catalog.clusters[name] = cluster
            problems.extend(old.of_cluster(name))
        elif cluster is None or name in changes.whole_clusters:
            catalog.clusters[name] = _load_cluster(ctx, clusters_dir / name)
        else:
            catalog.clusters[name] = _reload_cluster(
                ctx,
                clusters_dir / name,
                cluster,
                changes.instance_stems.get(name, set()),
                old,
                problems,
            )
    if _names_analysis(previous) or _names_analysis(catalog):
        # such an instance reads a file from its app's versions (``rollout.analysis``
        # in the instance file): the one dependency across directories
        raise FullReloadNeeded("an instance file names an analysis Job")
    catalog.waves = load_waves(ctx, base, catalog)
    catalog.problems = sorted_problems(problems + ctx.problems)
    catalog.files_with_errors = {p.file for p in catalog.problems if p.is_error}
    return catalog


def _names_analysis(catalog: Catalog) -> bool:
    return any(
        inst.rollout is not None and isinstance(inst.rollout.analysis, str)
        for entry in catalog.clusters.values()
        for inst in entry.instances.values()
    )


def _listed_dirs(ctx: LoadContext, parent: Path) -> list[str]:
    """Directory names in ``apps/`` or ``clusters/``, reporting stray files like the loader.

    A symlinked entry could alias another app's directory, so that one's changes
    would affect it unseen: those catalogs are always loaded whole.
    """
    if not ctx.is_dir(parent):
        return []
    names: list[str] = []
    for name, found in sorted(ctx.listing(parent).items()):
        if name.startswith("."):
            continue
        if found.is_symlink:
            raise FullReloadNeeded(f"{ctx.rel(parent / name)} is a symlink")
        if found.is_dir:
            names.append(name)
        elif not _is_documentation(name, found):
            ctx.error(
                ctx.rel(parent / name),
                None,
                f"unexpected file in {ctx.rel(parent)}/ (only directories belong here)",
            )
    return names


def _reload_cluster(
    ctx: LoadContext,
    cluster_dir: Path,
    previous: ClusterEntry,
    stems: set[str],
    old: _OldProblems,
    problems: list[Problem],
) -> ClusterEntry:
    """A changed cluster: its settings and listing again, and only the changed instances.

    An instance is kept when none of its files changed: then the same files
    make up its group (an added or removed file is a change) with the same
    contents. Symlinked instance files may point at another file of the
    directory, so they are always read again.
    """
    name = cluster_dir.name
    if os.path.islink(cluster_dir / "instances"):
        return _load_cluster(ctx, cluster_dir)
    entry = ClusterEntry(name=name, cluster=_load_cluster_head(ctx, cluster_dir))
    links: set[str] = set()
    for stem, found in _instance_files(ctx, cluster_dir, links).items():
        kept: Instance | None = previous.instances.get(stem)
        if kept is not None and stem not in stems and stem not in links:
            entry.instances[stem] = kept
            for path in found:
                problems.extend(old.of_instance(name, path.name))
        else:
            entry.instances[stem] = _load_instance_group(ctx, name, stem, found)
    return entry


# ---------------------------------------------------------------- the daemon's cache

S = TypeVar("S")


class CatalogCache(Generic[S]):
    """The last catalog loaded and the state of the tree it came from.

    ``diff(root, old, new)`` lists the paths that differ between two tree
    states (the daemon passes ``reconciler.source.changes.changed_since``: a
    ``git diff`` between commits plus, for a ``--watch`` working tree, the paths
    that differed from HEAD then and now). Any failure of the incremental path
    falls back to a full load, which stays the reference.
    """

    def __init__(self, diff: Callable[[Path, S, S], Iterable[str]]) -> None:
        self._diff = diff
        self._last: tuple[Path, S, Catalog] | None = None
        self.full_loads = 0
        self.incremental_loads = 0

    def load(self, root: str | Path, state: S) -> Catalog:
        """The catalog at ``root``, whose tree is in ``state``."""
        base = Path(root)
        catalog = None
        if self._last is not None and self._last[0] == base:
            _, old, previous = self._last
            try:
                catalog = reload_catalog(previous, base, self._diff(base, old, state))
                self.incremental_loads += 1
            except FullReloadNeeded as e:
                log.info("catalog: full reload (%s)", e)
            except ReconcilerError as e:  # e.g. the old commit is gone from a shallow clone
                log.info("catalog: full reload (cannot tell what changed: %s)", e)
            except Exception:  # the full load is the reference: never fail on the shortcut
                log.warning("catalog: incremental reload failed; loading all", exc_info=True)
        if catalog is None:
            catalog = load_catalog(base)
            self.full_loads += 1
        self._last = (base, state, catalog)
        return catalog


__all__ = [
    "CatalogCache",
    "FullReloadNeeded",
    "reload_catalog",
]
