"""``snapshots.export_paths``: the paths of a commit that exist, written to a directory,
oversized files as stand-ins, from one listing and one archive."""

from __future__ import annotations

from pathlib import Path

from reconciler.source.snapshots import export_paths, resolve_commit, resolve_commits
from tests.source.gittrace import GitTrace, git_trace
from tests.source.servers import git

__all__ = ["git_trace"]


def test_existing_paths_are_written_oversized_files_stand_in_two_processes(
    tmp_path: Path, git_trace: GitTrace
) -> None:
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", str(work))
    (work / "clusters" / "prod" / "instances").mkdir(parents=True)
    (work / "clusters" / "prod" / "cluster.yaml").write_text("kind: Cluster\n")
    (work / "clusters" / "prod" / "instances" / "big.yaml").write_text("x" * 2000)
    (work / "clusters-old").mkdir()
    (work / "clusters-old" / "stale.yaml").write_text("old\n")
    (work / "waves.yaml").write_text("waves: []\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "catalog")
    commit = git(work, "rev-parse", "HEAD")
    git_trace.clear()
    dest = tmp_path / "out"
    present = export_paths(
        work,
        commit,
        ["clusters/", "waves.yaml", "apps", "clusters/none"],
        dest,
        max_file_bytes=1000,
    )
    assert present == ["clusters", "waves.yaml"]
    assert (dest / "clusters/prod/cluster.yaml").read_text() == "kind: Cluster\n"
    assert (dest / "waves.yaml").read_text() == "waves: []\n"
    big = dest / "clusters/prod/instances/big.yaml"
    assert big.stat().st_size == 2000 and big.read_bytes() == bytes(2000)  # a stand-in
    assert not (dest / "clusters-old").exists() and not (dest / "apps").exists()
    assert git_trace.count("ls-tree") == 1 and git_trace.count("archive") == 1
    assert export_paths(work, commit, ["apps", "none.yaml"], tmp_path / "empty") == []
    assert list((tmp_path / "empty").iterdir()) == []


def test_two_revisions_are_resolved_by_one_process_or_left_to_each(
    tmp_path: Path, git_trace: GitTrace
) -> None:
    """``resolve_commits``: one commit id per revision from one ``git rev-parse``; an
    unknown revision, a range or an option gives None (``resolve_commit`` of each says
    which is wrong)."""
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", str(work))
    for n in (1, 2):
        git(work, "commit", "-q", "--allow-empty", "-m", f"commit {n}")
    git(work, "tag", "-a", "-m", "a tag", "v1", "HEAD~1")
    first, second = git(work, "rev-parse", "HEAD~1"), git(work, "rev-parse", "HEAD")
    git_trace.clear()
    assert resolve_commits(work, ["v1", "HEAD"]) == [first, second]  # a tag peeled
    assert git_trace.count("rev-parse") == 1
    for revs in (["HEAD", "nope"], ["HEAD~1..HEAD", "HEAD"], ["--all", "HEAD"], ["", "HEAD"]):
        assert resolve_commits(work, revs) is None, revs
    assert resolve_commit(work, "v1") == first
