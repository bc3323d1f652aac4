"""CatalogSource against real repositories: paths, file://, git daemon, authenticated HTTP."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from reconciler.model.errors import SourceError
from reconciler.source.checkout import CatalogSource
from reconciler.source.remote import Credentials, NetworkPolicy
from reconciler.source.runner import MissingRemoteBranch
from tests.source.fixtures import TOKEN, commit_file
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import GitDaemon, GitHttpServer, SilentServer, free_port, git

__all__ = ["git_trace"]

FAST = NetworkPolicy(timeout=10, attempts=2, backoff=0)


def _push_change(catalog: Path, rel: str, content: str) -> str:
    sha = commit_file(catalog, rel, content, f"change {rel}")
    git(catalog, "push", "-q", "origin", "main")
    return sha


def test_local_path_sync_checks_out_head_and_reports_changes(catalog_repo: Path) -> None:
    source = CatalogSource(str(catalog_repo))
    first = source.sync()
    assert first.commit == git(catalog_repo, "rev-parse", "HEAD")
    assert first.changed and first.previous is None
    assert (first.path / "apps/podinfo/channels.yaml").is_file()
    assert first.branch == "main"
    again = source.sync()
    assert not again.changed and again.commit == first.commit
    new = commit_file(catalog_repo, "README.md", "hello\n", "readme")
    moved = source.sync()
    assert moved.changed and moved.commit == new and moved.previous == first.commit
    assert (moved.path / "README.md").read_text() == "hello\n"


def test_file_url_clone_is_shallow_and_follows_the_branch(
    catalog_repo: Path, bare_remote: Path
) -> None:
    source = CatalogSource(bare_remote.as_uri())
    first = source.sync()
    assert (first.path / ".git" / "shallow").is_file()
    new = _push_change(catalog_repo, "apps/podinfo/app.yaml", "kind: App\n")
    result = source.sync()
    assert result.changed and result.commit == new == result.remote_commit
    assert (result.path / "apps/podinfo/app.yaml").read_text() == "kind: App\n"


def test_force_pushed_branch_is_followed(catalog_repo: Path, bare_remote: Path) -> None:
    source = CatalogSource(bare_remote.as_uri())
    _push_change(catalog_repo, "a.txt", "one\n")
    before = source.sync()
    git(catalog_repo, "reset", "-q", "--hard", "HEAD~1")
    rewritten = commit_file(catalog_repo, "b.txt", "rewritten\n", "rewrite history")
    git(catalog_repo, "push", "-q", "--force", "origin", "main")
    after = source.sync()
    assert after.changed and after.commit == rewritten != before.commit
    assert not (after.path / "a.txt").exists()
    assert (after.path / "b.txt").read_text() == "rewritten\n"


def test_a_sync_lists_more_patterns_in_its_ls_remote(
    catalog_repo: Path, bare_remote: Path, cache_dir: Path
) -> None:
    """``sync(also=...)``: the remote's refs the same ``git ls-remote`` listed (the
    daemon's status branches for the wave gate); a clone lists nothing."""
    source = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir)
    assert source.sync(also=["refs/heads/status/*"]).listed is None  # cloned
    git(catalog_repo, "push", "-q", "origin", "main:refs/heads/status/prod")
    head = git(catalog_repo, "rev-parse", "HEAD")
    listed = source.sync(also=["refs/heads/status/*"]).listed
    assert listed == {"refs/heads/main": head, "refs/heads/status/prod": head}
    assert source.sync().listed == {"refs/heads/main": head}
    new = _push_change(catalog_repo, "a.txt", "one\n")
    moved = source.sync(also=["refs/heads/status/*"])
    assert moved.changed and moved.listed == {
        "refs/heads/main": new,
        "refs/heads/status/prod": head,
    }


def test_a_fresh_clone_is_checked_out_without_a_clean_and_later_syncs_clean(
    catalog_repo: Path, bare_remote: Path, git_trace: GitTrace
) -> None:
    """The clone checks out its head itself, nothing to check out or clean after it; a
    new commit, and a new process on the cached clone, still clean what does not belong."""
    source = CatalogSource(bare_remote.as_uri())
    first = source.sync()
    assert git_trace.count("checkout") == 0 and git_trace.count("clean") == 0
    assert (first.path / "apps/podinfo/app.yaml").is_file()
    assert git(first.path, "rev-parse", "HEAD") == first.commit
    assert git(first.path, "status", "--porcelain", "--ignored") == ""
    (first.path / "stray.txt").write_text("not the catalog's\n")
    _push_change(catalog_repo, "a.txt", "one\n")
    source.sync()
    assert git_trace.count("clean") == 1
    assert not (first.path / "stray.txt").exists()
    (first.path / "stray.txt").write_text("not the catalog's\n")
    CatalogSource(bare_remote.as_uri()).sync()  # a restart: the same commit, checked again
    assert not (first.path / "stray.txt").exists()


def test_a_new_source_object_reuses_the_cached_clone(bare_remote: Path) -> None:
    first = CatalogSource(bare_remote.as_uri()).sync()
    second = CatalogSource(bare_remote.as_uri()).sync()
    assert second.path == first.path and second.commit == first.commit
    assert second.changed  # a new process has not seen any commit yet


