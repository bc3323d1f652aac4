"""``SandboxHandle.settled``: a harness waits for the simulated cluster to come to rest.

Harness behaviour, not an API server's: the daemon's tests drive passes themselves and
look again once the controllers have answered the last pass's writes
(https://kubernetes.io/docs/concepts/architecture/controller/: controllers act on
writes after them, so "at rest" is the moment none has work due).
"""

from __future__ import annotations

import threading
import time

from reconciler.sandbox.testing import SandboxHandle
from reconciler.sandbox.timing import Timing
from tests.sandbox.helpers import deployment, http
from tests.sandbox.workloads import fast_sandbox


def _ready(sandbox: SandboxHandle, name: str) -> int:
    status, body = http(sandbox, "GET", f"/apis/apps/v1/namespaces/default/deployments/{name}")
    assert status == 200, body
    return int(body.get("status", {}).get("readyReplicas", 0))


def test_a_deployment_is_rolled_out_once_the_sandbox_has_settled() -> None:
    with fast_sandbox() as (sandbox, _):
        since = sandbox.resource_version()
        status, body = http(
            sandbox, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 3)
        )
        assert status == 201, body
        assert sandbox.resource_version() > since
        assert sandbox.settled(since, 60.0)
        # at rest the controllers have made the ReplicaSet, its pods, and their readiness
        assert _ready(sandbox, "web") == 3
        status, pods = http(sandbox, "GET", "/api/v1/namespaces/default/pods")
        assert len(pods["items"]) == 3


def test_nothing_written_since_is_not_settled_and_the_wait_ends_at_its_timeout() -> None:
    with fast_sandbox() as (sandbox, _):
        assert sandbox.settled(0, 60.0)  # the standard objects, and what they lead to
        since = sandbox.resource_version()
        assert not sandbox.settled(since, 0.2)  # nothing moved after ``since``
        assert sandbox.resource_version() == since


def test_work_due_beyond_the_horizon_is_not_waited_for() -> None:
    """A container Ready only after a readiness delay of minutes: its pods start, and the
    sandbox rests until then (the pods are not Ready yet)."""
    slow = Timing(controller_delay=0.01, ready_delays=(("slow:*", 600.0),))
    with fast_sandbox(slow) as (sandbox, _):
        since = sandbox.resource_version()
        body = deployment("web", 2, image="slow:1")
        status, created = http(
            sandbox, "POST", "/apis/apps/v1/namespaces/default/deployments", body
        )
        assert status == 201, created
        assert sandbox.settled(since, 60.0)
        status, pods = http(sandbox, "GET", "/api/v1/namespaces/default/pods")
        assert len(pods["items"]) == 2
        assert all(p["status"]["phase"] == "Running" for p in pods["items"])
        assert _ready(sandbox, "web") == 0
        assert not sandbox.settled(since, 0.05, horizon=3600.0)  # readiness is due within it


def test_a_wait_begun_before_anything_moved_ends_with_the_first_write_at_rest() -> None:
    """The wait sleeps on the server's loop until a write comes, however long its bound:
    a write made while it waits (here from another thread) wakes it, and it returns once
    the controllers have answered that write."""
    with fast_sandbox() as (sandbox, _):
        assert sandbox.settled(0, 60.0)
        since = sandbox.resource_version()
        created: list[int] = []

        def write() -> None:
            time.sleep(0.1)  # after the wait has begun, most likely
            status, _ = http(
                sandbox,
                "POST",
                "/apis/apps/v1/namespaces/default/deployments",
                deployment("web", 2),
            )
            created.append(status)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            assert sandbox.settled(since, 60.0)
        finally:
            writer.join(timeout=30)
        assert created == [201]
        assert _ready(sandbox, "web") == 2
