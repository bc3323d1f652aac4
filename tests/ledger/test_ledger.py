"""The status ledger on real repositories: local paths, bare file:// remotes, git daemon, HTTP."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reconciler.model.errors import SourceError, UsageError
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source import ledger as ledger_module
from reconciler.source import objects
from reconciler.source.ledger import StatusLedger
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess
from tests.source.fixtures import TOKEN
from tests.source.servers import GitDaemon, GitHttpServer, free_port, git

FAST = NetworkPolicy(timeout=10, attempts=2, backoff=0)
NOW = "2026-01-01T00:00:00Z"


def status(instance: str = "web", **changes: object) -> InstanceStatus:
    base = InstanceStatus(
        cluster="prod",
        instance=instance,
        app="podinfo",
        phase=Phase.READY,
        version="6.5.0",
        desired_version="6.5.0",
        source="channel:stable",
        source_commit="a" * 40,
        objects=7,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def log_subjects(repo: Path, ref: str = "status/prod") -> list[str]:
    return git(repo, "log", "--format=%s", ref).splitlines()


def test_local_repo_gets_an_orphan_branch_without_touching_the_checkout(
    catalog_repo: Path,
) -> None:
    head = git(catalog_repo, "rev-parse", "HEAD")
    ledger = StatusLedger(str(catalog_repo), "prod")
    commits = ledger.record([status(), status("api", phase=Phase.PROGRESSING)], now=NOW)
    assert [c.instance for c in commits] == ["api", "web"]
    assert git(catalog_repo, "rev-parse", "HEAD") == head
    assert git(catalog_repo, "status", "--porcelain") == ""
    assert git(catalog_repo, "rev-list", "--max-parents=0", "status/prod") != head
    assert git(catalog_repo, "ls-tree", "-r", "--name-only", "status/prod").split() == [
        "instances/api.yaml",
        "instances/web.yaml",
    ]
    assert log_subjects(catalog_repo) == [
        "prod/web: podinfo 6.5.0 (Ready)",
        "prod/api: podinfo 6.5.0 (Progressing)",
    ]


def test_one_commit_per_change_and_none_when_nothing_changed(empty_remote: Path) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    assert len(ledger.record([status(), status("api")], now=NOW)) == 2
    assert ledger.record([status(), status("api")], now="2026-02-01T00:00:00Z") == []
    upgraded = status(version="6.6.0", desired_version="6.6.0")
    commits = ledger.record([upgraded, status("api")], source_commit="b" * 40)
    assert [c.subject for c in commits] == ["prod/web: upgraded podinfo 6.5.0 -> 6.6.0 (Ready)"]
    assert len(log_subjects(empty_remote)) == 3
    trailers = git(empty_remote, "log", "-1", "--format=%(trailers:only)", "status/prod")
    assert "Reconciler-Instance: web" in trailers
    assert "Reconciler-Version: 6.6.0" in trailers
    assert f"Reconciler-Source-Commit: {'a' * 40}" in trailers  # the record's own wins


def test_several_records_of_one_instance_become_commits_in_their_order(
    empty_remote: Path,
) -> None:
    """A migration run, then the upgrade it preceded: one commit each (SPEC section 5)."""
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    ledger.record([status()], now=NOW)
    run = {"name": "add-index", "version": "6.6.0", "phase": "pre", "outcome": "succeeded"}
    migrated = status(desired_version="6.6.0", phase=Phase.PROGRESSING, migrations=(run,))
    upgraded = replace(migrated, version="6.6.0", phase=Phase.READY)
    commits = ledger.record([migrated, upgraded, upgraded, status("api")], now=NOW)
    assert [(c.instance, c.subject) for c in commits] == [
        ("api", "prod/api: podinfo 6.5.0 (Ready)"),
        ("web", "prod/web: migration add-index (pre, 6.6.0) succeeded in 0ms"),
        ("web", "prod/web: upgraded podinfo 6.5.0 -> 6.6.0 (Ready)"),
    ]
    assert ledger.read()["web"].version == "6.6.0"


def test_read_snapshot_and_history(empty_remote: Path) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    assert not ledger.snapshot().exists and ledger.history() == []
    ledger.record([status(phase=Phase.PROGRESSING, version=None, desired_version="6.5.0")])
    ledger.record([status(), status("api")])
    read = ledger.read()
    assert sorted(read) == ["api", "web"] and read["web"].phase is Phase.READY
    entries = ledger.history()
    assert [(e.instance, e.phase) for e in entries] == [
        ("web", "Ready"),
        ("api", "Ready"),
        ("web", "Progressing"),
    ]
    web = ledger.history("web")
    assert [e.summary for e in web] == [
        "podinfo 6.5.0 (Ready)",
        "installing podinfo 6.5.0 (Progressing)",
    ]
    assert web[0].commit == git(empty_remote, "rev-parse", "status/prod")
    assert web[0].source_commit == "a" * 40 and web[0].version == "6.5.0"
    assert len(ledger.history(limit=1)) == 1


def test_corrupted_record_is_reported_then_rewritten(catalog_repo: Path) -> None:
    ledger = StatusLedger(str(catalog_repo), "prod")
    ledger.record([status(), status("api")], now=NOW)
    git(catalog_repo, "checkout", "-q", "status/prod")
    (catalog_repo / "instances/web.yaml").write_text("phase: [broken\n")
    git(catalog_repo, "commit", "-qam", "hand edit")
    git(catalog_repo, "checkout", "-q", "main")
    snap = ledger.snapshot()
    assert sorted(snap.statuses) == ["api"]
    assert [p.file for p in snap.problems] == ["instances/web.yaml"]
    assert "invalid YAML" in snap.problems[0].message
    assert [e.instance for e in ledger.history()] == ["web", "api"]  # hand-made commit skipped
    commits = ledger.record([status(), status("api")])
    assert [c.instance for c in commits] == ["web"]
    assert ledger.snapshot().problems == ()
    body = git(catalog_repo, "log", "-1", "--format=%b", "status/prod")
    assert "previous record was unreadable" in body


def test_bad_input_is_refused(catalog_repo: Path) -> None:
    ledger = StatusLedger(str(catalog_repo), "prod")
    with pytest.raises(SourceError, match="not a valid instance name"):
        ledger.record([status("../etc")])
    with pytest.raises(SourceError, match="ledger of cluster prod"):
        ledger.record([replace(status(), cluster="staging")])
    with pytest.raises(SourceError, match="not a valid instance name"):
        ledger.history("Web/..")
    with pytest.raises(UsageError, match="not a valid branch name"):
        StatusLedger(str(catalog_repo), "prod", branch="status/..bad")
    plain = catalog_repo.parent / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match=r"--repo .*: not a Git repository"):  # exit code 2
        StatusLedger(str(plain), "prod")
    assert ledger.record([]) == []


def test_custom_branch(empty_remote: Path) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod", branch="reconciler/prod-status")
    ledger.record([status()])
    assert log_subjects(empty_remote, "reconciler/prod-status") == [
        "prod/web: podinfo 6.5.0 (Ready)"
    ]


def test_second_writer_neither_loses_nor_duplicates(empty_remote: Path, tmp_path: Path) -> None:
    """Two replicas with separate caches: one stale, both recording."""
    first = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=tmp_path / "a")
    second = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=tmp_path / "b")
    second.snapshot()  # second's mirror now knows the (empty) branch
    first.record([status()])
    assert second.record([status()]) == []  # already recorded by first: no duplicate
    assert [c.instance for c in second.record([status("api")])] == ["api"]
    assert sorted(first.read()) == ["api", "web"]
    assert len(log_subjects(empty_remote)) == 2


def test_a_write_on_the_head_fetched_before_loses_nothing_when_it_moved(
    empty_remote: Path, tmp_path: Path
) -> None:
    """``record(refresh=False)`` builds on the head the last fetch saw (the daemon's pass
    that read the branch); another writer's commit since then is fetched and kept."""
    first = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=tmp_path / "a")
    second = StatusLedger(empty_remote.as_uri(), "prod", cache_dir=tmp_path / "b")
    first.record([status()])
    second.snapshot()
    first.record([status("api")])  # second's fetch is now one commit behind
    assert [c.instance for c in second.record([status(), status("db")], refresh=False)] == ["db"]
    assert log_subjects(empty_remote) == [
        "prod/db: podinfo 6.5.0 (Ready)",
        "prod/api: podinfo 6.5.0 (Ready)",
        "prod/web: podinfo 6.5.0 (Ready)",
    ]
    assert sorted(second.read()) == ["api", "db", "web"]