def test_a_clone_made_again_follows_the_remotes_default_branch_of_then(
    catalog_repo: Path, bare_remote: Path, cache_dir: Path
) -> None:
    """The branch a clone follows is read from its config once per source; a clone
    made again (its directory was removed) follows what the remote's HEAD names then."""
    source = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir)
    assert source.sync().branch == "main"
    assert source.sync().branch == "main"
    git(catalog_repo, "push", "-q", "origin", "main:release")
    sha = _push_change(catalog_repo, "a.txt", "main only\n")
    git(bare_remote, "symbolic-ref", "HEAD", "refs/heads/release")
    assert source.sync().commit == sha  # still main: the clone follows it
    restarted = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir).sync()
    assert restarted.branch == "main"  # the clone's config says so, not its detached HEAD
    shutil.rmtree(source.path)
    again = source.sync()
    assert again.branch == "release" and again.commit != sha
    assert git(again.path, "config", "--local", "--get", "reconciler.branch") == "release"
    assert git(again.path, "config", "--local", "--get", "maintenance.auto") == "false"
    assert not (again.path / "a.txt").exists()


def test_named_branch_and_missing_branch(catalog_repo: Path, bare_remote: Path) -> None:
    git(catalog_repo, "checkout", "-q", "-b", "release")
    sha = commit_file(catalog_repo, "r.txt", "r\n", "release only")
    git(catalog_repo, "push", "-q", "origin", "release")
    result = CatalogSource(bare_remote.as_uri(), branch="release").sync()
    assert result.commit == sha and result.branch == "release"
    with pytest.raises(MissingRemoteBranch, match="no-such-branch"):
        CatalogSource(bare_remote.as_uri(), branch="no-such-branch", policy=FAST).sync()


def test_a_branch_deleted_after_the_clone_is_a_missing_branch(
    catalog_repo: Path, bare_remote: Path
) -> None:
    """The remote no longer lists it: the poll's ls-remote leaves it to the fetch, whose
    error names it, as before there was an ls-remote."""
    git(catalog_repo, "push", "-q", "origin", "main:release")
    source = CatalogSource(bare_remote.as_uri(), branch="release", policy=FAST)
    source.sync()
    git(catalog_repo, "push", "-q", "origin", ":release")
    with pytest.raises(MissingRemoteBranch, match="fetch release from"):
        source.sync()


def test_missing_repository_fails_fast_with_a_clear_error(tmp_path: Path) -> None:
    url = (tmp_path / "nowhere.git").as_uri()
    with pytest.raises(SourceError, match=r"nowhere\.git") as info:
        CatalogSource(url, policy=FAST).sync()
    assert "attempts" not in str(info.value)  # a missing repository is not retried


def test_unreachable_daemon_is_retried_then_reported(caplog: pytest.LogCaptureFixture) -> None:
    url = f"git://127.0.0.1:{free_port()}/catalog.git"
    with caplog.at_level(logging.WARNING, "reconciler.source"), pytest.raises(SourceError) as info:
        CatalogSource(url, policy=FAST).sync()
    assert "gave up after 2 attempts" in str(info.value)
    assert any("retrying" in r.getMessage() for r in caplog.records)


def test_hanging_remote_is_bounded_by_the_timeout() -> None:
    server = SilentServer()
    try:
        policy = NetworkPolicy(timeout=1, attempts=1, backoff=0)
        with pytest.raises(SourceError, match="timed out"):
            CatalogSource(f"git://127.0.0.1:{server.port}/x.git", policy=policy).sync()
    finally:
        server.stop()


def test_git_daemon_clone_and_fetch(
    catalog_repo: Path, bare_remote: Path, git_daemon: GitDaemon
) -> None:
    source = CatalogSource(git_daemon.url("catalog.git"), policy=FAST)
    first = source.sync()
    assert first.commit == git(bare_remote, "rev-parse", "main")
    new = _push_change(catalog_repo, "c.txt", "c\n")
    assert source.sync().commit == new


def test_https_token_from_environment(
    bare_remote: Path, http_server: GitHttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECONCILER_GIT_USERNAME", "reconciler")
    token_file = bare_remote.parent / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.setenv("RECONCILER_GIT_TOKEN_FILE", str(token_file))
    result = CatalogSource(http_server.url("catalog.git"), policy=FAST).sync()
    assert result.commit == git(bare_remote, "rev-parse", "main")
    assert any(r["auth"] for r in http_server.requests)


def test_password_in_url_never_shows(
    bare_remote: Path, http_server: GitHttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = http_server.url("catalog.git", f"reconciler:{TOKEN}")
    caplog.set_level(logging.DEBUG)
    source = CatalogSource(url, policy=FAST)
    result = source.sync()
    assert TOKEN not in result.url and "***" in result.url
    config = (result.path / ".git" / "config").read_text()
    assert TOKEN not in config
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


def test_wrong_token_error_is_redacted(
    bare_remote: Path, http_server: GitHttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-token-123456"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SourceError) as info:
        CatalogSource(http_server.url("catalog.git", f"reconciler:{wrong}"), policy=FAST).sync()
    assert wrong not in str(info.value)
    assert "***" in str(info.value)
    assert all(wrong not in r.getMessage() for r in caplog.records)
    creds = Credentials(https_username="reconciler", https_token=wrong)
    with pytest.raises(SourceError) as info:
        CatalogSource(http_server.url("catalog.git"), credentials=creds, policy=FAST).sync()
    assert wrong not in str(info.value) and wrong not in repr(creds)
