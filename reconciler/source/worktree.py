"""Read a local catalog working tree as it is on disk, for ``reconciler run --watch``.

People editing a catalog locally want to see a save reach their cluster
without committing first, so watch mode reconciles the working tree itself.
Its status records still name a commit: HEAD, with ``-dirty`` when the tree
has uncommitted changes, so history never claims a commit that did not hold
what was applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.model.errors import SourceError, UsageError


@dataclass(frozen=True)
class WorktreeState:
    path: Path
    commit: str  # HEAD, or HEAD + "-dirty"
    head: str
    dirty: bool


def read_worktree(path: str | Path) -> WorktreeState:
    """The working tree at ``path``: its HEAD commit and whether files differ from it."""
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory (--watch needs a local catalog checkout)")
    try:
        repo = git.Repo(str(root), search_parent_directories=False)
        head = repo.head.commit.hexsha
        dirty = repo.is_dirty(untracked_files=True)
    except git.InvalidGitRepositoryError as e:
        raise UsageError(f"{root} is not a Git repository (--watch needs a checkout)") from e
    except (ValueError, git.GitCommandError) as e:
        raise SourceError(f"{root}: cannot read HEAD: {e}") from e
    return WorktreeState(root, f"{head}-dirty" if dirty else head, head, dirty)
