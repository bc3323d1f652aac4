"""Parts of a commit's tree written to a directory, for reading a catalog offline at a commit.

``reconciler preview`` compares two commits of a catalog without touching the
checkout the user works in: it writes only the directories the change can
affect (``clusters/`` and a few ``apps/<app>/``) of each commit to a temporary
directory and loads them there. ``git archive`` streams exactly the tracked
files of the commit (symlinks as symlinks, like a checkout), which the loader
then checks as it checks any checkout; extraction uses tarfile's ``tar``
filter, so no member is written outside the destination even through a
symlink an earlier member created.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from pathlib import Path

import git

from reconciler.model.errors import SourceError
from reconciler.source.runner import GitFailed, run, run_binary


def _open(repo: str | Path) -> git.Repo:
    try:
        return git.Repo(str(repo))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise SourceError(f"{repo} is not a Git repository") from e


def resolve_commit(repo: str | Path, rev: str) -> str:
    """The full commit id ``rev`` names in ``repo`` (a branch, tag, ``HEAD~1``, a SHA).

    Raises ``SourceError`` naming the revision when it names no commit, so the
    command can say which of its arguments is wrong.
    """
    if not rev or rev.startswith("-"):
        raise SourceError(f'"{rev}" is not a revision')
    try:
        return run(
            _open(repo),
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
            what=f"rev-parse {rev}",
        ).strip()
    except GitFailed as e:
        raise SourceError(f'"{rev}" names no commit in {repo}') from e


def list_directory(repo: str | Path, commit: str, directory: str) -> list[str]:
    """Names of the entries of ``directory`` (a path in the tree) at ``commit``; [] if absent."""
    out = run(
        _open(repo),
        ["ls-tree", "--name-only", "-z", commit, "--", directory.rstrip("/") + "/"],
        what=f"ls-tree {directory}",
    )
    return sorted(p.rsplit("/", 1)[-1] for p in out.split("\0") if p)


def existing_paths(repo: str | Path, commit: str, paths: Iterable[str]) -> list[str]:
    """The ``paths`` (files or directories of the tree) that exist at ``commit``."""
    wanted = sorted({p.strip("/") for p in paths if p.strip("/")})
    if not wanted:
        return []
    out = run(_open(repo), ["ls-tree", "--name-only", "-z", commit, "--", *wanted], what="ls-tree")
    found = {p for p in out.split("\0") if p}
    return [p for p in wanted if p in found]


def export_paths(repo: str | Path, commit: str, paths: Iterable[str], dest: Path) -> list[str]:
    """Write ``paths`` of ``commit``'s tree (those that exist) under ``dest``; return them."""
    present = existing_paths(repo, commit, paths)
    dest.mkdir(parents=True, exist_ok=True)
    if not present:
        return []
    data = run_binary(_open(repo), ["archive", "--format=tar", commit, "--", *present])
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        archive.extractall(dest, filter="tar")
    return present


__all__ = ["existing_paths", "export_paths", "list_directory", "resolve_commit"]
