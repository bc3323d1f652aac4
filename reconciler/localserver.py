"""Run a real server program on 127.0.0.1 for tests and the demo: start, wait, stop.

``analysis/local.py`` (Prometheus) and ``registry/local.py`` (the distribution
registry) each run a packaged server the same way: its output into a log file in
its directory, a bounded wait until it answers, and on the way out a terminate
that becomes a kill when the program does not stop in time. The steps live here
once; what "answers" means (``/-/ready``, ``/v2/``) and how a failure is reported
stay with each caller. It imports nothing of ours and speaks no HTTP itself (the
callers' probes do), so any stage may use it.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

STOP_GRACE = 10.0  # seconds a server gets to exit on SIGTERM before it is killed

# True: ready; False: not yet (look again after the interval); None: not yet, and the
# probe itself already waited (a read that timed out): look again at once.
Probe = Callable[[], bool | None]


class Readiness(Enum):
    READY = "ready"
    EXITED = "exited"
    TIMED_OUT = "timed out"


def free_port() -> int:
    """A loopback port no one listens on now (another process may take it before us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server_process(
    argv: Sequence[str], *, log: Path, cwd: Path, grace: float = STOP_GRACE
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running in ``cwd`` with its output in ``log``, stopped when the block ends.

    Stopping is SIGTERM, then SIGKILL after ``grace`` seconds, and always a wait, so
    no process outlives the block and none is left a zombie.
    """
    out = log.open("wb")
    try:
        process = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    except BaseException:
        out.close()
        raise
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        out.close()


def wait_ready(
    process: subprocess.Popen[bytes], probe: Probe, *, timeout: float, interval: float
) -> Readiness:
    """Ask ``probe`` until it says ready, the process exits, or ``timeout`` seconds pass.

    The process is looked at before every probe, so a server that dies at once (a bad
    configuration, a port already in use) is reported as exited, not waited out.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return Readiness.EXITED
        answer = probe()
        if answer:
            return Readiness.READY
        if answer is False:
            time.sleep(interval)
    return Readiness.EXITED if process.poll() is not None else Readiness.TIMED_OUT


__all__ = ["STOP_GRACE", "Probe", "Readiness", "free_port", "server_process", "wait_ready"]
