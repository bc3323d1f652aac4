"""The incremental status writer: only what changed is built, every commit holds every record.

``objects.write_chain`` writes its own pack and index instead of running
``git fast-import``; ``git fsck --strict`` (which inflates every object, resolves
every delta, re-hashes and checks tree order) is the judge of the bytes it writes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import git as gitpython
import pytest

from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.model.status import Phase
from reconciler.source import objects
from reconciler.source.ledger import StatusLedger
from tests.ledger.test_ledger import FAST, NOW, status
from tests.source.servers import git


def fsck(repo: Path) -> None:
    git(repo, "fsck", "--strict", "--no-dangling")  # raises on any bad object


def blob_ids(repo: Path, ref: str = "status/prod") -> dict[str, str]:
    """instances/<name>.yaml -> blob id at ``ref``."""
    out: dict[str, str] = {}
    for line in git(repo, "ls-tree", f"{ref}:instances").splitlines():
        meta, name = line.split("\t")
        out[name] = meta.split()[2]
    return out


def test_unchanged_records_keep_their_blob_ids(empty_remote: Path) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    names = ["api", "cache", "db", "web"]
    ledger.record([status(n) for n in names], now=NOW)
    before = blob_ids(empty_remote)
    ledger.record([status(n) for n in names[:3]] + [status("web", phase=Phase.PROGRESSING)])
    after = blob_ids(empty_remote)
    assert sorted(after) == [f"{n}.yaml" for n in names]
    assert {n: after[n] for n in before if n != "web.yaml"} == {
        n: sha for n, sha in before.items() if n != "web.yaml"
    }
    assert after["web.yaml"] != before["web.yaml"]
    fsck(empty_remote)


@pytest.mark.parametrize("where", ["path", "url"])
def test_three_changed_records_make_three_commits_each_with_the_full_tree(
    empty_remote: Path, where: str
) -> None:
    url = str(empty_remote) if where == "path" else empty_remote.as_uri()
    ledger = StatusLedger(url, "prod", policy=FAST)
    names = [f"app-{i}" for i in range(8)]
    ledger.record([status(n) for n in names], now=NOW)
    base = git(empty_remote, "rev-parse", "status/prod")
    before = blob_ids(empty_remote)
    changed = {"app-1", "app-4", "app-6"}
    commits = ledger.record(
        [
            status(n, phase=Phase.STALLED, reason="HealthCheckFailed")
            if n in changed
            else status(n)
            for n in names
        ]
    )
    assert [c.instance for c in commits] == ["app-1", "app-4", "app-6"]
    chain = git(empty_remote, "rev-list", f"{base}..status/prod").split()[::-1]
    assert chain == [c.commit for c in commits]
    for info in commits:
        files = git(empty_remote, "ls-tree", "-r", "--name-only", info.commit).split()
        assert files == [f"instances/{n}.yaml" for n in names]  # every record, every commit
        touched = git(empty_remote, "diff-tree", "-r", "--name-only", "--no-commit-id", info.commit)
        assert touched.split() == [f"instances/{info.instance}.yaml"]
        trailers = git(empty_remote, "log", "-1", "--format=%(trailers:only)", info.commit)
        assert f"Reconciler-Instance: {info.instance}" in trailers
        assert "Reconciler-Phase: Stalled" in trailers
    after = blob_ids(empty_remote)
    assert {n for n in after if after[n] != before[n]} == {f"{n}.yaml" for n in changed}
    fsck(empty_remote)


@pytest.mark.parametrize("where", ["path", "url"])
def test_rejected_publish_is_rebuilt_on_the_new_head_with_nothing_lost(
    empty_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    url = str(empty_remote) if where == "path" else empty_remote.as_uri()
    ours = StatusLedger(url, "prod", cache_dir=tmp_path / "a", policy=FAST)
    other = StatusLedger(url, "prod", cache_dir=tmp_path / "b", policy=FAST)
    ours.record([status(n) for n in ("api", "db", "web")], now=NOW)
    real = ours._store.publish
    outcomes: list[bool] = []

    def racing(new: str, expected: str | None) -> bool:
        if not outcomes:  # another replica publishes between our build and our push
            other.record([status("db", phase=Phase.STALLED, reason="Oops"), status("cache")])
        outcomes.append(real(new, expected))
        return outcomes[-1]

    monkeypatch.setattr(ours._store, "publish", racing)
    commits = ours.record(
        [status("api", version="6.6.0", desired_version="6.6.0"), status("web", phase=Phase.FAILED)]
    )
    assert outcomes == [False, True]
    assert [c.instance for c in commits] == ["api", "web"]
    subjects = git(empty_remote, "log", "--format=%s", "status/prod").splitlines()
    assert subjects[:4] == [
        "prod/web: podinfo 6.5.0 (Failed)",
        "prod/api: upgraded podinfo 6.5.0 -> 6.6.0 (Ready)",
        "prod/db: podinfo 6.5.0 (Stalled: Oops)",
        "prod/cache: podinfo 6.5.0 (Ready)",
    ]
    assert len(subjects) == 7  # 3 + 2 + 2: nothing written twice
    read = StatusLedger(url, "prod", cache_dir=tmp_path / "c").read()
    assert {n: (s.phase, s.version) for n, s in read.items()} == {
        "api": (Phase.READY, "6.6.0"),
        "cache": (Phase.READY, "6.5.0"),
        "db": (Phase.STALLED, "6.5.0"),
        "web": (Phase.FAILED, "6.5.0"),
    }
    fsck(empty_remote)


def test_git_order_other_files_and_long_passes(catalog_repo: Path) -> None:
    """Names whose Git order differs from their order as strings, hand-made files kept,
    a directory where a record goes replaced, a pass longer than the longest delta chain."""
    ledger = StatusLedger(str(catalog_repo), "prod")
    ledger.record([status("a")], now=NOW)
    git(catalog_repo, "checkout", "-q", "status/prod")
    (catalog_repo / "instances" / "a-b").mkdir()
    (catalog_repo / "instances" / "a-b" / "notes.txt").write_text("hand-made\n")
    (catalog_repo / "README.md").write_text("status of prod\n")
    (catalog_repo / "instances" / "b.yaml").mkdir()  # a directory where a record goes
    (catalog_repo / "instances" / "b.yaml" / "x.txt").write_text("hand-made\n")
    git(catalog_repo, "add", "-A")
    git(catalog_repo, "commit", "-qm", "hand edit")
    git(catalog_repo, "checkout", "-q", "main")
    names = ["a", "a-b", "a0", "a-c", "b", *(f"n{i:03d}" for i in range(70))]
    commits = ledger.record([status(n, phase=Phase.PROGRESSING) for n in names], now=NOW)
    assert len(commits) == len(names)
    files = git(catalog_repo, "ls-tree", "-r", "--name-only", "status/prod").split()
    assert "README.md" in files and "instances/a-b/notes.txt" in files
    assert {f"instances/{n}.yaml" for n in names} <= set(files)
    assert "instances/b.yaml/x.txt" not in files  # replaced by the record, as Git would
    fsck(catalog_repo)
    assert sorted(StatusLedger(str(catalog_repo), "prod").read()) == sorted(names)


def test_written_records_are_remembered_as_a_fresh_reader_parses_them(empty_remote: Path) -> None:
    """The next pass compares with the records just written without parsing them back."""
    rich = status(
        "web",
        phase=Phase.PROGRESSING,
        message="waiting for «web» pods: 3/5",
        rollout=RolloutRecord(
            from_version="6.5.0",
            to_version="6.6.0",
            state=RollingState.ROLLING,
            batches=3,
            batch=2,
            batch_state=BatchState.VERIFYING,
            replicas=Replicas(desired=5, updated=3, ready=5),
            partition=2,
            started_at=NOW,
            updated_at=NOW,
            batch_started_at=NOW,
        ),
        migrations=({"name": "add-index", "outcome": "Succeeded"},),
    )
    writer = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    writer.record([rich, status("api")], now=NOW)
    remembered = writer.read()
    fresh = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST).read()
    assert remembered == fresh
    assert writer.record([rich, status("api")]) == []


def test_history_of_one_instance_follows_its_trailer(catalog_repo: Path) -> None:
    ledger = StatusLedger(str(catalog_repo), "prod")
    ledger.record([status("web"), status("web-2")], now=NOW)
    ledger.record([status("web", phase=Phase.PROGRESSING), status("web-2", phase=Phase.FAILED)])
    git(catalog_repo, "checkout", "-q", "status/prod")
    (catalog_repo / "instances" / "web.yaml").write_text("phase: [broken\n")
    git(catalog_repo, "commit", "-qam", "hand edit\n\nReconciler-Instance: web is broken")
    git(catalog_repo, "checkout", "-q", "main")
    assert [e.phase for e in ledger.history("web")] == ["Progressing", "Ready"]
    assert [e.phase for e in ledger.history("web-2")] == ["Failed", "Ready"]
    assert [e.phase for e in ledger.history("web", limit=1)] == ["Progressing"]
    assert ledger.history("db") == []
    git(catalog_repo, "config", "grep.patternType", "fixed")  # a user's setting changes nothing
    assert [e.phase for e in ledger.history("web")] == ["Progressing", "Ready"]


def test_tree_edits_match_a_listing_built_from_scratch() -> None:
    """``_Tree`` keeps Git's order and its lazily recomputed offsets through any edits."""
    rng = random.Random(12)
    # "a" as a directory, "a-x" and "a.y" as files: Git orders them "a-x", "a.y", "a", "a0"
    names = [p + q for p in ("a", "ab", "b") for q in ("", "-x", ".y", "0")]
    reference: dict[bytes, tuple[bytes, bytes]] = {}
    tree = objects._Tree(b"")
    for step in range(400):
        name = rng.choice(names).encode()
        mode = b"40000" if rng.random() < 0.3 else b"100644"  # a file may become a directory
        sha = bytes([step % 256]) * 20
        splice = tree.set(name, mode, sha)
        unchanged = reference.get(name) == (mode, sha)
        reference[name] = (mode, sha)
        assert (splice is None) == unchanged
        keys = sorted(reference, key=lambda n: n + b"/" if reference[n][0] == b"40000" else n)
        listing = b"".join(reference[n][0] + b" " + n + b"\0" + reference[n][1] for n in keys)
        assert bytes(tree.data) == listing
        assert objects._Tree(listing).entries == tree.entries
        assert tree.get(name) == (sha, mode)


