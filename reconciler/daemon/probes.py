"""The daemon's liveness and readiness, and the names of its HTTP route groups.

Kept apart from ``reconciler.daemon.http`` (which re-exports them) so that the loop
and ``Service`` can hold a ``DaemonHealth`` and parse the listener flags without
importing aiohttp: ``reconciler run`` without ``--metrics-address`` (or the webhook
and probe addresses) serves no HTTP, and aiohttp's import is about a tenth of a
second of every such daemon's start (tests start and kill9 that daemon many times).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

DEFAULT_STALE_AFTER = 300.0

WEBHOOKS, METRICS, PROBES = "webhooks", "metrics", "probes"
ROUTE_GROUPS = (METRICS, WEBHOOKS, PROBES)


class DaemonHealth:
    """Liveness and readiness as the loop reports them, read by the probes.

    The loop calls ``heartbeat()`` at least once per ``stale_after`` seconds (between
    stages and while it waits for triggers), ``pass_completed(ok)`` after every pass
    and, with leader election, ``set_leader(...)``. A standby replica (election on,
    not leader) counts as ready: it is healthy and waiting to take over, and a
    Deployment rollout must not stall on it.
    """

    def __init__(
        self, stale_after: float = DEFAULT_STALE_AFTER, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stale_after = stale_after
        self._clock = clock
        self._lock = threading.Lock()
        self._last_beat = clock()  # starting counts as alive
        self._passes = 0
        self._last_ok: bool | None = None
        self._leader: bool | None = None  # None: leader election is off
        self._problem: str | None = None  # a reason to be not ready however the passes went

    def heartbeat(self) -> None:
        with self._lock:
            self._last_beat = self._clock()

    def pass_completed(self, ok: bool) -> None:
        with self._lock:
            self._last_beat = self._clock()
            self._passes += 1
            self._last_ok = ok

    def set_leader(self, leader: bool | None) -> None:
        """True/False with leader election on; None when it is off."""
        with self._lock:
            self._leader = leader

    def set_problem(self, problem: str | None) -> None:
        """Not ready while ``problem`` (e.g. replicas disagreeing on ``--shards``) holds:
        the cluster is not fully reconciled, whatever this replica's passes say."""
        with self._lock:
            self._problem = problem

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            age = self._clock() - self._last_beat
        alive = age <= self.stale_after
        body = {"status": "ok" if alive else "stale", "secondsSinceHeartbeat": round(age, 3)}
        return alive, body

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            passes, last_ok, leader = self._passes, self._last_ok, self._leader
            problem = self._problem
        ready = (passes > 0 or leader is False) and problem is None
        status = "ready" if ready else "starting" if problem is None else "degraded"
        body: dict[str, Any] = {"status": status, "passes": passes, "lastPassOk": last_ok}
        if leader is not None:
            body["leader"] = leader
        if problem is not None:
            body["problem"] = problem
        return ready, body
