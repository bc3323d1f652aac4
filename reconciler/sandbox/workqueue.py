"""The simulated controller manager's work queue: delayed, coalesced keys, one worker task.

kube-controller-manager is a process of its own beside the API server: an informer's
event handler only adds a key to a work queue, and the controller's workers take keys
off it later (client-go's delaying, rate-limited ``workqueue``;
https://kubernetes.io/docs/concepts/architecture/controller/). A request to the API
server never waits for a controller. The sandbox keeps that shape on its one event
loop: the store's listener hands each event to :meth:`WorkQueue.submit` and returns,
and one worker task (:meth:`WorkQueue._work`) turns events into keys and runs the
keys that are due, giving the loop back to the requests that came in after each
slice of work. Before, each due key ran as a timer of its own, and a burst of
thousands of due keys (200 rollouts at once) ran back to back while every request
waited for them all. The two share the process as two processes share a CPU: a
slice lasts as long as the loop spent on requests since the last one (at least
``slice_seconds``, at most ``MAX_SLICE``), so neither side starves the other when
both are busy (pods still become Ready on time while a client floods the server).
``controllers.py`` owns the one queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
E = TypeVar("E")
# Work done before the worker lets requests in: small enough that a request waits
# for the controllers no longer than a real server's answer takes (5-10 ms).
DEFAULT_SLICE = 0.005
MAX_SLICE = 0.05  # the longest a request waits for the controllers


class WorkQueue(Generic[E, K]):
    """Events in, keys due at a time out; one pending run per key (the earliest wins).

    ``intake`` turns a submitted event into :meth:`add_after` calls (and ``forget``);
    ``run`` reconciles a key and returns when to run it again (None: when an event
    asks). Both run on the worker task, never inside the write that made the event.
    """

    def __init__(
        self,
        intake: Callable[[E], None],
        run: Callable[[K], float | None],
        *,
        slice_seconds: float = DEFAULT_SLICE,
    ) -> None:
        self._intake = intake
        self._run = run
        self.slice_seconds = slice_seconds
        self._events: deque[E] = deque()
        self._due: dict[K, float] = {}  # key -> when it runs (loop time)
        self._heap: list[tuple[float, int, K]] = []  # may hold stale entries: see _due
        # ties run in the order they were added (a plain number, not itertools.count:
        # a server is copied with pickle, which 3.12 deprecates for count objects)
        self._added = 0
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        self._stopped = False
        self._away = 0.0  # how long the loop served others while the worker waited

    def submit(self, event: E) -> None:
        """Hand ``event`` to the worker (the write that made it goes on at once).

        Without a running event loop (the API used alone, in a unit test) nothing is
        simulated, as no controller manager runs."""
        if self._worker is None and not self._start():
            return  # no loop, or stopped
        self._events.append(event)
        self._wake.set()

    def add_after(self, key: K, delay: float) -> None:
        """Run ``key`` ``delay`` seconds from now, or at its earlier pending time."""
        if self._loop is None:
            return
        when = self._loop.time() + delay
        pending = self._due.get(key)
        if pending is not None and pending <= when:
            return
        self._due[key] = when
        self._added += 1
        heapq.heappush(self._heap, (when, self._added, key))
        self._wake.set()

    def forget(self, key: K) -> None:
        """Drop ``key``'s pending run (its object is gone)."""
        self._due.pop(key, None)

    def pending(self, key: K) -> bool:
        return key in self._due

    def next_due(self) -> float | None:
        """Seconds until the controllers next have work: 0 while events wait to be taken,
        None when no key is pending (nothing moves until a write comes)."""
        if self._events:
            return 0.0
        if not self._due or self._loop is None:
            return None
        return max(0.0, min(self._due.values()) - self._loop.time())

    @property
    def idle(self) -> bool:
        """Nothing to take and nothing due: the controllers have settled."""
        return not self._events and not self._due

    def start(self) -> None:
        """Start the worker on the running loop, if it is not running: what was pending
        when the queue was paused (:meth:`pause`) runs on."""
        if self._worker is None and self._start():
            self._wake.set()

    async def pause(self) -> None:
        """End the worker but keep what is pending, and forget the loop: a paused queue
        holds nothing bound to a loop, so its server can be copied (``testing.py``) and
        each copy goes on with :meth:`start` on a loop of its own."""
        worker, self._worker, self._loop = self._worker, None, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        self._wake = asyncio.Event()  # the old one belongs to the loop it waited on

    async def stop(self) -> None:
        """End the worker (server shutdown) and wait for it; later events are dropped."""
        self._stopped = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker

    def _start(self) -> bool:
        if self._stopped:
            return False
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._worker = self._loop.create_task(self._work(), name="sandbox-controllers")
        return True

    async def _work(self) -> None:
        assert self._loop is not None
        loop = self._loop
        resumed = time.perf_counter()
        while True:
            deadline = self._deadline(resumed)
            self._take_events()
            while self._heap and self._heap[0][0] <= loop.time():
                when, _, key = heapq.heappop(self._heap)
                if self._due.get(key) != when:
                    continue  # run earlier, re-added, or forgotten
                del self._due[key]
                self._run_one(key)
                self._take_events()  # a DELETED this run caused cancels what follows
                if time.perf_counter() >= deadline:
                    break
            if self._events or (self._heap and self._heap[0][0] <= loop.time()):
                paused = time.perf_counter()
                await asyncio.sleep(0)  # requests now: the loop polls its sockets
                resumed = time.perf_counter()
                self._away = resumed - paused
                continue
            self._away = 0.0
            self._wake.clear()
            timeout = self._heap[0][0] - loop.time() if self._heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            resumed = time.perf_counter()

    def _deadline(self, now: float) -> float:
        """The end of the next slice: as long as the requests took meanwhile."""
        return now + min(max(self.slice_seconds, self._away), MAX_SLICE)

    def _take_events(self) -> None:
        while self._events:
            event = self._events.popleft()
            try:
                self._intake(event)
            except Exception:  # a sandbox bug: say so, and keep the controllers running
                log.exception("sandbox: the controllers failed to take an event")

    def _run_one(self, key: K) -> None:
        try:
            again = self._run(key)
        except Exception:  # a sandbox bug: say so, and try again rather than stall
            log.exception("sandbox: a controller failed on %s", key)
            again = 1.0
        if again is not None:
            self.add_after(key, max(again, 0.001))