def test_rejected_push_is_retried_on_the_new_head(empty_remote: Path) -> None:
    hook = empty_remote / "hooks" / "pre-receive"
    marker = empty_remote / "reject-once"
    marker.write_text("")
    hook.write_text(
        f"#!/bin/sh\nif [ -f '{marker}' ]; then rm '{marker}'; echo 'busy' >&2; exit 1; fi\n"
    )
    hook.chmod(0o755)
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    commits = ledger.record([status()])
    assert len(commits) == 1 and not marker.exists()
    assert log_subjects(empty_remote) == ["prod/web: podinfo 6.5.0 (Ready)"]


def test_permanently_rejected_push_gives_up(empty_remote: Path) -> None:
    hook = empty_remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n")
    hook.chmod(0o755)
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST, conflict_attempts=3)
    with pytest.raises(SourceError, match="gave up writing status/prod after 3 rejected pushes"):
        ledger.record([status()])


def test_unreachable_remote(tmp_path: Path) -> None:
    ledger = StatusLedger(f"git://127.0.0.1:{free_port()}/status.git", "prod", policy=FAST)
    with pytest.raises(SourceError, match="gave up after 2 attempts"):
        ledger.record([status()])
    with pytest.raises(SourceError, match="does not appear to be a git repository"):
        StatusLedger((tmp_path / "missing.git").as_uri(), "prod", policy=FAST).snapshot()


