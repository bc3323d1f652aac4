"""The controllers' work queue: an event handler only adds keys, workers run them later,
between requests (https://kubernetes.io/docs/concepts/architecture/controller/: the
controller manager runs beside the API server; client-go's work queue holds one pending
entry per key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from reconciler.sandbox.workqueue import WorkQueue

Log = list[str]


def _queue(
    log: Log, *, again: float | None = None, slice_seconds: float = 0.005
) -> WorkQueue[str, str]:
    def intake(event: str) -> None:
        log.append(f"event {event}")
        queue.add_after(event, 0.0)

    def run(key: str) -> float | None:
        log.append(f"run {key}")
        if key == "broken":
            raise RuntimeError("a controller bug")
        return again

    queue: WorkQueue[str, str] = WorkQueue(intake, run, slice_seconds=slice_seconds)
    return queue


def _within_loop(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), timeout=30))


async def _until(check: Callable[[], bool]) -> None:
    while not check():
        await asyncio.sleep(0.001)


def test_an_event_is_taken_after_the_write_not_inside_it() -> None:
    log: Log = []

    async def body() -> None:
        queue = _queue(log)
        queue.submit("a")
        assert log == []  # the write that made the event goes on at once
        await _until(lambda: "run a" in log)
        assert log == ["event a", "run a"]
        await queue.stop()

    _within_loop(body)


def test_one_pending_run_per_key_the_earliest_wins() -> None:
    log: Log = []

    async def body() -> None:
        queue = _queue(log)
        queue.submit("start")  # starts the worker on this loop
        await _until(lambda: "run start" in log)
        queue.add_after("k", 30.0)
        queue.add_after("k", 0.01)
        queue.add_after("k", 20.0)
        await _until(lambda: "run k" in log)
        await asyncio.sleep(0.05)
        assert log.count("run k") == 1 and not queue.pending("k")
        queue.add_after("gone", 0.01)
        queue.forget("gone")
        await asyncio.sleep(0.05)
        assert "run gone" not in log
        await queue.stop()

    _within_loop(body)


def test_requests_are_served_between_slices_of_controller_work() -> None:
    log: Log = []

    async def request() -> None:
        """A request that comes in once the controllers started on a backlog."""
        while "run a" not in log:
            await asyncio.sleep(0)
        log.append("request")

    async def body() -> None:
        queue = _queue(log, slice_seconds=0.0)  # let requests in after every key
        queue.submit("start")
        await _until(lambda: "run start" in log)
        served = asyncio.ensure_future(request())
        for key in ("a", "b", "c", "d"):  # a backlog, all due at once
            queue.add_after(key, 0.0)
        await _until(lambda: "run d" in log)
        await served
        # served while the backlog ran, not after all of it
        assert log.index("run a") < log.index("request") < log.index("run d")
        await queue.stop()

    _within_loop(body)


def test_a_failing_controller_is_retried_and_the_others_go_on() -> None:
    log: Log = []

    async def body() -> None:
        queue = _queue(log)
        queue.submit("broken")
        queue.submit("fine")
        await _until(lambda: "run fine" in log)
        assert queue.pending("broken")  # tried again later, as a requeue with back-off
        await queue.stop()

    _within_loop(body)


def test_a_run_that_asks_again_is_requeued_and_a_stopped_queue_takes_nothing() -> None:
    log: Log = []

    async def body() -> None:
        queue = _queue(log, again=0.001)
        queue.submit("tick")
        await _until(lambda: log.count("run tick") >= 3)
        await queue.stop()
        queue.submit("late")
        await asyncio.sleep(0.02)
        assert "event late" not in log

    _within_loop(body)


def test_without_an_event_loop_nothing_is_simulated() -> None:
    log: Log = []
    queue = _queue(log)
    queue.submit("a")  # the API used alone: no controller manager runs
    queue.add_after("b", 0.0)
    assert log == [] and not queue.pending("b")


def test_next_due_says_when_the_controllers_have_work_next() -> None:
    log: Log = []

    async def body() -> None:
        queue = _queue(log)
        queue.submit("first")  # starts the worker on this loop
        await _until(lambda: "run first" in log)
        assert queue.next_due() is None  # nothing pending: only a write moves it
        queue.add_after("later", 30.0)
        due = queue.next_due()
        assert due is not None and 29.0 < due <= 30.0
        queue.add_after("sooner", 10.0)
        due = queue.next_due()
        assert due is not None and 9.0 < due <= 10.0
        queue.forget("sooner")
        due = queue.next_due()
        assert due is not None and 29.0 < due <= 30.0
        queue.submit("waiting")  # an event not taken yet is work due now
        assert queue.next_due() == 0.0
        await _until(lambda: "run waiting" in log)
        due = queue.next_due()
        assert due is not None and due > 9.0
        await queue.stop()

    _within_loop(body)
