"""Several processes record to one status branch at once: nothing lost, nothing duplicated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.source.ledger import StatusLedger
from tests.source.servers import GitDaemon, git

WORKER = """
import sys
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.ledger import StatusLedger
from reconciler.source.remote import NetworkPolicy

url, worker, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
policy = NetworkPolicy(timeout=30, attempts=3, backoff=0.1)
ledger = StatusLedger(url, "prod", policy=policy, conflict_attempts=100)
shared = InstanceStatus(cluster="prod", instance="shared", app="podinfo", phase=Phase.READY,
                        version="1.0.0")
for r in range(rounds):
    mine = InstanceStatus(cluster="prod", instance=f"app-{worker}", app="podinfo",
                          phase=Phase.READY, version="1.0.0", objects=r)
    ledger.record([mine, shared])
"""

WORKERS = 4
ROUNDS = 3


def _run_writers(url: str, tmp_path: Path) -> None:
    procs = []
    for worker in range(WORKERS):
        env = {**os.environ, "RECONCILER_CACHE_DIR": str(tmp_path / f"cache-{worker}")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, url, str(worker), str(ROUNDS)],
                env=env,
                stderr=subprocess.PIPE,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["file", "daemon"])
def test_concurrent_writers_lose_nothing_and_duplicate_nothing(
    transport: str, empty_remote: Path, git_daemon: GitDaemon, tmp_path: Path
) -> None:
    url = empty_remote.as_uri() if transport == "file" else git_daemon.url("status.git")
    _run_writers(url, tmp_path)
    subjects = git(empty_remote, "log", "--format=%s", "status/prod").splitlines()
    # every worker's every change, plus the shared record exactly once
    assert len(subjects) == WORKERS * ROUNDS + 1
    assert sum(1 for s in subjects if s.startswith("prod/shared:")) == 1
    ledger = StatusLedger(url, "prod")
    records = ledger.read()
    assert sorted(records) == [*(f"app-{w}" for w in range(WORKERS)), "shared"]
    assert all(records[f"app-{w}"].objects == ROUNDS - 1 for w in range(WORKERS))
    for worker in range(WORKERS):
        history = ledger.history(f"app-{worker}")
        assert len(history) == ROUNDS
    assert git(empty_remote, "rev-list", "--merges", "--count", "status/prod") == "0"
