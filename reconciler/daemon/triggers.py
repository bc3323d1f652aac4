"""What wakes the reconcile loop: poll and drift timers, webhooks, file saves, signals.

The loop in ``loop.py`` blocks on ``TriggerQueue.wait`` between passes. Every
source of work puts a ``Trigger`` there from its own thread: ``PollTimer`` and
``DriftTimer`` (periodic, in background threads), ``DaemonHttpServer`` (webhooks),
``DirectoryWatcher`` (``--watch``: a local catalog saved in an editor), the loop
itself (``schedule`` a ``retry`` when an instance's backoff ends) and the signal
handlers (``shutdown``). Triggers that arrive while a pass runs are coalesced:
ten pushes during one pass cause one more pass, not ten.

Every piece takes its intervals (and a ``random.Random`` for jitter) as arguments
and stops promptly, so tests run with intervals of a few hundredths of a second.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Literal

import watchfiles

from reconciler.model.errors import UsageError

log = logging.getLogger(__name__)

TriggerReason = Literal[
    "startup", "poll", "webhook", "request", "watch", "drift", "retry", "shutdown"
]

# When several reasons are coalesced, the merged trigger is named after the one
# that asks the most of the pass: a shutdown ends the loop, a drift check applies
# even when Git did not move, and a push or a save is more telling in logs than a poll.
_PRIORITY: tuple[TriggerReason, ...] = (
    "shutdown",
    "drift",
    "webhook",
    "request",  # ``reconciler reconcile``: a person asked for a pass now
    "watch",
    "retry",
    "startup",
    "poll",
)


@dataclass(frozen=True)
class Trigger:
    """Why a pass starts. ``reasons`` lists every reason coalesced into this one."""

    reason: TriggerReason
    detail: str = ""
    at: float = field(default_factory=time.time)
    reasons: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.reason not in _PRIORITY:
            raise ValueError(f"unknown trigger reason {self.reason!r}")
        if self.reason not in self.reasons:
            object.__setattr__(self, "reasons", self.reasons | {self.reason})

    def describe(self) -> str:
        others = sorted(self.reasons - {self.reason})
        text = f"{self.reason}: {self.detail}" if self.detail else self.reason
        return f"{text} (also {', '.join(others)})" if others else text


def merge_triggers(triggers: Iterable[Trigger]) -> Trigger:
    """One trigger standing for all of ``triggers`` (which must not be empty)."""
    pending = list(triggers)
    if not pending:
        raise ValueError("no triggers to merge")
    first = min(pending, key=lambda t: (_PRIORITY.index(t.reason), t.at))
    reasons = frozenset().union(*(t.reasons for t in pending))
    return Trigger(first.reason, first.detail, min(t.at for t in pending), reasons)


class TriggerQueue:
    """A thread-safe mailbox of pending triggers that coalesces bursts.

    ``put`` never blocks. ``wait`` returns one trigger standing for everything that
    arrived since the last ``wait`` (see ``merge_triggers``). After a ``shutdown``
    trigger the queue is closed: every later ``wait`` returns it again at once, so
    a loop cannot miss it, and later ``put`` calls are dropped.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # Reentrant: a signal handler runs on the main thread, possibly while that
        # thread is inside one of these methods, and calls ``put``.
        self._cond = threading.Condition(threading.RLock())
        self._pending: list[Trigger] = []
        self._scheduled: list[tuple[float, Trigger]] = []
        self._shutdown: Trigger | None = None
        self._waiting: set[int] = set()  # the threads inside ``wait``

    @property
    def closed(self) -> bool:
        return self._shutdown is not None

    def put(self, trigger: Trigger) -> bool:
        """Add a trigger; returns False when it was coalesced with one already pending.

        Called on the very thread that is inside ``wait``, ``put`` can only come from
        a signal handler that interrupted it, possibly between its look at the
        pending triggers and its sleep: a notify then would wake nobody, and the
        trigger would wait out the whole timeout (30 s for a SIGTERM in one run of
        tests/daemon/test_triggers.py). A helper thread puts it instead: it gets the
        lock only once ``wait`` sleeps, so its notify wakes it (True: not known yet).
        """
        if threading.get_ident() in self._waiting:
            threading.Thread(target=self.put, args=(trigger,), daemon=True).start()
            return True
        with self._cond:
            if self._shutdown is not None:
                return False
            if trigger.reason == "shutdown":
                self._shutdown = trigger
            fresh = not self._pending
            self._pending.append(trigger)
            self._cond.notify_all()
            return fresh

    def schedule(self, trigger: Trigger, delay: float) -> None:
        """Deliver ``trigger`` after ``delay`` seconds (e.g. a ``retry`` when a backoff ends)."""
        with self._cond:
            self._scheduled.append((self._clock() + max(delay, 0.0), trigger))
            self._cond.notify_all()

    def cancel_scheduled(self) -> None:
        with self._cond:
            self._scheduled.clear()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def wait(self, timeout: float | None = None) -> Trigger | None:
        """Block until a trigger is pending (or ``timeout`` seconds pass: None)."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            self._waiting.add(threading.get_ident())
            try:
                while True:
                    if self._shutdown is not None:
                        self._pending.clear()
                        return self._shutdown
                    self._release_due()
                    if self._pending:
                        merged = merge_triggers(self._pending)
                        self._pending.clear()
                        return merged
                    now = self._clock()
                    if deadline is not None and now >= deadline:
                        return None
                    self._cond.wait(self._sleep_time(now, deadline))
            finally:
                self._waiting.discard(threading.get_ident())

    def _release_due(self) -> None:
        now = self._clock()
        due = [t for at, t in self._scheduled if at <= now]
        if due:
            self._scheduled = [(at, t) for at, t in self._scheduled if at > now]
            self._pending.extend(due)

    def _sleep_time(self, now: float, deadline: float | None) -> float | None:
        """Until the deadline or the next scheduled trigger, whichever comes first."""
        candidates = [at - now for at, _ in self._scheduled]
        if deadline is not None:
            candidates.append(deadline - now)
        return max(min(candidates), 0.0) if candidates else None


class PeriodicTrigger:
    """A background thread that puts a trigger every ``interval`` seconds (± jitter).

    The delay is ``interval * (1 + u)`` with ``u`` uniform in ``[-jitter, +jitter]``,
    so replicas started together do not poll the Git server in lockstep.
    """

    reason: TriggerReason = "poll"

    def __init__(
        self,
        queue: TriggerQueue,
        interval: float,
        *,
        jitter: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"{self.reason} interval must be positive, got {interval}")
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"{self.reason} jitter must be in [0, 1), got {jitter}")
        self.queue = queue
        self.interval = interval
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def next_delay(self) -> float:
        if not self.jitter:
            return self.interval
        return self.interval * (1.0 + self._rng.uniform(-self.jitter, self.jitter))

    def first_delay(self) -> float:
        """How long after ``start`` the first tick comes (a subclass may come sooner)."""
        return self.next_delay()

    def tick(self) -> None:
        """What happens every interval: put this timer's trigger."""
        self.queue.put(Trigger(self.reason, f"every {self.interval:g}s"))

    @property
    def thread_name(self) -> str:
        return f"reconciler-{self.reason}"

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.thread_name} already started")
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        delay = self.first_delay()
        while not self._stop.wait(delay):
            self.tick()
            delay = self.next_delay()


