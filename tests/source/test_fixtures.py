"""The copied ``catalog_repo`` and ``bare_remote`` are what the Git commands made them."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from tests import factories
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


def _tree(root: Path) -> list[tuple[str, str, int, bytes]]:
    listing = []
    for path in sorted(root.rglob("*")):
        mode = stat.S_IMODE(path.lstat().st_mode)
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            listing.append((rel, "l", mode, os.readlink(path).encode()))
        elif path.is_dir():
            listing.append((rel, "d", mode, b""))
        else:
            listing.append((rel, "f", mode, path.read_bytes()))
    return listing


def test_a_copy_of_a_built_catalog_is_what_copytree_makes(tmp_path: Path) -> None:
    """``factories._write_copy`` writes the directories, bytes, symlinks and permission
    bits ``shutil.copytree`` copies (a read-only pack, an executable hook, a read-only
    directory written into first), the first time and from what it read then."""
    source = tmp_path / "built"
    (source / "objects" / "pack").mkdir(parents=True)
    (source / "objects" / "pack" / "p.pack").write_bytes(b"\0PACK" * 1000)
    (source / "objects" / "pack" / "p.pack").chmod(0o444)
    (source / "hooks").mkdir()
    (source / "hooks" / "post-commit").write_text("#!/bin/sh\n")
    (source / "hooks" / "post-commit").chmod(0o755)
    (source / "HEAD").write_text("ref: refs/heads/main\n")
    (source / "head-link").symlink_to("HEAD")
    (source / "locked").mkdir()
    (source / "locked" / "file").write_text("x")
    (source / "locked").chmod(0o555)
    expected = tmp_path / "copytree"
    shutil.copytree(source, expected, symlinks=True, copy_function=shutil.copy)
    for n in (1, 2):
        factories._write_copy(source, tmp_path / f"copy{n}")
        assert _tree(tmp_path / f"copy{n}") == _tree(expected)
        assert stat.S_IMODE((tmp_path / f"copy{n}").stat().st_mode) == stat.S_IMODE(
            expected.stat().st_mode
        )
    for root in (source, expected, tmp_path / "copy1", tmp_path / "copy2"):
        (root / "locked").chmod(0o755)  # for tmp_path's removal
