"""The repositories of the cache run no automatic Git maintenance; gc runs when it is due.

Git would start ``git maintenance run --auto`` after every fetch and ``git gc --auto``
after commits and pushes, processes that find nothing to do on nearly every poll of
the daemon. The cache's repositories turn both off in their own config, and
``housekeep`` runs gc itself once Git's thresholds are met.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import git as gitpython
import pytest

from reconciler.model.errors import UsageError
from reconciler.source import runner
from reconciler.source.checkout import CatalogSource
from reconciler.source.ledger import StatusLedger
from reconciler.source.runner import (
    GC_PACKS,
    QUIET_HOUSEKEEPING,
    configure,
    gc_due,
    housekeep,
    init_bare,
    read_ref,
)
from reconciler.source.store import check_branch_name
from reconciler.source.workclone import CatalogWorkClone
from tests.ledger.test_ledger import status
from tests.source.fixtures import commit_file
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import git

__all__ = ["git_trace"]


@pytest.fixture
def eager_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A user config that asks for Git's automatic gc and maintenance at every chance
    (gc.auto=1), in the foreground: only a repository's own config can turn them off."""
    home = tmp_path / "eager-home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n"
        "[maintenance]\n\tauto = true\n"
        "[gc]\n\tauto = 1\n\tautoPackLimit = 1\n\tautoDetach = false\n"
        "[receive]\n\tautogc = false\n"  # the remote's own gc is not the cache's
    )
    monkeypatch.setenv("HOME", str(home))


def local_config(repo: Path, name: str) -> str:
    return git(repo, "config", "--local", "--get", name)


def test_cache_repositories_turn_off_automatic_maintenance(
    bare_remote: Path, empty_remote: Path, cache_dir: Path
) -> None:
    source = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir)
    clone = source.sync().path
    ledger = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir)
    ledger.record([status()])
    (mirror,) = (cache_dir / "status").glob("*.git")
    work = CatalogWorkClone(bare_remote.as_uri(), cache_dir=cache_dir).refresh()
    for repo in (clone, mirror, work):
        assert local_config(repo, "maintenance.auto") == "false", repo
        assert local_config(repo, "gc.auto") == "0", repo
    assert local_config(mirror, "fetch.unpackLimit") == "1"
    assert local_config(work, "user.name") == "reconciler"


@pytest.fixture
def template_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A user config whose ``init.templateDir`` holds a sample hook and a description, as
    Git's default template does."""
    home, template = tmp_path / "template-home", tmp_path / "template"
    (template / "hooks").mkdir(parents=True)
    (template / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (template / "description").write_text("Unnamed repository\n")
    home.mkdir()
    (home / ".gitconfig").write_text(
        f"[init]\n\tdefaultBranch = main\n\ttemplateDir = {template}\n"
        "[maintenance]\n\tauto = false\n[gc]\n\tauto = 0\n"
    )
    monkeypatch.setenv("HOME", str(home))
    return template


def git_dir_files(repo: Path) -> set[str]:
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    return {p.relative_to(git_dir).as_posix() for p in git_dir.rglob("*")}


def test_cache_repositories_are_made_without_a_template(
    template_home: Path, bare_remote: Path, empty_remote: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """No sample hooks or description in the clone, the status mirror and the work clone:
    files nothing reads, each an inode made and later removed. A plain clone under the same
    user config gets them (the test can fail)."""
    clone = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir).sync().path
    StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir).record([status()])
    (mirror,) = (cache_dir / "status").glob("*.git")
    work = CatalogWorkClone(bare_remote.as_uri(), cache_dir=cache_dir).refresh()
    for repo in (clone, mirror, work):
        files = git_dir_files(repo)
        assert not {"hooks", "hooks/pre-commit.sample", "description"} & files, (repo, files)
    plain = tmp_path / "plain"
    git(tmp_path, "clone", "-q", bare_remote.as_uri(), str(plain))
    assert {"hooks/pre-commit.sample", "description"} <= git_dir_files(plain)