class PollTimer(PeriodicTrigger):
    """Wakes the loop to fetch Git (``--interval``), jittered by default."""

    reason: TriggerReason = "poll"

    def __init__(
        self,
        queue: TriggerQueue,
        interval: float,
        *,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(queue, interval, jitter=jitter, rng=rng)


class DriftTimer(PeriodicTrigger):
    """Asks for a full apply even when Git did not move, to undo changes made by hand."""

    reason: TriggerReason = "drift"


class CatalogFilter(watchfiles.DefaultFilter):
    """watchfiles' defaults (``.git/``, ``*.swp``, ``*~``, ``.#*``, ...) plus more editors'
    temporary files: vim's ``4913`` probe, Emacs ``#autosave#``, ``*.tmp``, GNOME's
    ``.goutputstream-*``, Kate's ``*.kate-swp``."""

    ignore_entity_patterns = (
        *watchfiles.DefaultFilter.ignore_entity_patterns,
        r"^4913$",
        r"^#.*#$",
        r"\.tmp$",
        r"^\.goutputstream-",
        r"\.kate-swp$",
    )


class DirectoryWatcher:
    """Puts a ``watch`` trigger when files under a local catalog directory change.

    For ``reconcile --watch`` while someone edits a catalog checkout. Changes are
    debounced by watchfiles (a burst of saves is one batch) and coalesced by the queue.
    """

    def __init__(
        self,
        queue: TriggerQueue,
        root: str | Path,
        *,
        debounce_ms: int = 1600,
        step_ms: int = 50,
        ready_timeout: float = 5.0,
        force_polling: bool | None = None,
    ) -> None:
        self.queue = queue
        # Resolved, so the absolute paths watchfiles reports can be shown relative to it.
        self.root = Path(root).resolve()
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.ready_timeout = ready_timeout
        self.force_polling = force_polling
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        """Start watching; returns once the watcher is set up (changes from then on count)."""
        if not self.root.is_dir():
            raise UsageError(f"{self.root}: not a directory, cannot watch it")
        if self._thread is not None:
            raise RuntimeError("directory watcher already started")
        self._thread = threading.Thread(target=self._run, name="reconciler-watch", daemon=True)
        self._thread.start()
        self._ready.wait(self.ready_timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        # A short rust timeout makes watchfiles yield an empty batch once it is set
        # up, which is the only readiness signal it gives, and bounds stop latency.
        changes = watchfiles.watch(
            self.root,
            watch_filter=CatalogFilter(),
            debounce=self.debounce_ms,
            step=self.step_ms,
            stop_event=self._stop,
            rust_timeout=100,
            yield_on_timeout=True,
            raise_interrupt=False,
            force_polling=self.force_polling,
        )
        try:
            for batch in changes:
                self._ready.set()
                if batch:
                    self.queue.put(
                        Trigger("watch", describe_changes((p for _, p in batch), self.root))
                    )
        except Exception as e:  # the watcher thread must not die silently
            self.error = e
            log.error("watching %s failed: %s", self.root, e)
        finally:
            self._ready.set()


def describe_changes(paths: Iterable[str], root: Path) -> str:
    """``3 file(s) changed: a.yaml, b.yaml, c.yaml`` (relative to ``root``, at most three named)."""
    shown = sorted({_relative(path, root) for path in paths})
    text = ", ".join(shown[:3])
    if len(shown) > 3:
        text += f" and {len(shown) - 3} more"
    return f"{len(shown)} file(s) changed: {text}"


def _relative(path: str, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return path


SignalHandler = Callable[[int, FrameType | None], None]


def shutdown_handler(queue: TriggerQueue, stop_event: threading.Event) -> SignalHandler:
    """The SIGTERM/SIGINT handler: first signal asks for a clean stop, second one kills.

    The first signal puts a ``shutdown`` trigger and sets ``stop_event``; the loop
    finishes its in-flight pass (and pushes its status) before it sees them. A second
    signal means the operator will not wait: the default action runs.
    """

    received: list[int] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        if received:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        received.append(signum)
        queue.put(Trigger("shutdown", f"received {signal.Signals(signum).name}"))
        stop_event.set()

    return handle


def install_signal_handlers(
    queue: TriggerQueue,
    stop_event: threading.Event,
    signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> Callable[[], None]:
    """Route ``signals`` to ``shutdown_handler``; returns a function restoring the old ones.

    Must be called from the main thread (a Python rule for signal handlers).
    """
    handler = shutdown_handler(queue, stop_event)
    previous = {sig: signal.signal(sig, handler) for sig in signals}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
