"""The copied ``catalog_repo`` and ``bare_remote`` are what the Git commands made them."""

from __future__ import annotations

from pathlib import Path

from tests.source.fixtures import commit_file, make_bare_remote
from tests.source.servers import git


def test_the_copies_are_a_checkout_tracking_its_own_bare_remote(
    catalog_repo: Path, bare_remote: Path
) -> None:
    assert git(catalog_repo, "status", "--porcelain") == ""
    assert git(catalog_repo, "remote", "get-url", "origin") == str(bare_remote)
    assert git(bare_remote, "config", "remote.origin.url") == str(catalog_repo)
    head = git(catalog_repo, "rev-parse", "HEAD")
    assert git(catalog_repo, "rev-parse", "@{upstream}") == head
    assert git(bare_remote, "rev-parse", "refs/heads/main") == head
    assert git(catalog_repo, "log", "--format=%s") == "initial catalog"
    new = commit_file(catalog_repo, "README.md", "hello\n", "a readme")
    git(catalog_repo, "push", "-q")
    assert git(bare_remote, "rev-parse", "refs/heads/main") == new
    git(bare_remote, "fsck", "--strict")


def test_a_catalog_committed_to_first_gets_its_remote_from_git(
    catalog_repo: Path, remotes: Path
) -> None:
    """A checkout that is no longer the build's commit (as a fixture between the two
    might make it) is cloned by Git, not replaced by the copy."""
    new = commit_file(catalog_repo, "README.md", "hello\n", "a readme")
    bare = make_bare_remote(catalog_repo, remotes / "catalog.git")
    assert git(bare, "rev-parse", "refs/heads/main") == new
    assert git(catalog_repo, "rev-parse", "@{upstream}") == new
    assert (catalog_repo / "README.md").read_text() == "hello\n"
