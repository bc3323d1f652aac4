"""Shard Leases against the sandbox over HTTP: several replicas, N shard Leases.

Every replica's clocks are one hand-moved clock (the Lease's ``renewTime`` and the
renew deadline alike), and a test moves it past a lease duration instead of
sleeping, so no assertion depends on how fast the machine is. The Lease rules
relied on are the API server's: create fails with 409 AlreadyExists for a taken
name, and an update carrying a stale ``resourceVersion`` fails with 409 Conflict
(https://kubernetes.io/docs/concepts/architecture/leases/,
https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.kube import KubeClient, RetryPolicy
from reconciler.kube.shards import (
    COUNT_LABEL,
    GROUP_LABEL,
    ROLE_LABEL,
    ShardCoordinator,
    replica_lease_name,
    shard_lease_name,
)
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import UsageError
from reconciler.model.shards import ShardDecision, ShardView, decide, fair_share, shard_of

FAST_RETRY = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05, timeout=(2.0, 5.0))
NS = "default"
PREFIX = "reconciler-prod"
TIMINGS = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}


class Clock:
    """One hand-moved clock for every replica: wall time and monotonic time alike."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def client(sandbox: Any) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY) as c:
        yield c


def replica(client: KubeClient, clock: Clock, identity: str, count: int = 3) -> ShardCoordinator:
    return ShardCoordinator(
        client, NS, PREFIX, count, identity, clock=clock, monotonic=clock, **TIMINGS
    )


def settle(replicas: list[ShardCoordinator], rounds: int = 12) -> None:
    """Tick every replica in turn, as their threads would, ``rounds`` times."""
    for _ in range(rounds):
        for r in replicas:
            r.tick()


def holdings(replicas: list[ShardCoordinator]) -> dict[str, list[int]]:
    return {r.identity: sorted(r.held) for r in replicas}


def covered_once(replicas: list[ShardCoordinator], count: int = 3) -> bool:
    shards = [k for r in replicas for k in r.held]
    return sorted(shards) == list(range(count))


# -- the hash and the policy (pure) ----------------------------------------------------


def test_shard_of_is_stable_across_processes_and_hash_seeds() -> None:
    names = [f"app-{i}" for i in range(40)]
    here = [shard_of(n, 3) for n in names]
    code = (
        f"from reconciler.model.shards import shard_of\nprint([shard_of(n, 3) for n in {names!r}])"
    )
    for seed in ("1", "2"):  # Python's own hash() would differ between these
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == str(here)
    # pinned: a change of algorithm would move every instance to another replica
    assert [shard_of(n, 3) for n in ("web", "api", "db")] == [
        int.from_bytes(__import__("hashlib").sha256(n.encode()).digest()[:8], "big") % 3
        for n in ("web", "api", "db")
    ]
    assert set(here) == {0, 1, 2}


def test_shard_of_spreads_names_evenly_and_refuses_no_shards() -> None:
    counts = [0, 0, 0]
    for i in range(3000):
        counts[shard_of(f"instance-{i}", 3)] += 1
    assert all(900 < c < 1100 for c in counts), counts
    with pytest.raises(ValueError, match="at least 1"):
        shard_of("web", 0)


def test_fair_share() -> None:
    assert fair_share(3, 3) == (1, 1)
    assert fair_share(4, 3) == (1, 2)
    assert fair_share(2, 3) == (0, 1)
    assert fair_share(3, 0) == (3, 3)


def simulate(count: int, members: list[str], holders: dict[int, str], rounds: int = 20) -> None:
    """Apply ``decide`` for each member in turn; every decision succeeds at once."""
    for _ in range(rounds):
        for me in members:
            decision = decide(ShardView(count, me, dict(holders), frozenset(members)))
            if decision.release is not None:
                del holders[decision.release]
            if decision.acquire:
                holders[decision.acquire[0]] = me


@pytest.mark.parametrize(("count", "replicas"), [(3, 3), (4, 3), (2, 3), (7, 2), (1, 2)])
def test_policy_converges_to_a_fair_share_and_stays(count: int, replicas: int) -> None:
    members = [f"r{i}" for i in range(replicas)]
    holders: dict[int, str] = {}
    simulate(count, members[:1], holders)  # the first replica starts alone: takes all
    assert holders == dict.fromkeys(range(count), "r0")
    simulate(count, members, holders)  # the others arrive and get their share
    low, high = fair_share(count, replicas)
    per = [sum(1 for h in holders.values() if h == m) for m in members]
    assert sorted(holders) == list(range(count))
    assert all(low <= n <= high for n in per), per
    before = dict(holders)
    simulate(count, members, holders, rounds=5)
    assert holders == before  # balanced: nobody moves any more


def test_policy_takes_one_free_shard_per_tick_and_yields_to_a_starving_replica() -> None:
    alone = decide(ShardView(3, "a", {}, frozenset({"a"})))
    assert alone.release is None and len(alone.acquire) == 3  # tries in order, keeps one
    # b holds nothing while a holds 2 of 4 and c 2: a and c each give one up
    view = ShardView(4, "a", {0: "a", 1: "a", 2: "c", 3: "c"}, frozenset({"a", "b", "c"}))
    assert decide(view) == ShardDecision(release=1)
    # a free shard is left to the starving replica
    view = ShardView(4, "a", {0: "a", 2: "c", 3: "c"}, frozenset({"a", "b", "c"}))
    assert decide(view) == ShardDecision()