def test_a_clone_made_before_gets_the_settings_on_its_next_sync(
    bare_remote: Path, cache_dir: Path
) -> None:
    clone = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir).sync().path
    git(clone, "config", "--unset", "gc.auto")
    git(clone, "config", "--unset", "maintenance.auto")
    CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir).sync()
    assert local_config(clone, "gc.auto") == "0"
    assert local_config(clone, "maintenance.auto") == "false"


def test_polls_and_status_writes_start_no_maintenance_process(
    eager_git: None,
    catalog_repo: Path,
    bare_remote: Path,
    empty_remote: Path,
    cache_dir: Path,
    git_trace: GitTrace,
) -> None:
    for name, value in QUIET_HOUSEKEEPING.items():  # the person's commits are not counted
        git(catalog_repo, "config", name, value)
    source = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir)
    ledger = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir)
    for round in range(3):
        commit_file(catalog_repo, "README.md", f"round {round}\n", f"round {round}")
        git(catalog_repo, "push", "-q", "origin", "main")
        source.sync()
        ledger.record([status(objects=round)])
    assert git_trace.count("fetch") >= 5  # the trace saw the polls and the status writes
    assert git_trace.count("push") >= 3
    assert git_trace.count("maintenance") == 0
    assert git_trace.count("gc") == 0


def test_with_the_settings_git_would_have_run_maintenance(
    eager_git: None, bare_remote: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    """The test above can fail: a plain clone under the same user config does run it."""
    plain = tmp_path / "plain"
    git(tmp_path, "clone", "-q", bare_remote.as_uri(), str(plain))
    git(plain, "fetch", "-q", "origin")
    assert git_trace.count("maintenance") >= 1


def _loose_object_names(count: int) -> list[str]:
    return [f"{n:038x}" for n in range(count)]


def test_gc_is_due_at_gits_own_thresholds(tmp_path: Path) -> None:
    git_dir = tmp_path / "repo.git"
    fanout, packs = git_dir / "objects" / "17", git_dir / "objects" / "pack"
    fanout.mkdir(parents=True)
    packs.mkdir()
    assert not gc_due(git_dir)
    names = _loose_object_names(28)  # gc.auto 6700 -> more than 27 in one of 256 directories
    for name in names[:27]:
        (fanout / name).write_bytes(b"")
    (fanout / "tmp_obj_x").write_bytes(b"")  # not an object: not counted
    assert not gc_due(git_dir)
    (fanout / names[27]).write_bytes(b"")
    assert gc_due(git_dir)
    for name in names:
        (fanout / name).unlink()
    for n in range(GC_PACKS + 1):
        (packs / f"pack-{n:040x}.pack").write_bytes(b"")
    assert gc_due(git_dir)
    (packs / f"pack-{0:040x}.keep").write_bytes(b"")  # a kept pack is never repacked
    assert not gc_due(git_dir)


def _add_packs(repo: Path, count: int) -> None:
    """``count`` packs of one blob each, as that many small fetches leave."""
    first = _pack_count(repo)
    for n in range(first, first + count):
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=repo,
            input=f"blob {n}\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        subprocess.run(
            ["git", "pack-objects", "-q", ".git/objects/pack/pack"],
            cwd=repo,
            input=blob,
            capture_output=True,
            text=True,
            check=True,
        )


def _pack_count(repo: Path) -> int:
    return len(list((repo / ".git" / "objects" / "pack").glob("*.pack")))


@pytest.fixture
def few_packs(monkeypatch: pytest.MonkeyPatch) -> int:
    """Git's limit of 50 packs made 3 (on the command line too): the same test, 4 packs."""
    monkeypatch.setattr(runner, "GC_PACKS", 3)
    return 3


