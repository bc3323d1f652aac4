"""Running a sandbox inside a test process (or ``reconciler demo``) on a background thread.

:func:`running_sandbox` starts the server on its own event loop in a daemon thread,
writes a kubeconfig, and yields a :class:`SandboxHandle`; the ``sandbox`` pytest
fixture in ``tests/conftest.py`` wraps it. Startup takes milliseconds, so every
test gets a fresh, empty cluster: its server is a copy of one built once per process
(:func:`fresh_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from reconciler.sandbox.requestlog import RequestLogEntry
from reconciler.sandbox.runner import RunningServer, serve, write_kubeconfig
from reconciler.sandbox.server import SandboxServer
from reconciler.sandbox.store import DEFAULT_HISTORY_LIMIT, StoredEvent
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from reconciler.sandbox.watch import DEFAULT_BOOKMARK_INTERVAL

T = TypeVar("T")

# A pickled server per set of options, built the first time a sandbox with them starts.
_TEMPLATES: dict[tuple[tuple[str, Hashable], ...], bytes] = {}
# How long a template's controllers may take to settle (seconds): past it, what is still
# pending is copied with it and runs in each copy.
SETTLE_LIMIT = 1.0


def fresh_server(**options: Any) -> SandboxServer:
    """A server as ``SandboxServer(**options)`` builds it and its controllers settle it,
    copied from one built once per process.

    Building one writes the cluster's standard objects through the API (the system
    namespaces and what each holds, the nodes and control-plane pods, the default
    ClusterRoles, PriorityClasses, StorageClass and APIServices), and its controllers
    then start the control-plane pods (their status and Events): some eighty writes,
    most of a test sandbox's start, paid again by each of the suite's thousand-odd
    sandboxes. A copy (pickle, all in C) costs a tenth of that and shares nothing with
    the template or with other copies, so each sandbox still starts with the standard
    objects alone and its writes stay its own. The template's controllers are paused
    before it is copied (no loop, task or socket is copied) and each copy's start on
    its own loop; what was still pending then runs in the copy. The standard objects
    keep the template's uids and times, as a cluster created before the test began.
    Options that cannot be a key (none of the harness's) build a server anew.
    """
    key = tuple(sorted(options.items()))
    try:
        data = _TEMPLATES.get(key)
    except TypeError:  # unhashable option
        return _settled(options)
    if data is None:
        data = pickle.dumps(_settled(options), pickle.HIGHEST_PROTOCOL)
        _TEMPLATES[key] = data
    server = pickle.loads(data)
    assert isinstance(server, SandboxServer)
    return server


# ``SandboxHandle.settled``: work due further away than this is not waited for (a pod's
# readiness delay of seconds, a CronJob's next minute), and the least pause before it
# looks again while work is due at once (the controllers are running it)
SETTLE_HORIZON = 0.1
SETTLE_POLL = 0.005


def _settled(options: dict[str, Any]) -> SandboxServer:
    """A server built on a loop of its own, its controllers run until they have nothing
    left to do (at most SETTLE_LIMIT), then paused; the loop is closed."""

    async def build() -> SandboxServer:
        server = SandboxServer(**options)  # on the running loop: its controllers start
        queue = server.controllers.queue
        deadline = time.monotonic() + SETTLE_LIMIT
        while not queue.idle and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await queue.pause()
        return server

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(build())
    finally:
        loop.close()


class SandboxHandle:
    """A sandbox running on a background thread: its URL, kubeconfig and request log."""

    def __init__(
        self, running: RunningServer, loop: asyncio.AbstractEventLoop, kubeconfig: Path
    ) -> None:
        self._running = running
        self._loop = loop
        self.url = running.url
        self.kubeconfig = kubeconfig
        self._stopped = threading.Event()

    def request_log(self) -> list[RequestLogEntry]:
        return self._running.server.requests.entries()

    def reset_request_log(self) -> None:
        self._running.server.requests.reset()

    def call(self, func: Callable[[], T]) -> T:
        """Run ``func`` on the server's loop (the store is not thread-safe) and return its value."""
        result: Future[T] = Future()

        def run() -> None:
            try:
                result.set_result(func())
            except BaseException as e:  # handed to the caller's thread
                result.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return result.result(timeout=30)

    def observe(self, listener: Callable[[StoredEvent], None]) -> None:
        """Call ``listener`` on every write, on the server's loop, as the write happens.

        Invariants of a rollout (never more than maxSurge extra pods) must hold at every
        write, not only at the moments a poll happens to look.
        """
        self.call(lambda: self._running.server.api.store.listeners.append(listener))

    def compact_history(self) -> None:
        """Forget watch history: watches from any older resourceVersion now get 410 Gone."""
        self.call(self._running.server.api.store.compact)

    def close_watches(self) -> None:
        """End every open watch stream cleanly, as an API server does when a watch's
        time is up or the server restarts; clients resume from their last resourceVersion."""
        self.call(self._running.server.api.store.close_watches)

    def resource_version(self) -> int:
        """The store's last resourceVersion: it moves with every write."""
        return self.call(lambda: self._running.server.api.store.resource_version)

    def settled(self, since: int, timeout: float, *, horizon: float = SETTLE_HORIZON) -> bool:
        """Wait until the cluster has moved past resourceVersion ``since`` and come to
        rest: no controller has work due within ``horizon`` seconds. False when
        ``timeout`` passed first (a crash-looping pod never rests; nothing moved).

        A harness that drives the daemon's passes itself waits here instead of a fixed
        pause: the next pass then sees what the last one's writes led to, where a pass
        after a short sleep often finds the pods still starting and does nothing.

        The wait runs on the server's loop, which wakes it when something is written
        or when the controllers' next work falls due: a wait from the test's thread
        asked the loop every few milliseconds, each time a handoff to the loop's
        thread and back, most of what a harness's loop of passes spent waiting.
        """
        queue = self._running.server.controllers.queue
        store = self._running.server.api.store

        async def rest() -> bool:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            written = asyncio.Event()

            def wake(_: StoredEvent) -> None:
                written.set()

            store.listeners.append(wake)
            try:
                while True:
                    due = queue.next_due()
                    moved = store.resource_version > since
                    if moved and (due is None or due > horizon):
                        return True
                    left = deadline - loop.time()
                    if left <= 0:
                        return False
                    # the next write, or the controllers' next work falling due
                    wait = left if due is None else min(left, max(due, SETTLE_POLL))
                    written.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(written.wait(), wait)
            finally:
                store.listeners.remove(wake)

        future = asyncio.run_coroutine_threadsafe(rest(), self._loop)
        return future.result(timeout=timeout + 30)

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        future = asyncio.run_coroutine_threadsafe(self._running.stop(), self._loop)
        future.result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)


