"""A remote on this machine is listed in process, exactly as ``git ls-remote --heads``
lists it, and left to Git whenever the reading could differ from Git's.

Every answer is compared with what Git itself prints for the same repository and
patterns (the refs' layout: https://git-scm.com/docs/gitrepository-layout, a loose
ref over a packed one; pattern matching: https://git-scm.com/docs/git-ls-remote).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.source.checkout import CatalogSource
from reconciler.source.localrefs import local_heads
from reconciler.source.remote import RemoteAccess
from reconciler.source.runner import parse_listing
from tests.source.fixtures import bare_remote, catalog_repo, commit_file, remotes
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import git

__all__ = ["bare_remote", "catalog_repo", "git_trace", "remotes"]

PATTERNS = [
    ["refs/heads/main"],
    ["refs/heads/status/*"],
    ["refs/heads/main", "refs/heads/status/*"],
    ["main"],  # a tail: also x/main
    ["refs/heads/st?tus/p*"],
    ["refs/heads/nothing"],
    [],
]


def ls_remote(url: str, patterns: list[str]) -> dict[str, str]:
    return parse_listing(git(Path.cwd(), "ls-remote", "--heads", url, *patterns))


@pytest.fixture
def mixed(bare_remote: Path) -> Path:
    """A bare repository whose heads are packed, loose, loose over packed, and nested."""
    head = git(bare_remote, "rev-parse", "refs/heads/main")
    for name in ("status/prod", "status/prod-eu", "status/a/b", "x/main", "other"):
        git(bare_remote, "update-ref", f"refs/heads/{name}", head)
    git(bare_remote, "tag", "v1", head)
    git(bare_remote, "pack-refs", "--all")
    tree = git(bare_remote, "rev-parse", f"{head}^{{tree}}")
    newer = git(bare_remote, "commit-tree", tree, "-p", head, "-m", "newer")
    git(bare_remote, "update-ref", "refs/heads/status/prod", newer)  # loose over packed
    git(bare_remote, "update-ref", "refs/heads/status/staging", newer)  # loose only
    git(bare_remote, "update-ref", "-d", "refs/heads/other")  # gone from packed-refs too
    return bare_remote


@pytest.mark.parametrize("patterns", PATTERNS, ids=lambda p: ",".join(p) or "all")
@pytest.mark.parametrize("form", ["path", "file-url"])
def test_the_listing_is_what_git_ls_remote_lists(
    mixed: Path, patterns: list[str], form: str
) -> None:
    spec = str(mixed) if form == "path" else mixed.as_uri()
    access = RemoteAccess.parse(spec)
    listed = local_heads(access, patterns)
    assert listed is not None
    assert listed == ls_remote(access.url, patterns)
    if patterns == ["refs/heads/status/*"]:
        assert "refs/heads/status/a/b" in listed  # `*` goes across `/`, as in Git
        assert listed["refs/heads/status/prod"] != listed["refs/heads/status/prod-eu"]


def test_a_working_trees_repository_is_listed_from_its_git_directory(
    catalog_repo: Path,
) -> None:
    git(catalog_repo, "branch", "status/prod")
    access = RemoteAccess.parse(str(catalog_repo))
    listed = local_heads(access, ["refs/heads/*"])
    assert listed is not None and set(listed) == {"refs/heads/main", "refs/heads/status/prod"}
    assert listed == ls_remote(access.url, ["refs/heads/*"])


def test_an_update_under_way_is_not_a_ref(mixed: Path) -> None:
    """A ``.lock`` file is a write that has not happened yet: the ref is what it was."""
    (mixed / "refs" / "heads" / "status" / "prod.lock").write_text("0" * 40 + "\n")
    listed = local_heads(RemoteAccess.parse(str(mixed)), ["refs/heads/status/*"])
    assert listed == ls_remote(mixed.as_uri(), ["refs/heads/status/*"])


def _symref(repo: Path) -> None:
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")


def _garbage(repo: Path) -> None:
    (repo / "refs" / "heads" / "broken").write_text("not an object name\n")


def _odd_name(repo: Path) -> None:
    (repo / "refs" / "heads" / "odd name").write_text(git(repo, "rev-parse", "main") + "\n")


def _hidden(repo: Path) -> None:
    git(repo, "config", "uploadpack.hideRefs", "refs/heads/status")


def _include(repo: Path) -> None:
    git(repo, "config", "include.path", "/dev/null")


def _reftable(repo: Path) -> None:
    (repo / "reftable").mkdir()


def _ref_storage(repo: Path) -> None:
    git(repo, "config", "extensions.refStorage", "files")


def _foreign_owner(repo: Path) -> None:
    os.chown(repo, os.getuid() + 1, -1)


def _packed_garbage(repo: Path) -> None:
    with (repo / "packed-refs").open("a") as f:
        f.write("garbage\n")


def _packed_not_utf8(repo: Path) -> None:
    sha = git(repo, "rev-parse", "main")
    with (repo / "packed-refs").open("ab") as f:
        f.write(sha.encode() + b" refs/heads/caf\xe9\n")  # Latin-1, as no Git writes


@pytest.mark.parametrize(
    "change",
    [
        _symref,
        _garbage,
        _odd_name,
        _hidden,
        _include,
        _reftable,
        _ref_storage,
        _packed_garbage,
        _packed_not_utf8,
        pytest.param(
            _foreign_owner,
            marks=pytest.mark.skipif(os.getuid() != 0, reason="changing an owner needs root"),
        ),
    ],
)
def test_what_the_reading_might_see_otherwise_is_left_to_git(mixed: Path, change: object) -> None:
    change(mixed)  # type: ignore[operator]
    assert local_heads(RemoteAccess.parse(str(mixed)), ["refs/heads/*"]) is None


@pytest.mark.parametrize(
    "environ",
    [{"GIT_NAMESPACE": "team"}, {"GIT_CONFIG_PARAMETERS": "'a.b'='c'"}, {"GIT_CONFIG_COUNT": "1"}],
)
def test_an_environment_that_changes_the_advertisement_is_left_to_git(
    mixed: Path, environ: dict[str, str]
) -> None:
    assert local_heads(RemoteAccess.parse(str(mixed)), ["refs/heads/*"], environ) is None


def test_hidden_refs_in_the_users_config_are_left_to_git(mixed: Path, tmp_path: Path) -> None:
    config = tmp_path / "global-config"
    config.write_text("[transfer]\n\thideRefs = refs/heads/status\n")
    environ = {"GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"}
    assert local_heads(RemoteAccess.parse(str(mixed)), ["refs/heads/*"], environ) is None
    config.write_text("[user]\n\tname = someone\n")
    assert local_heads(RemoteAccess.parse(str(mixed)), ["refs/heads/*"], environ) is not None


@pytest.mark.parametrize(
    "spec",
    ["https://git.example.com/catalog.git", "ssh://git@example.com/catalog.git"],
)
def test_a_remote_elsewhere_is_left_to_git(spec: str) -> None:
    assert local_heads(RemoteAccess.parse(spec), ["refs/heads/main"]) is None


def test_a_file_url_with_a_host_or_a_missing_repository_is_left_to_git(tmp_path: Path) -> None:
    assert local_heads(RemoteAccess.parse("file://elsewhere/x.git"), ["refs/heads/main"]) is None
    missing = RemoteAccess.parse((tmp_path / "missing.git").as_uri())
    assert local_heads(missing, ["refs/heads/main"]) is None


def test_a_linked_worktree_is_left_to_git(catalog_repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(catalog_repo, "worktree", "add", "-q", "-b", "side", str(linked))
    assert local_heads(RemoteAccess.parse(str(linked)), ["refs/heads/*"]) is None


def test_a_pattern_with_a_bracket_is_left_to_git(mixed: Path) -> None:
    assert local_heads(RemoteAccess.parse(str(mixed)), ["refs/heads/[sm]*"]) is None


def test_a_sync_of_a_local_catalog_lists_without_a_process_and_sees_each_move(
    catalog_repo: Path, bare_remote: Path, git_trace: GitTrace, tmp_path: Path
) -> None:
    """The poll of an unmoved branch runs no Git process at all; a commit pushed to the
    remote is still seen by the next sync, which fetches it once."""
    source = CatalogSource(bare_remote.as_uri(), cache_dir=tmp_path / "cache")
    first = source.sync()
    git_trace.clear()
    again = source.sync(also=["refs/heads/status/*"])
    assert again.commit == first.commit and not again.changed
    assert git_trace.commands() == []
    assert again.listed == ls_remote(bare_remote.as_uri(), ["main", "refs/heads/status/*"])

    commit_file(catalog_repo, "README.md", "moved\n", "move the branch")
    git(catalog_repo, "push", "-q", "origin", "main")
    git_trace.clear()
    moved = source.sync()
    assert moved.changed and moved.commit == git(bare_remote, "rev-parse", "main")
    assert git_trace.count("ls-remote") == 0
    assert git_trace.count("fetch") == 1
