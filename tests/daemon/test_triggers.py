"""Triggers: the coalescing queue, timers with jitter, the directory watcher, signals."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from reconciler.daemon.triggers import (
    DirectoryWatcher,
    DriftTimer,
    PollTimer,
    Trigger,
    TriggerQueue,
    describe_changes,
    install_signal_handlers,
    merge_triggers,
    shutdown_handler,
)
from reconciler.model.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]
BOUND = 60.0  # generous upper bound for anything asynchronous; never a timing assertion


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_trigger_validates_its_reason_and_lists_itself() -> None:
    with pytest.raises(ValueError, match="unknown trigger reason 'push'"):
        Trigger("push")  # type: ignore[arg-type]
    trigger = Trigger("poll", "every 60s")
    assert trigger.reasons == {"poll"}
    assert trigger.describe() == "poll: every 60s"


def test_merge_keeps_the_most_demanding_reason() -> None:
    merged = merge_triggers(
        [Trigger("poll", at=1.0), Trigger("webhook", "push", at=3.0), Trigger("drift", at=2.0)]
    )
    assert (merged.reason, merged.at) == ("drift", 1.0)
    assert merged.reasons == {"poll", "webhook", "drift"}
    assert merged.describe() == "drift (also poll, webhook)"
    with pytest.raises(ValueError, match="no triggers to merge"):
        merge_triggers([])


def test_a_burst_while_a_pass_runs_is_one_more_pass() -> None:
    queue = TriggerQueue()
    fresh = [queue.put(Trigger("webhook", f"push {n}")) for n in range(10)]
    assert fresh == [True] + [False] * 9
    assert queue.pending() == 10
    trigger = queue.wait(timeout=0)
    assert trigger is not None and trigger.detail == "push 0"
    assert queue.wait(timeout=0) is None


def test_wait_times_out_and_wakes_on_put_from_another_thread() -> None:
    queue = TriggerQueue()
    assert queue.wait(timeout=0.01) is None
    threading.Timer(0.05, queue.put, args=(Trigger("watch"),)).start()
    trigger = queue.wait(timeout=BOUND)
    assert trigger is not None and trigger.reason == "watch"


def test_shutdown_closes_the_queue_for_good() -> None:
    queue = TriggerQueue()
    queue.put(Trigger("poll"))
    queue.put(Trigger("shutdown", "received SIGTERM"))
    assert queue.closed
    assert queue.put(Trigger("webhook")) is False
    for _ in range(2):
        trigger = queue.wait(timeout=0)
        assert trigger is not None and trigger.reason == "shutdown"
    assert queue.pending() == 0


def test_scheduled_retry_is_delivered_when_due() -> None:
    clock = FakeClock()
    queue = TriggerQueue(clock=clock)
    queue.schedule(Trigger("retry", "web backing off"), delay=30.0)
    assert queue.wait(timeout=0) is None
    clock.now = 30.0
    trigger = queue.wait(timeout=0)
    assert trigger is not None and trigger.reason == "retry"
    assert queue.wait(timeout=0) is None


def test_scheduled_retry_wakes_a_blocked_wait() -> None:
    queue = TriggerQueue()
    queue.schedule(Trigger("retry"), delay=0.05)
    trigger = queue.wait(timeout=BOUND)
    assert trigger is not None and trigger.reason == "retry"


def test_cancel_scheduled() -> None:
    clock = FakeClock()
    queue = TriggerQueue(clock=clock)
    queue.schedule(Trigger("retry"), delay=1.0)
    queue.cancel_scheduled()
    clock.now = 5.0
    assert queue.wait(timeout=0) is None


def test_poll_jitter_stays_within_bounds_and_is_reproducible() -> None:
    timer = PollTimer(TriggerQueue(), 60.0, jitter=0.2, rng=random.Random(3))
    delays = [timer.next_delay() for _ in range(200)]
    assert all(48.0 <= d <= 72.0 for d in delays)
    assert len(set(delays)) > 100  # really jittered
    again = PollTimer(TriggerQueue(), 60.0, jitter=0.2, rng=random.Random(3))
    assert [again.next_delay() for _ in range(200)] == delays
    assert DriftTimer(TriggerQueue(), 600.0).next_delay() == 600.0


@pytest.mark.parametrize(
    ("interval", "jitter", "message"),
    [(0.0, 0.1, "poll interval must be positive"), (1.0, 1.0, r"poll jitter must be in \[0, 1\)")],
)
def test_bad_timer_settings(interval: float, jitter: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PollTimer(TriggerQueue(), interval, jitter=jitter)


@pytest.mark.parametrize(("timer_class", "reason"), [(PollTimer, "poll"), (DriftTimer, "drift")])
def test_timers_put_their_trigger_and_stop(timer_class: type[PollTimer], reason: str) -> None:
    queue = TriggerQueue()
    timer = timer_class(queue, 0.05)
    timer.start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            timer.start()
        trigger = queue.wait(timeout=BOUND)
        assert trigger is not None and trigger.reason == reason
        assert trigger.detail == "every 0.05s"
    finally:
        timer.stop()
    assert timer._thread is not None and not timer._thread.is_alive()


def wait_for_watch(queue: TriggerQueue) -> Trigger:
    trigger = queue.wait(timeout=BOUND)
    assert trigger is not None, "no watch trigger within the bound"
    return trigger


def test_watcher_triggers_on_save_but_not_for_git_or_editor_files(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "apps").mkdir()
    queue = TriggerQueue()
    watcher = DirectoryWatcher(queue, tmp_path, debounce_ms=200, step_ms=20)
    watcher.start()
    try:
        (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (tmp_path / "apps" / ".web.yaml.swp").write_text("swap")
        (tmp_path / "apps" / "web.yaml~").write_text("backup")
        (tmp_path / "apps" / "4913").write_text("")
        (tmp_path / "apps" / "#web.yaml#").write_text("autosave")
        # Long enough for watchfiles to report them if it did not filter them.
        assert queue.wait(timeout=0.5) is None

        (tmp_path / "apps" / "web.yaml").write_text("name: web\n")
        trigger = wait_for_watch(queue)
        assert trigger.reason == "watch"
        assert trigger.detail == "1 file(s) changed: apps/web.yaml"
    finally:
        watcher.stop()
    assert watcher.error is None


def test_watcher_stops_promptly(tmp_path: Path) -> None:
    watcher = DirectoryWatcher(TriggerQueue(), tmp_path)
    watcher.start()
    watcher.stop()
    assert watcher._thread is not None and not watcher._thread.is_alive()


def test_change_descriptions_are_relative_and_short(tmp_path: Path) -> None:
    paths = [str(tmp_path / f"apps/f{n}.yaml") for n in (4, 0, 2, 1, 3)]
    assert describe_changes(paths, tmp_path) == (
        "5 file(s) changed: apps/f0.yaml, apps/f1.yaml, apps/f2.yaml and 2 more"
    )
    assert (
        describe_changes(["/elsewhere/x.yaml"], tmp_path) == "1 file(s) changed: /elsewhere/x.yaml"
    )


def test_watcher_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory, cannot watch it"):
        DirectoryWatcher(TriggerQueue(), tmp_path / "missing").start()


def test_shutdown_handler_asks_for_a_clean_stop() -> None:
    queue, stop = TriggerQueue(), threading.Event()
    shutdown_handler(queue, stop)(signal.SIGTERM, None)
    assert stop.is_set()
    trigger = queue.wait(timeout=0)
    assert trigger is not None
    assert (trigger.reason, trigger.detail) == ("shutdown", "received SIGTERM")


def test_a_signal_after_wait_looked_and_before_it_sleeps_still_wakes_it() -> None:
    """A signal handler runs on the thread inside ``wait``, between any two of its
    bytecodes: also after its look at the pending triggers and before its sleep, where
    a notify wakes nobody. The shutdown must still end that wait at once, not when its
    timeout is over (a real SIGTERM there held tests/daemon/test_triggers.py 30 s)."""
    stop = threading.Event()
    looks = 0

    def clock() -> float:
        nonlocal looks
        looks += 1
        if looks == 3:  # the deadline, the scheduled triggers, then the look at the time
            handler(signal.SIGTERM, None)
        return time.monotonic()

    queue = TriggerQueue(clock=clock)
    handler = shutdown_handler(queue, stop)
    started = time.monotonic()
    trigger = queue.wait(timeout=BOUND)
    assert trigger is not None and trigger.detail == "received SIGTERM"
    assert looks >= 3 and stop.is_set()
    assert time.monotonic() - started < BOUND / 2  # woken by the trigger, not the timeout


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can only be installed from the main thread",
)
def test_installed_handlers_catch_a_real_signal_and_restore() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    queue, stop = TriggerQueue(), threading.Event()
    restore = install_signal_handlers(queue, stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        trigger = queue.wait(timeout=BOUND)
    finally:
        restore()
    assert trigger is not None and trigger.detail == "received SIGTERM"
    assert stop.is_set()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


DAEMON_LIKE = textwrap.dedent(
    """
    import sys, threading, time
    from reconciler.daemon.triggers import TriggerQueue, install_signal_handlers

    queue, stop = TriggerQueue(), threading.Event()
    install_signal_handlers(queue, stop)
    print("ready", flush=True)
    trigger = queue.wait(timeout=30)
    print(trigger.describe() if trigger else "timeout", flush=True)
    if sys.argv[1] == "slow":  # an in-flight pass that outlives the first signal
        time.sleep(30)
    """
)


def run_daemon_like(mode: str, signals: int) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", DAEMON_LIKE, mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        seen = proc.stdout.readline()
        for _ in range(signals - 1):
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=BOUND)
    return code, seen


def test_first_sigterm_lets_the_process_finish_cleanly() -> None:
    assert run_daemon_like("fast", signals=1) == (0, "shutdown: received SIGTERM\n")


def test_second_sigterm_stops_at_once() -> None:
    assert run_daemon_like("slow", signals=2) == (-signal.SIGTERM, "shutdown: received SIGTERM\n")
