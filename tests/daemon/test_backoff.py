"""Backoff records and the per-instance book: doubling, cap, jitter, reset, round trip."""

from __future__ import annotations

import random

import pytest

from reconciler.daemon.backoff import Backoff, BackoffBook, BackoffPolicy


def test_delay_doubles_from_base_up_to_cap() -> None:
    policy = BackoffPolicy(base=10, cap=600)
    delays = [policy.delay(n) for n in range(1, 10)]
    assert delays == [10, 20, 40, 80, 160, 320, 600, 600, 600]


def test_huge_failure_count_stays_at_cap() -> None:
    assert BackoffPolicy(base=1, cap=60).delay(10_000) == 60


def test_failed_records_the_retry_time_and_ready_follows_it() -> None:
    record = Backoff().failed(now=100.0, policy=BackoffPolicy(base=10, cap=600))
    assert record == Backoff(failures=1, delay=10.0, retry_at=110.0)
    assert not record.ready(109.9)
    assert record.ready(110.0)
    assert record.remaining(105.0) == 5.0
    second = record.failed(now=110.0, policy=BackoffPolicy(base=10, cap=600))
    assert (second.failures, second.delay, second.retry_at) == (2, 20.0, 130.0)


def test_succeeded_resets_and_fresh_record_is_ready() -> None:
    record = Backoff().failed(now=0.0).failed(now=10.0)
    assert record.succeeded() == Backoff()
    assert Backoff().ready(0.0)
    assert Backoff().remaining(0.0) == 0.0


def test_jitter_shortens_within_bounds_and_is_deterministic() -> None:
    policy = BackoffPolicy(base=10, cap=100, jitter=0.5)
    first = [policy.delay(n, random.Random(7)) for n in range(1, 8)]
    again = [policy.delay(n, random.Random(7)) for n in range(1, 8)]
    assert first == again
    for n, delay in enumerate(first, start=1):
        full = min(100.0, 10.0 * 2 ** (n - 1))
        assert full * 0.5 <= delay <= full


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": 0}, "0 < base <= cap"),
        ({"base": 10, "cap": 5}, "0 < base <= cap"),
        ({"jitter": 1.0}, "jitter must be in [0, 1)"),
        ({"jitter": -0.1}, "jitter must be in [0, 1)"),
    ],
)
def test_bad_policy_is_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        BackoffPolicy(**kwargs)


def test_record_round_trips_through_dict() -> None:
    record = Backoff(failures=3, delay=40.0, retry_at=1234.5)
    assert record.to_dict() == {"failures": 3, "delay": 40.0, "retryAt": 1234.5}
    assert Backoff.from_dict(record.to_dict()) == record
    assert Backoff.from_dict({}) == Backoff()


@pytest.mark.parametrize(
    "data",
    [{"failures": "many"}, {"failures": -1}, {"delay": -5}, {"retryAt": [1]}],
)
def test_bad_record_is_refused(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid backoff record"):
        Backoff.from_dict(data)


def test_book_skips_instances_still_backing_off() -> None:
    book = BackoffBook(BackoffPolicy(base=10, cap=60))
    book.failed("web", now=0.0)
    book.failed("api", now=0.0)
    book.failed("api", now=10.0)  # second failure: 20 s
    assert book.ready("db", now=0.0)
    assert not book.ready("web", now=5.0)
    assert book.waiting(now=15.0) == ["api"]
    assert book.next_retry_at(now=5.0) == 10.0
    assert book.next_retry_at(now=15.0) == 30.0
    assert book.next_retry_at(now=31.0) is None
    assert list(book) == ["api", "web"] and len(book) == 2


def test_book_success_and_reset_forget_the_failures() -> None:
    book = BackoffBook(BackoffPolicy(base=10, cap=60))
    book.failed("web", now=0.0)
    book.failed("api", now=0.0)
    assert book.succeeded("web") == Backoff()
    book.reset("api")  # its inputs changed: try it at once
    assert book.ready("web", 1.0) and book.ready("api", 1.0)
    assert len(book) == 0
    assert book.failed("api", now=2.0).failures == 1  # counting starts again


def test_book_forgets_instances_that_left_the_catalog() -> None:
    book = BackoffBook()
    for name in ("a", "b", "c"):
        book.failed(name, now=0.0)
    book.forget_except({"b"})
    assert list(book) == ["b"]


def test_book_round_trips_and_drops_clean_records() -> None:
    book = BackoffBook(BackoffPolicy(base=10, cap=60), rng=random.Random(1))
    book.failed("web", now=0.0)
    data = book.to_dict()
    assert list(data) == ["web"]
    loaded = BackoffBook.from_dict({**data, "clean": Backoff().to_dict()})
    assert loaded.get("web") == book.get("web")
    assert list(loaded) == ["web"]
