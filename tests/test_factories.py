"""The tests' catalog repositories: ``catalog_repo``'s copies and their publishing edits.

``tests.factories.commit_file`` and ``remove_file`` move the remote's branch themselves
where a ``git push`` would be a fast-forward; what they leave must be what the push
left, and anything else must still go through Git (which refuses what a push refuses).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.model.errors import SourceError
from reconciler.source import scaffold
from reconciler.source.scaffold import CatalogRepo
from tests.factories import catalog_repo, commit_file, remove_file, write_catalog
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import git

__all__ = ["git_trace"]

WEB = "clusters/prod/instances/web.yaml"


@pytest.fixture
def repo(tmp_path: Path) -> CatalogRepo:
    return catalog_repo(write_catalog(tmp_path / "source"), tmp_path / "repos")


def test_a_published_edit_is_what_a_push_leaves_without_a_push(
    repo: CatalogRepo, tmp_path: Path, git_trace: GitTrace
) -> None:
    new = commit_file(repo, "README.md", "hello\n", "a readme")
    gone = remove_file(repo, WEB, "remove web")
    assert git_trace.count("push") == 0
    assert git(repo.remote, "rev-parse", "refs/heads/main") == gone
    assert git(repo.remote, "rev-parse", "refs/heads/main~1") == new
    assert git(repo.work, "rev-parse", "@{upstream}") == gone
    assert git(repo.work, "status", "--porcelain", "--branch") == "## main...origin/main"
    git(repo.remote, "fsck", "--strict", "--no-dangling")
    # what a reader of the remote gets: the daemon's clone, over file:// as it reads it
    git(tmp_path, "clone", "-q", repo.url, str(tmp_path / "reader"))
    assert (tmp_path / "reader" / "README.md").read_text() == "hello\n"
    assert not (tmp_path / "reader" / WEB).exists()


def test_an_edit_on_a_remote_that_moved_is_pushed_by_git_and_refused(
    repo: CatalogRepo, tmp_path: Path, git_trace: GitTrace
) -> None:
    """Another writer's commit on the remote: the clone is behind, so the edit is not a
    fast-forward; Git's push refuses it and the remote keeps the other commit."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", repo.url, str(other))
    (other / "NOTES.md").write_text("theirs\n")
    git(other, "add", "NOTES.md")
    git(other, "commit", "-q", "-m", "their note")
    git(other, "push", "-q")
    theirs = git(other, "rev-parse", "HEAD")
    git_trace.clear()
    with pytest.raises(SourceError, match=r"cannot commit README\.md"):
        commit_file(repo, "README.md", "mine\n", "my readme")
    assert git_trace.count("push") == 1
    assert git(repo.remote, "rev-parse", "refs/heads/main") == theirs


def test_a_repository_made_by_create_catalog_repo_is_pushed_by_git(
    tmp_path: Path, git_trace: GitTrace
) -> None:
    """Its remote has an object store of its own: only a push brings the commit there."""
    repo = scaffold.create_catalog_repo(write_catalog(tmp_path / "source"), tmp_path / "r")
    git_trace.clear()
    new = commit_file(repo, "README.md", "hello\n", "a readme")
    assert git_trace.count("push") == 1
    assert git(repo.remote, "rev-parse", "refs/heads/main") == new
    git(repo.remote, "fsck", "--strict", "--no-dangling")


def test_scaffold_without_push_leaves_the_remote_where_it_was(repo: CatalogRepo) -> None:
    before = git(repo.remote, "rev-parse", "refs/heads/main")
    new = scaffold.commit_file(repo, "README.md", "hello\n", "a readme", push=False)
    gone = scaffold.remove_file(repo, WEB, "remove web", push=False)
    assert git(repo.work, "rev-parse", "HEAD~1") == new
    assert git(repo.work, "rev-parse", "HEAD") == gone
    assert git(repo.remote, "rev-parse", "refs/heads/main") == before
    assert git(repo.work, "rev-parse", "@{upstream}") == before
