"""Leader election against the sandbox over HTTP: two candidates, one Lease.

Durations are short (a 1 s Lease, the shortest the API's whole-second field
allows) and every wait polls for a condition with a generous bound, so no test
asserts wall-clock times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reconciler.kube import KubeClient, RetryPolicy
from reconciler.kube.lease import (
    LeaderElector,
    LeaseRecord,
    format_micro_time,
    parse_micro_time,
)
from reconciler.model.errors import KubeError, UsageError

FAST_RETRY = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05, timeout=(2.0, 5.0))
NS = "default"
LEASE = "reconciler-test"
FAST = {"lease_duration": 0.8, "renew_deadline": 0.5, "retry_period": 0.1}


@pytest.fixture
def client(sandbox: Any) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY) as c:
        yield c


def elector(client: KubeClient, identity: str, **kwargs: Any) -> LeaderElector:
    timings = {**FAST, **kwargs}
    return LeaderElector(client, NS, LEASE, identity, **timings)


def read_lease(client: KubeClient) -> dict[str, Any]:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"
    return client.request("GET", path, subject="lease", verb="get").body


def spec(client: KubeClient) -> LeaseRecord:
    return LeaseRecord.from_dict(read_lease(client)["spec"])


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_first_candidate_creates_the_lease_and_leads(client: KubeClient) -> None:
    a, b = elector(client, "a"), elector(client, "b")
    assert a.try_acquire_or_renew()
    assert a.is_leader
    assert not b.try_acquire_or_renew()
    assert not b.is_leader
    assert b.leader == "a"
    record = spec(client)
    assert record.holder == "a"
    assert record.lease_duration_seconds == 1
    assert record.transitions == 0
    assert record.renew_time.endswith("Z") and len(record.renew_time) == 27


def test_leader_renews_and_keeps_its_acquire_time(client: KubeClient) -> None:
    a = elector(client, "a")
    assert a.try_acquire_or_renew()
    first = read_lease(client)
    time.sleep(0.01)
    assert a.try_acquire_or_renew()
    second = read_lease(client)
    assert second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert second["spec"]["renewTime"] > first["spec"]["renewTime"]
    assert second["spec"]["acquireTime"] == first["spec"]["acquireTime"]
    assert second["spec"]["leaseTransitions"] == 0


def test_standby_takes_over_an_expired_lease(client: KubeClient) -> None:
    a, b = elector(client, "a"), elector(client, "b")
    assert a.try_acquire_or_renew()
    # a is "killed": it never renews again; b may take over only once the lease expires
    assert not b.try_acquire_or_renew()
    wait_for(b.try_acquire_or_renew)
    assert b.is_leader
    record = spec(client)
    assert (record.holder, record.transitions) == ("b", 1)
    # the old leader learns it lost on its next step
    assert not a.try_acquire_or_renew()
    assert not a.is_leader


def test_leader_steps_down_when_it_cannot_renew_within_the_deadline(client: KubeClient) -> None:
    now = [100.0]
    a = elector(client, "a", monotonic=lambda: now[0])
    assert a.try_acquire_or_renew()
    assert a.is_leader
    now[0] += 0.6  # past the 0.5 s renew deadline without a successful renewal
    assert not a.is_leader


def test_release_hands_over_at_once(client: KubeClient) -> None:
    a, b = elector(client, "a", lease_duration=60, renew_deadline=30), elector(client, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert not a.is_leader
    assert spec(client).holder == ""
    assert b.try_acquire_or_renew()
    assert spec(client).transitions == 1


def test_release_by_a_non_leader_changes_nothing(client: KubeClient) -> None:
    a, b = elector(client, "a"), elector(client, "b")
    assert a.try_acquire_or_renew()
    before = read_lease(client)
    assert not b.release()
    assert read_lease(client) == before


def test_concurrent_candidates_one_wins(client: KubeClient, sandbox: Any) -> None:
    candidates = [elector(client, name) for name in ("a", "b", "c", "d")]
    barrier = threading.Barrier(len(candidates))
    results: dict[str, bool] = {}

    def campaign(e: LeaderElector) -> None:
        barrier.wait()
        results[e.identity] = e.try_acquire_or_renew()

    for round_ in range(2):  # round 0 races on create, round 1 on replace of a free lease
        if round_ == 1:
            winner = next(e for e in candidates if e.is_leader)
            assert winner.release()
        results.clear()
        threads = [threading.Thread(target=campaign, args=(e,)) for e in candidates]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(results.values()) == 1, results
        leaders = [e.identity for e in candidates if e.is_leader]
        assert leaders == [spec(client).holder]


def test_replace_with_a_stale_resource_version_loses(client: KubeClient) -> None:
    a, b = elector(client, "a"), elector(client, "b")
    assert a.try_acquire_or_renew()
    stale = read_lease(client)
    assert a.try_acquire_or_renew()  # moves the resourceVersion on
    taken = LeaseRecord(holder="b", lease_duration_seconds=1, renew_time=format_micro_time(0))
    assert not b._replace(stale, taken)
    assert spec(client).holder == "a"


def test_run_loop_elects_one_and_fails_over_when_the_leader_dies(client: KubeClient) -> None:
    events: list[str] = []
    # roomier than FAST so a loaded CI machine does not make the leader miss its deadline
    roomy = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.1}
    a = elector(client, "a", release_on_cancel=False, **roomy)
    b = elector(client, "b", **roomy)
    stop_a, stop_b = threading.Event(), threading.Event()
    thread_a = a.start(stop_a, lambda: events.append("a+"), lambda: events.append("a-"))
    wait_for(lambda: a.is_leader)
    thread_b = b.start(stop_b, lambda: events.append("b+"), lambda: events.append("b-"))
    time.sleep(0.3)  # several renew periods: a keeps renewing, b stays standby
    assert a.is_leader and not b.is_leader
    stop_a.set()  # killed: the loop ends without releasing the lease
    thread_a.join(timeout=5)
    wait_for(lambda: b.is_leader)
    assert spec(client).holder == "b"
    stop_b.set()
    thread_b.join(timeout=5)
    assert events == ["a+", "a-", "b+", "b-"]
    assert spec(client).holder == ""  # b released on its clean stop


def test_run_loop_release_hands_over_without_waiting_for_expiry(client: KubeClient) -> None:
    slow = {"lease_duration": 60, "renew_deadline": 30, "retry_period": 0.05}
    a, b = elector(client, "a", **slow), elector(client, "b", **slow)
    stop_a, stop_b = threading.Event(), threading.Event()
    thread_a = a.start(stop_a)
    wait_for(lambda: a.is_leader)
    thread_b = b.start(stop_b)
    stop_a.set()
    thread_a.join(timeout=5)
    wait_for(lambda: b.is_leader)  # far sooner than the 60 s lease
    stop_b.set()
    thread_b.join(timeout=5)


def test_a_failing_callback_does_not_kill_the_election(client: KubeClient) -> None:
    a = elector(client, "a")
    stop = threading.Event()

    def boom() -> None:
        raise RuntimeError("callback bug")

    thread = a.start(stop, boom, boom)
    wait_for(lambda: a.is_leader)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_forbidden_or_broken_api_raises_a_kube_error(client: KubeClient) -> None:
    e = LeaderElector(client, "missing-ns", LEASE, "a", **FAST)
    with pytest.raises(KubeError, match="Lease/missing-ns/reconciler-test"):
        e.try_acquire_or_renew()
    stop = threading.Event()
    thread = e.start(stop)  # the loop logs the failure and keeps campaigning
    time.sleep(0.2)
    assert not e.is_leader and thread.is_alive()
    stop.set()
    thread.join(timeout=5)


@pytest.mark.parametrize(
    ("identity", "timings"),
    [
        ("", {}),
        ("a", {"lease_duration": 5, "renew_deadline": 10}),
        ("a", {"renew_deadline": 1, "retry_period": 2}),
        ("a", {"retry_period": 0}),
    ],
)
def test_bad_settings_are_usage_errors(
    client: KubeClient, identity: str, timings: dict[str, float]
) -> None:
    with pytest.raises(UsageError):
        LeaderElector(client, NS, LEASE, identity, **timings)


def test_micro_time_round_trip() -> None:
    assert format_micro_time(1767225600.0) == "2026-01-01T00:00:00.000000Z"
    assert parse_micro_time("2026-01-01T00:00:00.000000Z") == 1767225600.0
    assert parse_micro_time("2026-01-01T00:00:00Z") == 1767225600.0
    assert parse_micro_time("yesterday") is None
    assert parse_micro_time("") is None


def test_a_lease_with_an_unreadable_renew_time_expires_by_observation(
    client: KubeClient,
) -> None:
    now = [0.0]
    a = elector(client, "a")
    b = elector(client, "b", monotonic=lambda: now[0])
    assert a.try_acquire_or_renew()
    lease = read_lease(client)
    lease["spec"]["renewTime"] = "2999-01-01T00:00:00.000000Z"  # a holder clock far ahead
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"
    client.request("PUT", path, subject="lease", verb="update", body=lease)
    assert not b.try_acquire_or_renew()
    now[0] += 1.0  # b has watched the same record for a whole lease duration
    assert b.try_acquire_or_renew()