def test_git_daemon_round_trip(empty_remote: Path, git_daemon: GitDaemon) -> None:
    ledger = StatusLedger(git_daemon.url("status.git"), "prod", policy=FAST)
    ledger.record([status()])
    assert log_subjects(empty_remote) == ["prod/web: podinfo 6.5.0 (Ready)"]
    assert ledger.history("web")[0].phase == "Ready"


def test_http_with_token_keeps_it_secret(
    empty_remote: Path, http_server: GitHttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = http_server.url("status.git", f"reconciler:{TOKEN}")
    ledger = StatusLedger(url, "prod", policy=FAST)
    commits = ledger.record([status(message=f"pulled from {url}")])
    assert len(commits) == 1
    assert TOKEN not in ledger.display
    assert TOKEN not in git(empty_remote, "show", "status/prod")
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    creds = Credentials(https_username="reconciler", https_token="not-the-token")
    bad = StatusLedger(http_server.url("status.git"), "prod", credentials=creds, policy=FAST)
    with pytest.raises(SourceError) as info:
        bad.snapshot()
    assert "not-the-token" not in str(info.value)


def test_rewritten_status_branch_is_followed(empty_remote: Path, tmp_path: Path) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    ledger.record([status()])
    first = git(empty_remote, "rev-parse", "status/prod")
    ledger.record([status(phase=Phase.STALLED, reason="HealthCheckFailed")])
    git(empty_remote, "update-ref", "refs/heads/status/prod", first)  # someone rewinds it
    assert ledger.read()["web"].phase is Phase.READY
    commits = ledger.record([status(phase=Phase.STALLED, reason="HealthCheckFailed")])
    assert len(commits) == 1
    assert git(empty_remote, "rev-parse", "status/prod^") == first


def test_records_are_parsed_once_per_blob(empty_remote: Path) -> None:
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    ledger.record([status(), status("api")], now=NOW)
    first = ledger.read()
    again = ledger.read()
    assert again["web"] is first["web"]  # same blob: the parsed record is reused
    ledger.record([status(version="6.6.0", desired_version="6.6.0"), status("api")])
    changed = ledger.read()
    assert changed["web"].version == "6.6.0" and changed["api"] is first["api"]
    # the record a commit replaced is not kept: one parsed record per instance
    assert len(ledger._parsed) == 2
    assert sorted(s.instance for s in ledger._parsed.values()) == ["api", "web"]


def test_records_are_made_as_their_commits_are_written(
    catalog_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first install records every instance in one pass: each record's file and
    message are made when its commit is written, never all of them first."""
    events: list[str] = []
    dump = ledger_module.dump_record
    add_whole = objects._PackWriter.add_whole

    def dumping(s: InstanceStatus) -> bytes:
        events.append("record")
        return dump(s)

    def adding(self: objects._PackWriter, kind: int, data: bytes) -> bytes:
        if kind == objects.OBJ_COMMIT:
            events.append("commit")
        return add_whole(self, kind, data)

    monkeypatch.setattr(ledger_module, "dump_record", dumping)
    monkeypatch.setattr(objects._PackWriter, "add_whole", adding)
    commits = StatusLedger(str(catalog_repo), "prod").record(
        [status(name) for name in ("a", "b", "c")], now=NOW
    )
    assert [c.instance for c in commits] == ["a", "b", "c"]
    assert [c.subject for c in commits] == [f"prod/{n}: podinfo 6.5.0 (Ready)" for n in "abc"]
    assert events == ["record", "commit"] * 3


def test_a_status_that_left_its_record_unchanged_is_not_prepared_again(
    empty_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A no-op pass gives the ledger every instance's status again: one that left the same
    record unchanged before is known unchanged without preparing a record; anything new
    (the status, or the record another writer replaced) is prepared and compared."""
    prepared: list[str] = []
    prepare = ledger_module.prepare_record

    def counting(new: InstanceStatus, previous: InstanceStatus | None, **kw: str | None) -> Any:
        prepared.append(new.instance)
        return prepare(new, previous, **kw)

    monkeypatch.setattr(ledger_module, "prepare_record", counting)
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    assert len(ledger.record([status(), status("api")], now=NOW)) == 2
    assert ledger.record([status(), status("api")], now=NOW) == []  # compared once more
    prepared.clear()
    assert ledger.record([status(), status("api")], now="2026-03-01T00:00:00Z") == []
    assert prepared == []  # settled: nothing prepared
    # a new status of one instance is prepared and committed; the other stays settled
    commits = ledger.record([status(phase=Phase.STALLED), status("api")], now=NOW)
    assert [c.instance for c in commits] == ["web"] and prepared == ["web"]
    # another writer replaces api's record: the same status is compared with the new one
    other = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST, cache_dir=tmp_path / "other")
    assert [c.instance for c in other.record([status("api", version="6.6.0")], now=NOW)] == ["api"]
    prepared.clear()
    commits = ledger.record([status(phase=Phase.STALLED), status("api")], now=NOW)
    assert [c.instance for c in commits] == ["api"] and prepared == ["api"]  # web: settled


def test_the_very_status_handed_back_again_touches_no_record(
    empty_remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's no-op pass hands the ledger the very record objects of the pass before:
    such a status is neither checked, redacted nor prepared again, so a no-op pass
    costs the ledger a look-up per instance. An equal status that is a new object is
    compared once, and known by identity from then on."""
    touched: list[str] = []
    prepare, redact = ledger_module.prepare_record, ledger_module.redact_text

    def counting_prepare(
        new: InstanceStatus, previous: InstanceStatus | None, **kw: str | None
    ) -> Any:
        touched.append(f"prepare {new.instance}")
        return prepare(new, previous, **kw)

    def counting_redact(text: str, secrets: tuple[str, ...]) -> str:
        touched.append(f"redact {text}")
        return redact(text, secrets)

    monkeypatch.setattr(ledger_module, "prepare_record", counting_prepare)
    monkeypatch.setattr(ledger_module, "redact_text", counting_redact)
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    web, api = status(message="web is ready"), status("api", message="api is ready")
    assert len(ledger.record([web, api], now=NOW)) == 2
    touched.clear()
    assert ledger.record([web, api], now=NOW) == []
    assert touched == []  # the same objects: nothing touched
    # equal, but new objects (a pass that built its records again): compared once...
    web2, api2 = replace(web), replace(api)
    assert web2 == web and web2 is not web
    assert ledger.record([web2, api2], now=NOW) == []
    assert "prepare web" not in touched and "redact web is ready" in touched
    touched.clear()
    # ... and known by identity in the pass after
    assert ledger.record([web2, api2], now=NOW) == []
    assert touched == []
    # a changed status of one instance is checked, prepared and committed
    web3 = replace(web2, phase=Phase.STALLED, message="web is stalled")
    commits = ledger.record([web3, api2], now=NOW)
    assert [c.instance for c in commits] == ["web"]
    assert touched == ["redact web is stalled", "prepare web"]


def test_a_status_naming_a_secret_is_redacted_on_every_pass(
    empty_remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record kept of a redacted status is the redacted copy: the status as given,
    which names the secret, is never taken for it, whichever pass hands it back."""
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    monkeypatch.setattr(RemoteAccess, "secrets", lambda self: ("hunter2",))
    leaky = status(message="cannot fetch https://x:hunter2@example.com/repo")
    for _ in range(3):
        ledger.record([leaky], now=NOW)
    record = ledger.snapshot().statuses["web"]
    assert "hunter2" not in record.message and "example.com" in record.message


def test_the_very_statuses_at_the_head_they_were_compared_at_build_no_commit(
    empty_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A no-op pass hands the ledger the very statuses that left their records unchanged
    at the branch's head as it still is: nothing is built for them. A record to drop,
    another writer's commit, a rewound branch and a new status are each built and
    committed as before."""
    ledger = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST)
    builds: list[int] = []
    build = ledger._build

    def counting(*args: Any, **kwargs: Any) -> Any:
        builds.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(ledger, "_build", counting)
    web, api = status(), status("api")
    assert len(ledger.record([web, api], now=NOW)) == 2
    assert ledger.record([web, api], now=NOW) == []  # compared at this head: settled
    quiet = git(empty_remote, "rev-parse", "status/prod")
    builds.clear()
    assert ledger.record([web, api], now=NOW, known={"web", "api"}) == []
    assert builds == []
    # an instance no longer known: its record goes, though every status is settled
    commits = ledger.record([web], now=NOW, known={"web"})
    assert [c.subject for c in commits] == ["prod: dropped 1 status record of unknown instances"]
    assert "instances/api.yaml" not in git(
        empty_remote, "ls-tree", "-r", "--name-only", "status/prod"
    )
    # another writer replaces web's record: the head moved, so web's is compared again
    assert ledger.record([web], now=NOW) == []
    other = StatusLedger(empty_remote.as_uri(), "prod", policy=FAST, cache_dir=tmp_path / "other")
    assert len(other.record([status(version="6.6.0")], now=NOW)) == 1
    commits = ledger.record([web], now=NOW)
    assert [c.instance for c in commits] == ["web"]
    assert ledger.read()["web"].version == "6.5.0"
    # a change committed, then the branch rewound to a head where all was settled
    assert ledger.record([web], now=NOW) == []
    settled = git(empty_remote, "rev-parse", "status/prod")
    stalled = status(phase=Phase.STALLED, reason="HealthCheckFailed")
    assert len(ledger.record([stalled], now=NOW)) == 1
    git(empty_remote, "update-ref", "refs/heads/status/prod", settled)
    commits = ledger.record([stalled], now=NOW)
    assert [c.instance for c in commits] == ["web"]
    assert ledger.read()["web"].phase is Phase.STALLED
    assert quiet != settled
