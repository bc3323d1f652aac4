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
