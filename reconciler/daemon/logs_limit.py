"""Rate-limited warnings for things anyone on the network can cause.

A webhook endpoint is reachable by whoever can reach the Ingress. Logging a
WARNING per rejected request lets anyone fill the logs (and the log bill), so
the first rejection of each kind is logged at once and the rest are counted and
summarised once per interval. The counts are still exact in
``reconciler_webhooks_total{result="rejected"}``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

SUMMARY_INTERVAL = 60.0


class RateLimitedLog:
    """Log the first occurrence of each key, then one summary line per interval."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        interval: float = SUMMARY_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._what = what
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._suppressed: Counter[str] = Counter()
        self._window_start = clock()

    def note(self, key: str, detail: str) -> None:
        """Record one occurrence; logs it only if it is the first of its key in the window."""
        with self._lock:
            now = self._clock()
            if now - self._window_start >= self._interval:
                self._flush(now)
            if key not in self._seen:
                self._seen.add(key)
                self._log.warning(
                    "%s %s: %s (similar ones are summarised)", self._what, key, detail
                )
            else:
                self._suppressed[key] += 1

    def _flush(self, now: float) -> None:
        if self._suppressed:
            total = sum(self._suppressed.values())
            parts = ", ".join(f"{k}: {n}" for k, n in sorted(self._suppressed.items()))
            self._log.warning(
                "%d more %s in the last %.0fs (%s)",
                total,
                self._what,
                now - self._window_start,
                parts,
            )
        self._suppressed.clear()
        self._seen.clear()
        self._window_start = now
