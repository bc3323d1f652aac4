"""Exponential backoff for failing instances, as immutable records.

A failing instance (apply refused, health check timed out, migration failed) must
not be hammered on every pass: the daemon's loop asks ``BackoffBook.ready`` before
working on an instance and skips the ones still waiting, unless their inputs
changed (a new commit, a new desired version), in which case the loop calls
``BackoffBook.reset`` so a fix is tried at once. The loop also asks
``BackoffBook.next_retry_at`` to schedule a ``retry`` trigger.

Everything here is pure: time comes in as ``now`` (seconds, any monotonic origin)
and randomness from an injected ``random.Random``, so tests need no sleeping.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_BASE = 10.0
DEFAULT_CAP = 600.0


@dataclass(frozen=True)
class BackoffPolicy:
    """How long to wait after the Nth consecutive failure.

    The delay doubles from ``base`` up to ``cap``. With ``jitter`` (a fraction in
    [0, 1)) the delay is shortened by a random part of itself, so replicas and
    instances that failed together do not retry in lockstep; it never exceeds ``cap``.
    """

    base: float = DEFAULT_BASE
    cap: float = DEFAULT_CAP
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base:
            raise ValueError(f"backoff needs 0 < base <= cap, got base={self.base} cap={self.cap}")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after ``failures`` consecutive failures (``failures >= 1``)."""
        # Cap the exponent first: 2 ** 1000 overflows a float multiplication.
        exponent = min(max(failures - 1, 0), 62)
        full = min(self.cap, self.base * float(2**exponent))
        if self.jitter and rng is not None:
            return full * (1.0 - self.jitter * rng.random())
        return full


DEFAULT_POLICY = BackoffPolicy()


@dataclass(frozen=True)
class Backoff:
    """One instance's backoff: consecutive failures and when it may be tried again."""

    failures: int = 0
    delay: float = 0.0  # the wait chosen after the last failure, for logs and status
    retry_at: float = 0.0  # on the caller's clock; 0 means "now"

    def failed(
        self,
        now: float,
        policy: BackoffPolicy = DEFAULT_POLICY,
        rng: random.Random | None = None,
    ) -> Backoff:
        failures = self.failures + 1
        delay = policy.delay(failures, rng)
        return Backoff(failures=failures, delay=delay, retry_at=now + delay)

    def succeeded(self) -> Backoff:
        return Backoff()

    def ready(self, now: float) -> bool:
        return self.failures == 0 or now >= self.retry_at

    def remaining(self, now: float) -> float:
        """Seconds left to wait (0 when ready)."""
        return 0.0 if self.ready(now) else self.retry_at - now

    def to_dict(self) -> dict[str, Any]:
        return {"failures": self.failures, "delay": self.delay, "retryAt": self.retry_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Backoff:
        try:
            record = cls(
                failures=int(data.get("failures", 0)),
                delay=float(data.get("delay", 0.0)),
                retry_at=float(data.get("retryAt", 0.0)),
            )
        except (TypeError, ValueError) as e:
            raise ValueError(f"invalid backoff record {dict(data)!r}: {e}") from e
        if record.failures < 0 or record.delay < 0:
            raise ValueError(f"invalid backoff record {dict(data)!r}: negative values")
        return record


class BackoffBook:
    """The backoff of every instance of one cluster, keyed by instance name.

    Instances that never failed (or succeeded since) are not stored, so the book
    stays small and ``to_dict`` only lists the ones that are backing off.
    """

    def __init__(
        self,
        policy: BackoffPolicy = DEFAULT_POLICY,
        rng: random.Random | None = None,
        records: Mapping[str, Backoff] | None = None,
    ) -> None:
        self.policy = policy
        self._rng = rng
        self._records: dict[str, Backoff] = {
            name: record for name, record in (records or {}).items() if record.failures
        }

    def get(self, instance: str) -> Backoff:
        return self._records.get(instance, Backoff())

    def failed(self, instance: str, now: float) -> Backoff:
        record = self.get(instance).failed(now, self.policy, self._rng)
        self._records[instance] = record
        return record

    def succeeded(self, instance: str) -> Backoff:
        self._records.pop(instance, None)
        return Backoff()

    def reset(self, instance: str) -> None:
        """Forget the failures: the instance's inputs changed, so try it at once."""
        self._records.pop(instance, None)

    def ready(self, instance: str, now: float) -> bool:
        return self.get(instance).ready(now)

    def waiting(self, now: float) -> list[str]:
        """Instances still backing off at ``now``, sorted by name."""
        return sorted(name for name, record in self._records.items() if not record.ready(now))

    def next_retry_at(self, now: float) -> float | None:
        """When the earliest waiting instance becomes ready, or None if none waits."""
        pending = [r.retry_at for r in self._records.values() if not r.ready(now)]
        return min(pending) if pending else None

    def forget_except(self, instances: set[str]) -> None:
        """Drop records of instances that left the catalog."""
        for name in [n for n in self._records if n not in instances]:
            del self._records[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def to_dict(self) -> dict[str, Any]:
        return {name: self._records[name].to_dict() for name in sorted(self._records)}

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        policy: BackoffPolicy = DEFAULT_POLICY,
        rng: random.Random | None = None,
    ) -> BackoffBook:
        records = {str(name): Backoff.from_dict(value) for name, value in data.items()}
        return cls(policy, rng, records)