@contextmanager
def running_sandbox(
    *,
    controller_delay: float = 0.05,
    fail_images: Sequence[str] = (),
    port: int = 0,
    host: str = "127.0.0.1",
    history_limit: int = DEFAULT_HISTORY_LIMIT,
    kubeconfig: Path | None = None,
    timing: Timing | None = None,
    request_latency: float = 0.0,
    max_requests_in_flight: int = 0,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
) -> Iterator[SandboxHandle]:
    """A sandbox for the duration of the ``with`` block (stopped on exit)."""
    loop = asyncio.new_event_loop()
    started: Future[RunningServer] = Future()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            # built before the loop runs: its controllers start when it is served
            server = fresh_server(
                controller_delay=controller_delay,
                fail_images=tuple(fail_images),
                history_limit=history_limit,
                # a harness shrinks every wait, the Job back-off and pods' grace too
                timing=timing
                or Timing(
                    controller_delay=controller_delay,
                    job_backoff=controller_delay,
                    pod_grace_scale=TEST_GRACE_SCALE,
                ),
                request_latency=request_latency,
                max_requests_in_flight=max_requests_in_flight,
                bookmark_interval=bookmark_interval,
            )
            running = loop.run_until_complete(serve(server, host, port))
        except BaseException as e:
            started.set_exception(e)
            loop.close()
            return
        started.set_result(running)
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="reconciler-sandbox", daemon=True)
    thread.start()
    running = started.result(timeout=30)
    with tempfile.TemporaryDirectory(prefix="reconciler-sandbox-") as tmp:
        path = write_kubeconfig(kubeconfig or Path(tmp) / "kubeconfig", running.url)
        handle = SandboxHandle(running, loop, path)
        try:
            yield handle
        finally:
            handle.stop()
            thread.join(timeout=10)
