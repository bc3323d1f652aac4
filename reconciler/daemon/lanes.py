"""Run independent pieces of work concurrently, dependent ones in order: lanes.

A pass applies hundreds of instances, each a handful of requests; a real API
server answers each in 5-10 ms, so sent one after another they leave the server
(and the pass) mostly waiting. Instances are independent of each other, except
where one creates what another needs: a namespace that does not exist yet, a CRD.
The caller puts work that depends on other work in the same lane (a lane runs
its items one after another, in the order given) and the rest in lanes of their
own; lanes run on a thread pool of ``workers`` threads, each thread sending one
request at a time, so at most ``workers`` requests are in flight.

Results come back in the order of the items, whatever order the threads
finished in, so what is logged and recorded from them stays deterministic. An
exception ends its own lane and stops the other lanes from starting new items
(it means the cluster is unreachable, or a bug); once the running items are
done, the exception of the first failed item, in item order, is raised.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_lanes(
    items: Sequence[T],
    lane_of: Callable[[T], Hashable],
    work: Callable[[T], R],
    workers: int,
) -> list[R]:
    """``work(item)`` for every item, lanes concurrently on ``workers`` threads; results in order.

    With one worker or one lane everything runs on the calling thread, as a plain loop.
    """
    lanes: dict[Hashable, list[int]] = {}
    for index, item in enumerate(items):
        lanes.setdefault(lane_of(item), []).append(index)
    if workers <= 1 or len(lanes) <= 1:
        return [work(item) for item in items]
    results: dict[int, R] = {}
    errors: dict[int, BaseException] = {}
    stop = threading.Event()

    def run(indexes: list[int]) -> None:
        for index in indexes:
            if stop.is_set():
                return
            try:
                results[index] = work(items[index])
            except BaseException as e:  # re-raised on the calling thread, in item order
                errors[index] = e
                stop.set()
                return

    with ThreadPoolExecutor(
        max_workers=min(workers, len(lanes)), thread_name_prefix="reconciler-apply"
    ) as pool:
        # each lane runs in a copy of the caller's context: its log lines carry the pass ID
        submitted = [
            pool.submit(contextvars.copy_context().run, run, indexes) for indexes in lanes.values()
        ]
        for future in submitted:
            future.result()
    if errors:
        raise errors[min(errors)]
    return [results[index] for index in range(len(items))]
