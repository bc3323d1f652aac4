"""A repository whose status branches hold what the status page shows, recorded for real.

``status_remote`` is a bare repository (reached as a ``file://`` URL, like any
remote) with ``status/prod`` and ``status/staging`` written by ``StatusLedger``:
an upgrade with a rollout in flight and its migrations, a failed instance whose
message holds markup, and on prod a hand-made commit (as a person could push)
adding a record whose instance name is itself markup.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.daemon.http import DaemonHealth, DaemonHttpServer
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.status_site import StatusPages
from reconciler.daemon.triggers import TriggerQueue
from reconciler.model.migrations import MigrationRecord
from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.ledger import StatusLedger
from reconciler.source.remote import NetworkPolicy
from reconciler.status import dump_status
from tests.source.fixtures import cache_dir, remotes  # noqa: F401
from tests.source.servers import git

FAST = NetworkPolicy(timeout=10, attempts=2, backoff=0)
EVIL_MESSAGE = "<script>alert('message')</script> & more"
EVIL_NAME = "<img src=x onerror=alert(1)>"


def record(cluster: str, instance: str, **changes: object) -> InstanceStatus:
    base = InstanceStatus(
        cluster=cluster,
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


def migration(name: str, outcome: str = "succeeded") -> dict[str, object]:
    return MigrationRecord(
        name=name,
        version="6.6.0",
        checksum="sha256:" + "0" * 64,
        phase="pre",
        scope="app",
        started_at="2026-01-02T00:00:00Z",
        duration=1.5,
        check_duration=0.1,
        outcome=outcome,
        message="copied the schema",
        from_version="6.5.0",
    ).to_dict()


ROLLOUT = RolloutRecord(
    from_version="6.5.0",
    to_version="6.6.0",
    state=RollingState.WAITING,
    batches=3,
    batch=1,
    batch_state=BatchState.READY,
    replicas=Replicas(desired=5, updated=2, ready=5),
    partition=1,
    started_at="2026-01-02T00:00:00Z",
    updated_at="2026-01-02T00:01:00Z",
    targets=(2, 4, 5),
)


@pytest.fixture
def status_remote(remotes: Path, tmp_path: Path) -> Path:  # noqa: F811
    bare = remotes / "catalog.git"
    git(remotes, "init", "-q", "--bare", str(bare))
    prod = StatusLedger(bare.as_uri(), "prod", policy=FAST)
    prod.record(
        [record("prod", "web"), record("prod", "api", app="redis", source="exact")],
        now="2026-01-01T00:00:00Z",
    )
    prod.record(
        [
            record(
                "prod",
                "web",
                phase=Phase.PROGRESSING,
                version="6.6.0",
                desired_version="6.6.0",
                rollout=ROLLOUT,
                migrations=(migration("copy-schema"),),
            ),
            record(
                "prod",
                "api",
                app="redis",
                source="exact",
                phase=Phase.FAILED,
                reason="ApplyFailed",
                message=EVIL_MESSAGE,
            ),
        ],
        now="2026-01-02T00:01:00Z",
    )
    staging = StatusLedger(bare.as_uri(), "staging", policy=FAST)
    staging.record(
        [record("staging", "web", version="6.7.0", desired_version="6.7.0", source="channel:beta")],
        now="2026-01-01T00:00:00Z",
    )
    _push_hand_made_record(bare, tmp_path / "hand")
    return bare


def _push_hand_made_record(bare: Path, work: Path) -> None:
    """A record pushed by hand whose file (and instance) name is markup."""
    git(work.parent, "clone", "-q", "--branch", "status/prod", str(bare), str(work))
    data = dump_status(record("prod", EVIL_NAME, app="<b>app</b>", version="1.0.0<br>"))
    (work / "instances" / f"{EVIL_NAME}.yaml").write_bytes(data)
    (work / "instances" / "broken.yaml").write_text("kind: [unclosed\n")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "by hand")
    git(work, "push", "-q", "origin", "status/prod")


@contextmanager
def serving(pages: StatusPages) -> Iterator[str]:
    """The daemon's HTTP server answering ``/ui`` from ``pages``: its base URL."""
    server = DaemonHttpServer(
        "127.0.0.1",
        0,
        TriggerQueue(),
        DaemonMetrics(),
        DaemonHealth(),
        None,
        None,
        pages=pages.page,
    )
    port = server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
