"""The tests' own servers end whole: nothing they started keeps running after ``stop``."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.source.servers import GitDaemon


def _group_alive(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies excluded), from /proc."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        state, _ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            alive.append(int(stat.parent.name))
    return alive


def test_stopping_the_git_daemon_ends_every_process_it_started(tmp_path: Path) -> None:
    daemon = GitDaemon(tmp_path).start()
    assert daemon.proc is not None
    pgid = daemon.proc.pid
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=5):
        pass  # a connection: git-daemon forks a child for it
    assert len(_group_alive(pgid)) >= 2  # the `git` wrapper and git-daemon
    daemon.stop()
    deadline = time.monotonic() + 30
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_alive(pgid) == []
    daemon.stop()  # a second stop finds nothing to end and does not fail
