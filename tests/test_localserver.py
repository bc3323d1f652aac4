"""reconciler.localserver: the start/wait/stop that Prometheus and the registry share.

Real processes (the test's own Python interpreter), no mocks: a server that never
answers, one that exits at once, one that ignores SIGTERM.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from reconciler.localserver import Readiness, free_port, server_process, wait_ready

PY = sys.executable


def test_a_free_port_can_be_listened_on() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()


def test_the_output_goes_to_the_log_and_the_process_is_stopped(tmp_path: Path) -> None:
    code = "import sys, time; print('listening', flush=True); time.sleep(600)"
    log = tmp_path / "server.log"
    with server_process([PY, "-c", code], log=log, cwd=tmp_path) as process:
        said = wait_ready(
            process, lambda: "listening" in log.read_text(), timeout=60, interval=0.05
        )
        assert said is Readiness.READY
        assert process.poll() is None
    assert process.returncode is not None  # terminated and waited for, not left running
    assert log.read_text() == "listening\n"


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(600)"
    )
    log = tmp_path / "stubborn.log"
    with server_process([PY, "-c", code], log=log, cwd=tmp_path, grace=0.5) as process:
        up = wait_ready(process, lambda: "up" in log.read_text(), timeout=60, interval=0.05)
        assert up is Readiness.READY
    assert process.returncode == -9  # SIGKILL: SIGTERM was ignored


def test_a_server_that_exits_is_told_from_one_that_never_answers(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    with server_process([PY, "-c", "raise SystemExit(3)"], log=log, cwd=tmp_path) as dead:
        assert wait_ready(dead, lambda: False, timeout=60, interval=0.05) is Readiness.EXITED
    with server_process([PY, "-c", "import time; time.sleep(600)"], log=log, cwd=tmp_path) as mute:
        probes: list[None] = []

        def never() -> bool | None:
            probes.append(None)
            return None  # "I waited already": asked again without the interval's sleep

        assert wait_ready(mute, never, timeout=0.3, interval=600) is Readiness.TIMED_OUT
        assert len(probes) > 1  # an interval of 600 s was never slept


def test_a_program_that_cannot_start_raises_at_once(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    with (
        pytest.raises(FileNotFoundError),
        server_process([missing], log=tmp_path / "y.log", cwd=tmp_path),
    ):
        raise AssertionError("started a missing program")