def test_chain_written_into_a_repository_reads_back(tmp_path: Path) -> None:
    repo_path = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(repo_path))
    repo = gitpython.Repo(repo_path)
    big = b"x" * (objects._STORE_ABOVE + 10)  # stored as is, not compressed
    changes = [
        objects.Change(f"instances/{name}.yaml", data, f"{name}\n")
        for name, data in [("b", b"one\n"), ("a", big), ("b", b"two\n"), ("c", b"one\n")]
    ]
    shas = objects.write_chain(repo, None, changes)
    git(repo_path, "update-ref", "refs/heads/x", shas[-1])
    fsck(repo_path)
    assert git(repo_path, "rev-list", "--count", "x") == "4"
    assert git(repo_path, "show", "x:instances/b.yaml") == "two"
    assert git(repo_path, "show", f"{shas[0]}:instances/b.yaml") == "one"
    assert git(repo_path, "cat-file", "-s", "x:instances/a.yaml") == str(len(big))
    assert objects.blob_id(b"one\n").hex() == git(repo_path, "rev-parse", "x:instances/c.yaml")
    more = objects.write_chain(repo, shas[-1], [replace(changes[0], data=b"three\n")])
    assert git(repo_path, "rev-parse", f"{more[0]}^") == shas[-1]
    assert git(repo_path, "ls-tree", "--name-only", f"{more[0]}:instances").split() == [
        "a.yaml",
        "b.yaml",
        "c.yaml",
    ]


