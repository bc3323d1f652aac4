"""Shards: which replica reconciles which instance when ``reconciler run --shards N``.

A cluster with more instances than one process serves is split into ``N`` shards
by a stable hash of the instance name (:func:`shard_of`); each replica holds the
Leases of some shards (``reconciler.kube.shards``) and reconciles only the
instances of those (:class:`ShardScope`). The hash is SHA-256, not Python's
``hash()``: that one is salted per process, and every replica (and every restart)
must put an instance in the same shard.

What is not per instance has exactly one owner, so that two replicas never do it
twice:

- an instance's inventory ConfigMap, migration ledger and status record are its
  own, so only its shard writes them;
- an instance deleted from Git is pruned by the shard its *name* hashes to (the
  name is all that is left of it, and it is the same hash that owned it before);
- the mass-prune guard counts every removed instance of the cluster, in every
  replica alike, so all shards refuse or allow the same commit;
- ``global`` migrations (once per cluster) run only in the replica holding shard 0
  (:data:`GLOBAL_SHARD`), which always exists whatever ``N`` is; other shards wait
  for them in the cluster's migration ledger before upgrading.

:func:`decide` is the balancing policy, a pure function of what the Leases show,
so it is tested without a cluster and every replica applies the same rule.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass

GLOBAL_SHARD = 0  # owns what is cluster-wide: global migrations


def shard_of(name: str, count: int) -> int:
    """The shard of instance ``name`` among ``count``: the same in every process."""
    if count < 1:
        raise ValueError(f"a shard count must be at least 1 (got {count})")
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


@dataclass(frozen=True)
class ShardScope:
    """The shards one replica holds for one pass; it reconciles their instances only."""

    count: int
    held: frozenset[int]

    def owns(self, instance: str) -> bool:
        return shard_of(instance, self.count) in self.held

    @property
    def owns_global(self) -> bool:
        """True for the one replica that runs cluster-wide work (global migrations)."""
        return GLOBAL_SHARD in self.held

    def describe(self) -> str:
        held = ", ".join(str(s) for s in sorted(self.held)) or "none"
        return f"shard(s) {held} of {self.count}"


@dataclass(frozen=True)
class ShardView:
    """What one replica read from the Leases in one tick.

    ``holders``: shard -> identity of the replica whose Lease on it has not
    expired (a free or expired shard is absent). ``members``: identities whose
    presence Lease has not expired (a replica holding no shard is only seen there).
    """

    count: int
    me: str
    holders: Mapping[int, str]
    members: frozenset[str]


@dataclass(frozen=True)
class ShardDecision:
    """At most one change per tick, so replicas converge without stampeding."""

    release: int | None = None
    acquire: tuple[int, ...] = ()  # free shards to try, best first (the first one won is kept)


def fair_share(count: int, alive: int) -> tuple[int, int]:
    """(floor, ceil) of ``count / alive``: every replica should hold between the two."""
    alive = max(1, alive)
    return count // alive, math.ceil(count / alive)


def decide(view: ShardView) -> ShardDecision:
    """Release one shard, try to acquire one, or do nothing.

    Every live replica should hold between ``floor(N/alive)`` and ``ceil(N/alive)``
    shards. A replica above the ceiling, or above the floor while another live
    replica is below it (one that just started, say), releases its highest shard.
    A replica below the ceiling takes a free or expired shard, except that while
    another replica is below the floor it stops at the floor, so the starving one
    gets the shard. A replica that dies stops renewing: its Leases expire, its
    presence Lease too, the others' share grows and they take its shards over.
    """
    alive = set(view.members) | set(view.holders.values()) | {view.me}
    low, high = fair_share(view.count, len(alive))
    held_by: dict[str, int] = dict.fromkeys(alive, 0)
    for holder in view.holders.values():
        held_by[holder] += 1
    mine = sorted(s for s, holder in view.holders.items() if holder == view.me)
    starving = any(n < low for who, n in held_by.items() if who != view.me)
    if len(mine) > high or (starving and len(mine) > low):
        return ShardDecision(release=mine[-1])
    free = [s for s in range(view.count) if s not in view.holders]
    if not free or len(mine) >= high or (starving and len(mine) >= low):
        return ShardDecision()
    # start from a place that depends on who we are, so racing replicas spread out
    start = shard_of(view.me, view.count)
    ordered = sorted(free, key=lambda s: (s - start) % view.count)
    return ShardDecision(acquire=tuple(ordered))
