"""The daemon at its default log level: a start-up line, then one summary line per pass
that changed something, and nothing for a pass that changed nothing.

A silent ``reconciler run`` looked hung until someone curled ``/readyz``.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import reconciler
from reconciler.daemon.triggers import Trigger
from reconciler.model.status import Phase
from tests.daemon.conftest import World
from tests.daemon.test_service import eventually, running

SUMMARY = re.compile(
    r"^pass (\d+): (\d+) changed, (\d+) waiting for promotion, (\d+) failed \(\d+\.\d s\)$"
)


def test_start_up_line_and_one_summary_per_changing_pass(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="reconciler")
    daemon = world.new_daemon(metrics_address="127.0.0.1:0", interval=3600.0, drift_interval=3600.0)
    with running(daemon) as service:
        eventually(lambda: any(SUMMARY.match(r.getMessage()) for r in caplog.records))
        eventually(lambda: service.health.readiness()[1]["passes"] >= 1)
        port = service.ports["metrics"]
        # settle: every pass after the first may still record Progressing -> Ready
        eventually(
            lambda: (
                bool(daemon.statuses)
                and all(s.phase is Phase.READY for s in daemon.statuses.values())
            )
        )
        before = daemon.passes
        service.queue.put(Trigger("poll", "test: nothing changed"))
        eventually(lambda: daemon.passes > before)
        quiet = daemon.passes
        eventually(lambda: service.health.readiness()[1]["passes"] >= quiet)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    started = [m for m in messages if " started: " in m]
    assert started == [
        f"reconciler {reconciler.__version__} started: repo {world.repo.url}, cluster prod, "
        f"metrics+webhooks+probes on :{port}, status page /ui on :{port}"
    ]
    summaries = [SUMMARY.match(m) for m in messages if SUMMARY.match(m)]
    first = summaries[0]
    assert first is not None and first.group(1) == "1" and int(first.group(2)) >= 1
    assert (first.group(3), first.group(4)) == ("0", "0")
    assert not any(m.startswith(f"pass {quiet}:") for m in messages)
    assert not any(m.startswith("pass (") for m in messages)  # the per-pass chatter is debug


def test_reconciler_run_logs_at_info_by_default(world: World, tmp_path: Path) -> None:
    """The real command: nothing but --repo/--cluster/--kubeconfig, read from its stderr."""
    root = Path(__file__).resolve().parents[2]  # this checkout's code, as the tests run it
    env = {
        **os.environ,
        "RECONCILER_CACHE_DIR": str(tmp_path / "cli-cache"),
        "PYTHONPATH": str(root),
    }
    env.pop("RECONCILER_CLUSTER", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "run",
            "--repo",
            world.repo.url,
            "--cluster",
            "prod",
            "--kubeconfig",
            str(world.kubeconfig),
            "--interval",
            "1h",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(" pass 1: " in line for line in lines):
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=10)
    text = "\n".join(lines)
    assert f"reconciler {reconciler.__version__} started: " in text, text
    assert "no HTTP port (see --metrics-address)" in text
    assert " pass 1: " in text and "changed" in text, text