def test_housekeep_runs_no_process_until_gc_is_due_then_repacks(
    eager_git: None, few_packs: int, tmp_path: Path, git_trace: GitTrace
) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    configure(gitpython.Repo(repo), QUIET_HOUSEKEEPING)  # as the cache's repositories are
    _add_packs(repo, few_packs)
    git_trace.clear()
    housekeep(gitpython.Repo(repo))
    assert git_trace.commands() == []  # at the limit: not due, not even a process to check
    _add_packs(repo, 1)
    git_trace.clear()
    housekeep(gitpython.Repo(repo))
    assert git_trace.count("gc", "--auto", "--quiet") == 1
    assert _pack_count(repo) <= 1  # consolidated with these thresholds, not the config's 0


def test_housekeep_keeps_a_persons_own_gc_settings(
    eager_git: None, few_packs: int, tmp_path: Path, git_trace: GitTrace
) -> None:
    """A ``LocalStore`` is someone's repository: their ``gc.auto=0`` is not overridden."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "config", "gc.auto", "0")
    _add_packs(repo, few_packs + 1)
    housekeep(gitpython.Repo(repo), own=False)
    assert git_trace.count("gc", "--auto", "--quiet") == 1
    assert _pack_count(repo) == few_packs + 1


def test_refs_are_read_in_process_loose_packed_and_symbolic(
    catalog_repo: Path, git_trace: GitTrace
) -> None:
    repo = gitpython.Repo(catalog_repo)
    head = git(catalog_repo, "rev-parse", "HEAD")
    git(catalog_repo, "update-ref", "refs/remotes/origin/status/prod", head)
    git(catalog_repo, "branch", "-q", "packed")
    git(catalog_repo, "pack-refs", "--all")
    git(catalog_repo, "update-ref", "refs/remotes/origin/loose", head)  # after the packing
    git_trace.clear()
    assert read_ref(repo, "HEAD") == head  # symbolic: ref: refs/heads/main (packed)
    assert read_ref(repo, "refs/heads/packed") == head
    assert read_ref(repo, "refs/remotes/origin/status/prod") == head
    assert read_ref(repo, "refs/remotes/origin/loose") == head
    assert git_trace.commands() == []
    git(catalog_repo, "checkout", "-q", "--detach", head)
    assert read_ref(repo, "HEAD") == head


def test_the_in_process_reader_reads_what_git_reads_and_leaves_other_names_to_gitpython(
    catalog_repo: Path, tmp_path: Path
) -> None:
    """``read_files_ref`` against ``git rev-parse`` on the same repository: a symbolic
    ref to a symbolic ref, a packed ref, a detached ``HEAD``; a name outside ``refs/``
    or with a ``..`` goes to gitpython, which refuses it; a loop of symbolic refs ends;
    a linked worktree's refs are gitpython's to read."""
    head = git(catalog_repo, "rev-parse", "HEAD")
    git(catalog_repo, "pack-refs", "--all")
    git(catalog_repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(catalog_repo, "symbolic-ref", "refs/heads/alias2", "refs/heads/alias")
    repo = gitpython.Repo(catalog_repo)
    assert runner.read_files_ref(repo, "refs/heads/alias2") == head
    assert git(catalog_repo, "rev-parse", "refs/heads/alias2") == head
    assert runner.read_files_ref(repo, "HEAD") == head  # ref: refs/heads/main, packed
    with pytest.raises(ValueError):
        runner.read_files_ref(repo, "refs/heads/none")
    for outside in ("refs/heads/../../config", "refs/heads/.hidden", "config"):
        with pytest.raises((ValueError, OSError)):
            runner.read_files_ref(repo, outside)
    git(catalog_repo, "symbolic-ref", "refs/heads/loop1", "refs/heads/loop2")
    git(catalog_repo, "symbolic-ref", "refs/heads/loop2", "refs/heads/loop1")
    with pytest.raises(ValueError, match="symbolic references deep"):
        runner.read_files_ref(repo, "refs/heads/loop1")
    git(catalog_repo, "checkout", "-q", "--detach", head)
    assert runner.read_files_ref(repo, "HEAD") == head
    linked = tmp_path / "linked"
    git(catalog_repo, "worktree", "add", "-q", "--detach", str(linked), head)
    assert runner.read_files_ref(gitpython.Repo(linked), "HEAD") == head
    assert runner.read_files_ref(gitpython.Repo(linked), "refs/heads/alias") == head


def test_a_ref_in_neither_the_files_nor_packed_refs_is_none_without_a_process(
    catalog_repo: Path, git_trace: GitTrace
) -> None:
    """The refs are those files: Git would say the same (checked below), and the daemon
    asks for refs not written yet (the status branch before its first record) often."""
    git(catalog_repo, "pack-refs", "--all")
    git(catalog_repo, "update-ref", "refs/remotes/origin/status/loose", "HEAD")
    head = git(catalog_repo, "rev-parse", "HEAD")
    repo = gitpython.Repo(catalog_repo)
    git_trace.clear()
    assert read_ref(repo, "refs/remotes/origin/status/none") is None
    assert read_ref(repo, "refs/heads/main") == head  # packed
    assert read_ref(repo, "refs/remotes/origin/status/loose") == head
    assert git_trace.commands() == []
    missing = subprocess.run(
        ["git", "-C", str(catalog_repo), "rev-parse", "--verify", "--quiet", "refs/x/none"],
        capture_output=True,
    )
    assert missing.returncode != 0


def test_a_missing_ref_of_a_reftable_repository_is_gits_own_answer(
    catalog_repo: Path, git_trace: GitTrace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its refs are not files gitpython reads (a ``reftable/`` directory says so), so a
    ref not found there is asked of ``git rev-parse``, which finds it."""
    head = git(catalog_repo, "rev-parse", "HEAD")
    (catalog_repo / ".git" / "reftable").mkdir()

    def unreadable(repo: object, ref: object) -> str:
        raise ValueError("Reference at 'refs/heads/main' does not exist")

    monkeypatch.setattr(runner, "read_files_ref", unreadable)
    git_trace.clear()
    assert read_ref(gitpython.Repo(catalog_repo), "refs/heads/main") == head
    assert git_trace.count("rev-parse") == 1