def test_a_failed_write_leaves_no_pack_behind(tmp_path: Path) -> None:
    repo_path = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(repo_path))
    changes = [
        objects.Change("instances/a.yaml", b"one\n", "a\n"),
        objects.Change("no-directory.yaml", b"two\n", "b\n"),
    ]
    with pytest.raises(ValueError, match="expected <directory>/<file>"):
        objects.write_chain(gitpython.Repo(repo_path), None, changes)
    assert list((repo_path / "objects" / "pack").iterdir()) == []


def test_a_chain_is_written_as_its_changes_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger hands its records over as a generator, so a pass never holds every
    record of a first install at once: each change is written before the next is made."""
    repo_path = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(repo_path))
    added: list[int] = []  # the kind of each object put in the pack, in order
    original = objects._PackWriter.add_whole

    def add_whole(self: objects._PackWriter, kind: int, data: bytes) -> bytes:
        added.append(kind)
        return original(self, kind, data)

    monkeypatch.setattr(objects._PackWriter, "add_whole", add_whole)
    commits_before: list[int] = []

    def changes() -> Iterator[objects.Change]:
        for i in range(3):
            commits_before.append(added.count(objects.OBJ_COMMIT))
            yield objects.Change(f"instances/i{i}.yaml", f"record {i}\n".encode(), f"i{i}\n")

    shas = objects.write_chain(gitpython.Repo(repo_path), None, changes())
    assert len(shas) == 3 and commits_before == [0, 1, 2]
    git(repo_path, "update-ref", "refs/heads/x", shas[-1])
    fsck(repo_path)
    assert git(repo_path, "show", "x:instances/i2.yaml") == "record 2"
    # nothing to write: no pack is started
    assert objects.write_chain(gitpython.Repo(repo_path), None, iter(())) == []
    assert not any(
        p.name.startswith("tmp_pack") for p in (repo_path / "objects" / "pack").iterdir()
    )
