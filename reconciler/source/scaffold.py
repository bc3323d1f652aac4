"""Create a catalog repository with a bare remote, and commit edits to it.

Used by ``reconciler demo`` to set up the same arrangement a team has (a
working clone people edit, and a remote the daemon follows), and by tests that
need one. Commits carry an explicit identity so they work on a machine with no
Git configuration at all.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.model.errors import SourceError
from reconciler.source.runner import read_ref

IDENTITY = {
    "GIT_AUTHOR_NAME": "reconciler demo",
    "GIT_AUTHOR_EMAIL": "demo@reconciler.invalid",
    "GIT_COMMITTER_NAME": "reconciler demo",
    "GIT_COMMITTER_EMAIL": "demo@reconciler.invalid",
}


@dataclass(frozen=True)
class CatalogRepo:
    work: Path  # the clone people edit
    remote: Path  # the bare repository the daemon follows

    @property
    def url(self) -> str:
        return self.remote.as_uri()


def create_catalog_repo(
    template: Path,
    into: Path,
    *,
    branch: str = "main",
    prepare: Callable[[Path], None] | None = None,
) -> CatalogRepo:
    """Copy ``template`` into ``into/catalog`` as a Git repo pushed to ``into/catalog.git``.

    ``prepare`` may adjust the copy before its first commit (the demo points an
    example app at the registry it started).
    """
    work, remote = into / "catalog", into / "catalog.git"
    try:
        shutil.copytree(template, work)
        if prepare is not None:
            prepare(work)
        repo = git.Repo.init(str(work), initial_branch=branch)
        repo.git.add(A=True)
        with repo.git.custom_environment(**IDENTITY):
            repo.git.commit(m="Import the example catalog", q=True)
        git.Repo.init(str(remote), bare=True, initial_branch=branch)
        repo.create_remote("origin", remote.as_uri())
        repo.git.push("origin", branch, set_upstream=True, q=True)
    except (OSError, git.GitCommandError) as e:
        raise SourceError(f"cannot create the catalog repository in {into}: {e}") from e
    return CatalogRepo(work, remote)


def commit_file(
    repo: CatalogRepo, rel: str, content: str, message: str, *, push: bool = True
) -> str:
    """Write ``rel`` in the working clone, commit it, push it; return the commit id.

    ``push=False`` leaves the commit in the clone, for a caller that publishes it its
    own way (the tests move their local remote's branch without a ``git push``).
    """
    path = repo.work / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    try:
        git_repo = git.Repo(str(repo.work))
        tracked = _tracked(git_repo, rel)
        if not tracked:
            git_repo.git.add(rel)
        with git_repo.git.custom_environment(**IDENTITY):
            # a tracked file: ``git commit -- <file>`` takes its content itself (no add)
            git_repo.git.commit(*(["--", rel] if tracked else []), m=message, q=True)
        if push:
            git_repo.git.push(q=True)
        return _head(git_repo)
    except git.GitCommandError as e:
        raise SourceError(f"cannot commit {rel}: {e}") from e


def _tracked(repo: git.Repo, rel: str) -> bool:
    """Whether ``rel`` is in the index, read in process (False when gitpython cannot read
    the index: ``git add`` then stages it, as for a new file)."""
    try:
        return (Path(rel).as_posix(), 0) in repo.index.entries
    except Exception:  # gitpython raises several types for an index it cannot parse
        return False


def log_oneline(repository: Path, ref: str, limit: int = 20) -> list[str]:
    """``git log --oneline`` of ``ref`` in ``repository``, newest first."""
    try:
        out = git.Repo(str(repository)).git.log("--oneline", f"-{limit}", ref)
    except git.GitCommandError as e:
        raise SourceError(f"cannot read {ref} in {repository}: {e}") from e
    return [line for line in str(out).splitlines() if line]


def commit_message(repository: Path, ref: str) -> str:
    """The full message of ``ref``'s commit in ``repository`` (subject, body, trailers)."""
    try:
        return str(git.Repo(str(repository)).git.log("-1", "--format=%B", ref))
    except git.GitCommandError as e:
        raise SourceError(f"cannot read {ref} in {repository}: {e}") from e


def remove_file(repo: CatalogRepo, rel: str, message: str, *, push: bool = True) -> str:
    """Delete ``rel`` from the working clone, commit and push; return the commit id.

    ``push=False``: as for ``commit_file``.
    """
    try:
        git_repo = git.Repo(str(repo.work))
        git_repo.git.rm(rel, q=True)
        with git_repo.git.custom_environment(**IDENTITY):
            git_repo.git.commit(m=message, q=True)
        if push:
            git_repo.git.push(q=True)
        return _head(git_repo)
    except git.GitCommandError as e:
        raise SourceError(f"cannot remove {rel}: {e}") from e


def _head(repo: git.Repo) -> str:
    """The commit just made: ``HEAD`` read from its ref files (``head.commit`` started a
    ``git cat-file`` process of its own in each new ``Repo`` to read the commit object)."""
    head = read_ref(repo, "HEAD")
    if head is None:
        raise SourceError(f"{repo.working_dir}: no commit at HEAD after committing")
    return head


def init_checkout(path: Path) -> bool:
    """``git init -b main`` at ``path`` unless it is inside a repository; True if created."""
    try:
        git.Repo(str(path), search_parent_directories=True)
        return False
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        pass
    try:
        git.Repo.init(str(path), initial_branch="main")
    except git.GitCommandError as e:
        raise SourceError(f"{path}: git init failed: {e.stderr.strip()}") from e
    return True