def test_a_ref_store_gitpython_cannot_read_is_asked_of_git(
    catalog_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a reftable repository would be (the in-process reader finds nothing): the
    answer still comes, from ``git rev-parse``."""
    head = git(catalog_repo, "rev-parse", "HEAD")

    def unreadable(repo: object, ref: object) -> str:
        raise ValueError("no such file")

    monkeypatch.setattr(runner, "read_files_ref", unreadable)
    assert read_ref(gitpython.Repo(catalog_repo), "HEAD") == head


def test_git_checks_a_branch_name_once_and_a_refused_one_each_time(git_trace: GitTrace) -> None:
    """A name Git accepted is not sent to ``git check-ref-format`` again in the process;
    a refused one is asked again, and refused again, each time."""
    name = f"status/checked-{uuid.uuid4().hex}"  # checked by no other test of this worker
    assert check_branch_name(name) == name
    assert check_branch_name(name) == name
    assert git_trace.count("check-ref-format") == 1
    for _ in range(2):
        with pytest.raises(UsageError, match="not a valid branch name"):
            check_branch_name(f"{name}/..bad")
    assert git_trace.count("check-ref-format") == 3


def test_a_status_write_is_one_push_that_moves_the_mirrors_ref_too(
    empty_remote: Path, cache_dir: Path, git_trace: GitTrace
) -> None:
    """The push updates the remote-tracking ref of the branch it wrote (no ``git
    update-ref`` after it), and a branch missing on the remote costs no ref deletion
    when the mirror had none either."""
    ledger = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir)
    git_trace.clear()
    written = []
    for objects in (1, 2):
        (info,) = ledger.record([status(objects=objects)])
        assert ledger.head() == info.commit  # the mirror's ref, read in process
        written.append(info.commit)
    assert git_trace.count("push") == 2
    assert git_trace.count("update-ref") == 0
    assert git_trace.count("rev-parse") == 0
    assert git(empty_remote, "rev-parse", "refs/heads/status/prod") == written[-1]
    # the branch deleted on the remote: the mirror forgets it, once
    git(empty_remote, "update-ref", "-d", "refs/heads/status/prod")
    git_trace.clear()
    assert ledger.snapshot().commit is None
    assert git_trace.count("update-ref", "-d") == 1  # the mirror's copy is forgotten
    assert ledger.snapshot().commit is None
    assert git_trace.count("update-ref", "-d") == 1  # nothing left to forget


def test_the_cache_reads_a_clones_branch_from_its_head_file(
    bare_remote: Path, cache_dir: Path, git_trace: GitTrace
) -> None:
    """``git symbolic-ref --short HEAD`` of the catalog clone and the work clone, in process;
    a detached ``HEAD`` is still Git's answer (an error)."""
    source = CatalogSource(bare_remote.as_uri(), cache_dir=cache_dir)
    assert source.sync().branch == "main"
    work = CatalogWorkClone(bare_remote.as_uri(), cache_dir=cache_dir)
    work_path = work.refresh()
    work.refresh()
    assert git_trace.count("symbolic-ref") == 0
    assert git(work_path, "symbolic-ref", "--short", "HEAD") == "main"
    git(work_path, "checkout", "-q", "--detach")
    git_trace.clear()
    with pytest.raises(runner.GitFailed):
        runner.current_branch(gitpython.Repo(work_path))
    assert git_trace.count("symbolic-ref") == 1


def test_the_status_mirror_is_written_as_git_init_writes_it(
    empty_remote: Path, cache_dir: Path, tmp_path: Path, git_trace: GitTrace
) -> None:
    """No ``git init`` process: the same files and directories, the same settings, a
    repository Git reads (fsck, a fetch and a push through it by the ledger)."""
    ledger = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir)
    (mirror,) = (cache_dir / "status").glob("*.git")
    assert git_trace.count("init") == 0
    made = tmp_path / "made-by-git.git"
    subprocess.run(["git", "init", "-q", "--bare", "--template=", str(made)], check=True)
    assert git_dir_files(made) == git_dir_files(mirror)
    for name in ("core.repositoryformatversion", "core.filemode", "core.bare"):
        assert local_config(mirror, name) == local_config(made, name), name
    assert git(mirror, "rev-parse", "--is-bare-repository") == "true"
    git(mirror, "fsck", "--strict")
    (info,) = ledger.record([status()])
    assert ledger.snapshot().commit == info.commit


