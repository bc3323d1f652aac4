"""What changed in a catalog tree between two loads, for the incremental catalog loader.

``reconciler.catalog.incremental`` reloads only the apps, clusters and instances
whose files changed; this module tells it which paths those are, from Git:
``git diff`` between the two commits and, for a ``--watch`` working tree, the
paths that differed from HEAD at either load (``git status``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.model.errors import SourceError


@dataclass(frozen=True)
class TreeState:
    """A checkout as a catalog was read from it: its commit and its local edits."""

    head: str
    # paths differing from ``head`` (worktrees only); None: unknown, compare in full
    dirty: frozenset[str] | None = frozenset()


def tree_state(repo: str | Path, head: str, *, worktree: bool = False) -> TreeState:
    """The state of the checkout at ``repo`` (commit ``head``); read before loading it.

    Taken before the load, so an edit made while loading shows up next time as
    a dirty path (or a new commit) and is read again then. When Git cannot list
    the edits the state is unknown and the next load is a full one.
    """
    if not worktree:
        return TreeState(head)
    try:
        return TreeState(head, frozenset(dirty_paths(repo)))
    except SourceError:
        return TreeState(head, None)


def changed_since(repo: str | Path, old: TreeState, new: TreeState) -> set[str]:
    """Every path that may differ between the trees of ``old`` and ``new``."""
    if old.dirty is None or new.dirty is None:
        raise SourceError(f"local edits in {repo} unknown")
    return changed_between(repo, old.head, new.head) | old.dirty | new.dirty


def changed_between(repo: str | Path, old: str, new: str) -> set[str]:
    """Paths that differ between commits ``old`` and ``new`` of the repository at ``repo``.

    ``--no-renames`` lists both sides of a rename (with rename detection on, only
    the new name would show); ``-z`` keeps unusual file names unquoted. Raises
    ``SourceError`` when either commit is not there (a shallow clone may lack it).
    """
    if old == new:
        return set()
    try:
        out = git.Repo(str(repo)).git.diff("--name-only", "--no-renames", "-z", old, new, "--")
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise SourceError(f"cannot diff {old[:12]}..{new[:12]} in {repo}: {e}") from e
    return {p for p in str(out).split("\0") if p}


def dirty_paths(repo: str | Path) -> set[str]:
    """Paths of a working tree that differ from its HEAD: modified, untracked or ignored.

    Ignored files count: the loader reads every file (a stray ``*.bak`` is an
    error). Git does not see empty directories, so a new empty directory inside
    an unchanged app is noticed only when a file of that app changes.
    """
    try:
        out = git.Repo(str(repo)).git.status(
            "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=traditional", "--no-renames"
        )
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise SourceError(f"cannot list local changes in {repo}: {e}") from e
    return {record[3:].rstrip("/") for record in str(out).split("\0") if len(record) > 3}


__all__ = ["TreeState", "changed_between", "changed_since", "dirty_paths", "tree_state"]
