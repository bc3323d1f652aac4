"""Run one step of a Python migration (``needed``, ``run`` or ``undo``) under a deadline.

Third-party code must never take the reconciler down or hold a pass forever: a
step that raises, returns something other than a bool from ``needed``, or is
still running at the deadline fails *that migration only*, with a message for
the status. The step runs on a daemon thread; Python cannot kill a thread, so a
step that hangs past its deadline is abandoned (it keeps running in the
background until it returns, and its result is ignored). Migrations that loop
should consult ``ctx.time_left()``.

Unlike a Job migration, which a daemon pass leaves running and observes again on
a later pass, a Python step is waited for, within the pass, up to its deadline:
it runs in the reconciler's process and cannot be picked up by another pass. So
Python migrations must be short (a check, a patch, a small copy); a long data
move belongs in a Job migration.
"""

from __future__ import annotations

import contextvars
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STEPS = ("needed", "run", "undo")


@dataclass(frozen=True)
class StepOutcome:
    """How one step ended: ``ok`` with its ``value``, or not with a ``message``."""

    step: str
    ok: bool
    value: Any = None
    message: str = ""
    duration: float = 0.0
    timed_out: bool = False


def run_step(
    migration: Any,
    step: str,
    ctx: Any,
    timeout: float,
    *,
    name: str = "",
    clock: Callable[[], float] = time.monotonic,
) -> StepOutcome:
    """Call ``migration.<step>(ctx)``, waiting at most ``timeout`` seconds."""
    if step not in STEPS:
        raise ValueError(f"unknown migration step {step!r} (one of {', '.join(STEPS)})")
    label = f'python migration "{name}"' if name else "python migration"
    method = getattr(migration, step, None)
    if not callable(method):
        return StepOutcome(step, False, message=f"{label} has no {step}(ctx)")
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = method(ctx)
        except BaseException as e:  # reported as this migration's failure, never re-raised
            box["error"] = e
            box["where"] = _origin(e)

    start = clock()
    # run in a copy of the caller's context: the migration's log lines carry the pass ID
    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(target,), name=f"migration-{name or step}", daemon=True
    )
    thread.start()
    thread.join(max(timeout, 0.0))
    duration = clock() - start
    if thread.is_alive():
        return StepOutcome(
            step,
            False,
            message=f"{label}: {step}() did not finish within {timeout:g}s (abandoned)",
            duration=duration,
            timed_out=True,
        )
    if "error" in box:
        e = box["error"]
        where = f" at {box['where']}" if box.get("where") else ""
        return StepOutcome(
            step,
            False,
            message=f"{label}: {step}() raised {type(e).__name__}: {e}{where}",
            duration=duration,
        )
    value = box.get("value")
    if step == "needed" and not isinstance(value, bool):
        return StepOutcome(
            step,
            False,
            value=value,
            message=f"{label}: needed() must return True or False, got {type(value).__name__} "
            f"{value!r}",
            duration=duration,
        )
    return StepOutcome(step, True, value=value, duration=duration)


def _origin(e: BaseException) -> str:
    """``file:line`` of the innermost frame, so the status points at the migration's code."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}"


__all__ = ["STEPS", "StepOutcome", "run_step"]
