"""kill -9 the daemon after every rollout transition and start it again (issue 10, Resume).

The daemon runs as the real command (``reconciler run``) in its own process, and is
killed with SIGKILL as soon as each rollout step is committed, so the next process
starts from the status branch and the cluster alone, possibly with the previous
process's half-done pass (actions executed, record not committed) and whatever a
killed Git process left in its cache. SPEC section 4: it continues from the cluster
and the last recorded rollout; no batch commit is duplicated or lost; nothing rolls
back because of the restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from reconciler.model.changeset import ObjectRef
from reconciler.source.runner import read_ref
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World, world
from tests.daemon.test_pass import CHANNELS
from tests.rollout.test_daemon_rollout import COPY, WEB, _pod_versions

__all__ = ["world"]
ROOT = Path(__file__).resolve().parents[2]


def start(world: World, cache: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RECONCILER_CACHE_DIR": str(cache),
        "PYTHONPATH": str(ROOT),  # this checkout's code, as the tests run it
    }
    command = [
        sys.executable,
        "-m",
        "reconciler",
        "run",
        "--repo",
        world.repo.url,
        "--cluster",
        "prod",
        "--kubeconfig",
        str(world.sandbox.kubeconfig),
        "--interval",
        "1",
        "--health-grace",
        "0.2",
        # the next look at the rollout: soon (its pods are ready in a tenth of a second),
        # yet slow enough that the test sees each step before the next one is due (a
        # step is committed at least 1 s after the last; the test's kill follows a
        # push by 11-32 ms with two pytest workers busy, and stays well under a second
        # with two CPU-bound processes beside them)
        "--max-look",
        "1.0",
        "--log-level",
        "warning",
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def rollout_steps(world: World) -> list[str]:
    try:
        lines = log_oneline(world.repo.remote, "status/prod", limit=200)
    except Exception:  # the status branch does not exist yet
        return []
    subjects = [line.split(" ", 1)[1] for line in reversed(lines)]
    return [s for s in subjects if s.startswith("prod/web: rollout")]


# A bound, not a figure: the rollout ends in about 15 s on a quiet 2-core machine, and
# each of its five restarts imports the daemon's stack again, which takes several times
# longer while other processes keep both cores busy.
KILL_LOOP_BOUND = 600.0


def kill_after_every_step(
    world: World,
    cache: Path,
    steps_of: Callable[[World], list[str]],
    limit: float = KILL_LOOP_BOUND,
) -> int:
    """Run the real ``reconciler run`` and SIGKILL it as soon as each rollout step is
    committed, starting it again each time, until a step says ``succeeded`` (or the
    generous ``limit`` is over: the caller's assertions then say how far it got); the
    kills."""
    kills, seen = 0, 0
    read, head, steps = git.Repo(world.repo.remote), "", []
    process = start(world, cache)
    deadline = time.monotonic() + limit
    try:
        while time.monotonic() < deadline:
            # the status branch's head read in process every round; its log only when it
            # moved (a `git log` every 20 ms competed with the daemon for the CPU)
            moved = _status_head(read)
            if moved != head:
                head, steps = moved, steps_of(world)
            if steps and "succeeded" in steps[-1]:
                break
            if len(steps) > seen:  # a step was just committed: kill the daemon at once
                seen = len(steps)
                process.send_signal(signal.SIGKILL)
                process.wait()
                kills += 1
                process = start(world, cache)
            elif process.poll() is not None:
                raise AssertionError(f"the daemon exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    return kills


def _status_head(repo: git.Repo) -> str:
    return read_ref(repo, "refs/heads/status/prod") or ""  # "": no status branch yet


@pytest.mark.slow
def test_kill_9_after_every_transition_finishes_once(world: World, tmp_path: Path) -> None:
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.daemon.run_pass()  # installed at 6.5.0
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    kills = kill_after_every_step(world, tmp_path / "daemon-cache", rollout_steps)
    steps = rollout_steps(world)
    assert steps and "succeeded" in steps[-1], steps
    assert kills >= 4, (kills, steps)  # killed after started and after every batch
    # every step once, in order, none lost: started, batch k ready (k = 1..3), succeeded
    assert len(steps) == len(set(steps)), steps
    assert "started, 3 batches" in steps[0]
    ready = [s for s in steps if " ready (" in s]
    assert [s.split(": batch ")[1][:3] for s in ready] == ["1/3", "2/3", "3/3"], steps
    assert not any("rolled back" in s or "abandoned" in s for s in steps)
    assert _pod_versions(world) == {"6.6.0"}
    deployment = world.client.get(ObjectRef("apps/v1", "Deployment", "web", "web"))
    assert deployment is not None and deployment["spec"]["replicas"] == 5
    assert world.client.get(COPY) is None