# -- the Leases on the sandbox ---------------------------------------------------------


def test_three_replicas_hold_one_shard_each_with_labelled_leases(client: KubeClient) -> None:
    clock = Clock()
    replicas = [replica(client, clock, name) for name in ("a", "b", "c")]
    settle(replicas)
    assert covered_once(replicas)
    assert all(len(r.held) == 1 for r in replicas), holdings(replicas)
    leases = client.list("coordination.k8s.io/v1", "Lease", namespace=NS)
    names = {lease["metadata"]["name"]: lease for lease in leases}
    for k in range(3):
        lease = names[shard_lease_name(PREFIX, k, 3)]
        assert lease["metadata"]["labels"] == {
            GROUP_LABEL: PREFIX,
            ROLE_LABEL: str(k),
            COUNT_LABEL: "3",  # what another split's replicas see as a disagreement
        }
        holder = lease["spec"]["holderIdentity"]
        assert k in next(r.held for r in replicas if r.identity == holder)
    presence = names[replica_lease_name(PREFIX, "a")]
    assert presence["spec"]["holderIdentity"] == "a"
    assert presence["metadata"]["labels"][ROLE_LABEL] == "replica"
    assert presence["metadata"]["labels"][COUNT_LABEL] == "3"
    assert all(r.disagreement is None for r in replicas)


def test_a_killed_replicas_shard_is_taken_over_after_its_lease_expires(
    client: KubeClient,
) -> None:
    clock = Clock()
    a, b, c = (replica(client, clock, name) for name in ("a", "b", "c"))
    settle([a, b, c])
    (dead,) = c.held  # c is killed: it never renews nor releases again
    clock.advance(0.5)  # within the lease duration: the shard is still c's
    settle([a, b], rounds=3)
    assert dead not in a.held | b.held
    clock.advance(0.6)  # c's last renewal is now more than a lease duration ago
    for _ in range(2):  # one tick sees it expired; a tick per replica takes it
        settle([a, b], rounds=1)
    assert covered_once([a, b]), holdings([a, b])
    assert sorted([len(a.held), len(b.held)]) == [1, 2]


def test_presence_leases_of_replicas_gone_long_ago_are_deleted(client: KubeClient) -> None:
    """A Deployment's replica gets a new name after each restart, so a new presence
    Lease: the old ones are deleted once expired for ten lease durations, never sooner,
    and never a living replica's."""
    clock = Clock()
    a, b, c = (replica(client, clock, name) for name in ("a", "b", "c"))
    settle([a, b, c])
    gone = ObjectRef("coordination.k8s.io/v1", "Lease", NS, replica_lease_name(PREFIX, "c"))
    assert client.get(gone) is not None
    clock.advance(5.0)  # c died (never renews); expired, but only recently
    settle([a, b], rounds=2)
    assert client.get(gone) is not None
    clock.advance(6.0)  # now more than ten lease durations (10 x 1 s) past its expiry
    settle([a, b], rounds=2)
    assert client.get(gone) is None
    for alive in ("a", "b"):
        lease = ObjectRef("coordination.k8s.io/v1", "Lease", NS, replica_lease_name(PREFIX, alive))
        assert client.get(lease) is not None
    assert covered_once([a, b])


def test_a_newcomer_gets_its_share_only_between_passes(client: KubeClient) -> None:
    clock = Clock()
    a = replica(client, clock, "a")
    settle([a], rounds=4)
    assert a.held == {0, 1, 2}  # alone: one shard per tick until it holds all
    b = replica(client, clock, "b")
    scope = a.begin_pass()  # a pass over all three runs: a gives nothing up meanwhile
    settle([a, b], rounds=3)
    assert a.held == {0, 1, 2} and not b.held
    assert scope.held == {0, 1, 2}
    a.end_pass()
    settle([a, b], rounds=4)
    assert covered_once([a, b])
    assert sorted([len(a.held), len(b.held)]) == [1, 2]


def test_a_clean_stop_hands_the_shards_over_at_once(client: KubeClient) -> None:
    clock = Clock()
    a, b = replica(client, clock, "a"), replica(client, clock, "b")
    settle([a, b])
    stop = threading.Event()
    stop.set()
    a.run(stop)  # stopped before its first tick: releases what it holds on the way out
    assert not a.held
    settle([b], rounds=3)  # no clock movement: released Leases are free at once
    assert b.held == {0, 1, 2}


def test_a_restarted_replica_with_the_same_identity_takes_its_shards_back(
    client: KubeClient,
) -> None:
    clock = Clock()
    first = replica(client, clock, "pod-0")
    settle([first], rounds=4)
    again = replica(client, clock, "pod-0")  # the same StatefulSet pod, a new process
    settle([again], rounds=4)  # no need to wait for its own Leases to expire
    assert again.held == {0, 1, 2}


def test_shard_count_is_checked(client: KubeClient) -> None:
    clock = Clock()
    with pytest.raises(UsageError, match="--shards must be between 1 and 1000"):
        replica(client, clock, "a", count=0)
    with pytest.raises(UsageError, match="timings"):
        ShardCoordinator(client, NS, PREFIX, 3, "a", lease_duration=1, renew_deadline=2)
