"""``objects.read_tree``: plain entries read by one pattern, anything else by GitPython's
checked reader, with the same answer either way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest
from git.objects.fun import tree_entries_from_data

from reconciler.source import objects
from tests.source.servers import git as run_git


@pytest.fixture
def repo(tmp_path: Path) -> git.Repo:
    path = tmp_path / "objects.git"
    run_git(tmp_path, "init", "-q", "--bare", str(path))
    return git.Repo(str(path))


def tree(repo: git.Repo, names: dict[str, str]) -> bytes:
    """A tree of ``names`` (name -> mode), each a blob or an empty tree."""
    cwd = Path(repo.git_dir)
    blob = run_git(cwd, "hash-object", "-w", "/dev/null")
    empty = run_git(cwd, "hash-object", "-w", "-t", "tree", "/dev/null")
    lines = [
        f"{mode} {'tree' if mode == '040000' else 'blob'} {empty if mode == '040000' else blob}"
        f"\t{name}\n"
        for name, mode in names.items()
    ]
    made = subprocess.run(
        ["git", "mktree"], cwd=cwd, input="".join(lines), capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    return bytes.fromhex(made.stdout.strip())


def checked(repo: git.Repo, binsha: bytes) -> objects.Entries:
    data = repo.odb.stream(binsha).read()
    return {name: (bytes(sha), int(mode)) for sha, mode, name in tree_entries_from_data(data)}


@pytest.mark.parametrize(
    "names",
    [
        {"web.yaml": "100644", "api-2.yaml": "100644", "instances": "040000", "run": "100755"},
        {"web.yaml": "100644", "a name.yaml": "100644"},  # a space: the checked reader
        {"web.yaml": "100644", "link": "120000"},  # a symlink: the checked reader
        {"gitmodules": "100644", "x.": "100644"},  # names GitPython looks at closely
    ],
)
def test_read_tree_answers_as_gitpythons_checked_reader(
    repo: git.Repo, names: dict[str, str]
) -> None:
    binsha = tree(repo, names)
    assert objects.read_tree(repo, binsha) == checked(repo, binsha)
    assert sorted(objects.read_tree(repo, binsha)) == sorted(names)


def test_a_name_git_metadata_could_hide_behind_is_still_refused(repo: git.Repo) -> None:
    binsha = tree(repo, {"web.yaml": "100644", "GIT~1": "100644"})
    with pytest.raises(ValueError, match="aliases Git metadata"):
        objects.read_tree(repo, binsha)


def test_a_file_at_a_commit_is_what_git_show_prints(tmp_path: Path) -> None:
    """``file_at`` against ``git show commit:path`` itself: nested, executable and
    symbolic-link files give their bytes; a missing path, a directory, an unknown commit
    and a submodule (where ``git show`` prints no file) give None."""
    work = tmp_path / "work"
    run_git(tmp_path, "init", "-q", str(work))
    (work / "apps" / "podinfo").mkdir(parents=True)
    (work / "apps" / "podinfo" / "channels.yaml").write_text("channels:\n  stable: 6.5.0\n")
    (work / "run.sh").write_text("#!/bin/sh\n")
    (work / "run.sh").chmod(0o755)
    (work / "link").symlink_to("apps/podinfo/channels.yaml")
    run_git(work, "add", "-A")
    sub = run_git(work, "hash-object", "-w", "/dev/null")  # any id: a gitlink is not read
    run_git(work, "update-index", "--add", "--cacheinfo", f"160000,{sub},vendored")
    run_git(work, "commit", "-q", "-m", "files")
    commit = run_git(work, "rev-parse", "HEAD")
    repo = git.Repo(str(work))
    for path in ("apps/podinfo/channels.yaml", "run.sh", "link"):
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=work, capture_output=True)
        assert shown.returncode == 0
        assert objects.file_at(repo, commit, path) == shown.stdout, path
    for path in ("apps/podinfo/missing.yaml", "apps/podinfo", "apps/missing/x.yaml", "vendored"):
        assert objects.file_at(repo, commit, path) is None, path
    assert objects.file_at(repo, "0" * 40, "run.sh") is None
    assert objects.file_at(repo, "not-a-commit", "run.sh") is None