def test_a_mirror_directory_without_head_is_written_again(
    empty_remote: Path, cache_dir: Path
) -> None:
    """What a crash during the write leaves (``HEAD`` comes last) is not taken for a
    repository: the next ledger writes it whole."""
    StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir)
    (mirror,) = (cache_dir / "status").glob("*.git")
    (mirror / "HEAD").unlink()
    (mirror / "config").write_text("")
    ledger = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=cache_dir)
    assert local_config(mirror, "core.bare") == "true"
    (info,) = ledger.record([status()])
    assert git(empty_remote, "rev-parse", "refs/heads/status/prod") == info.commit


def test_a_new_bare_repository_has_its_settings_as_git_reads_them(tmp_path: Path) -> None:
    """Plain values are written with the file; a value that needs quoting (a space, a
    comment character, a quote) goes through the config writer: Git reads each back."""
    settings = {
        "remote.origin.url": "file:///tmp/plain/catalog.git",
        "remote.spaced.url": 'file:///tmp/a b/#not a comment/"q".git',
        "fetch.unpackLimit": "1",
        "gc.auto": "0",
    }
    repo = init_bare(tmp_path / "mirror.git", settings)
    for name, value in settings.items():
        assert git(tmp_path / "mirror.git", "config", "--local", "--get", name) == value
    assert git(tmp_path / "mirror.git", "config", "--local", "--get", "core.bare") == "true"
    assert repo.config_reader("repository").get_value("fetch", "unpackLimit") == 1
    assert git(tmp_path / "mirror.git", "rev-parse", "--is-bare-repository") == "true"
