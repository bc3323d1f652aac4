"""Shard Leases: which replica of ``reconciler run --shards N`` holds which shards.

Kubernetes is the only coordination store. Each of the ``N`` shards has one
``coordination.k8s.io/v1`` Lease (``<prefix>-shard-<k>-of-<N>``), taken, renewed
and released with the same rules as the leader Lease (:class:`LeaderElector`:
optimistic concurrency on resourceVersion, a renew deadline shorter than the
lease duration, release on a clean stop). Each replica also renews a presence
Lease of its own (``<prefix>-replica-<digest of identity>``): a replica that holds
no shard yet is invisible in the shard Leases, and the others must know it is
there to hand it its share. All of them carry the label
``reconciler.io/shard-group=<prefix>``, so one list request per tick shows the
whole picture.

Every ``retry_period`` :meth:`ShardCoordinator.tick` renews the presence Lease and
every held shard, lists the group, and applies :func:`reconciler.model.shards.decide`:
take one free or expired shard, give one up, or do nothing. A shard is given up
only between passes (:meth:`begin_pass`/:meth:`end_pass`), so a replica never
applies instances of a shard another replica has just taken. A shard lost because
its renewals failed (the API server away for ``renew_deadline``) is dropped at
once; a pass already running finishes, as with leader election.

The daemon's service (``reconciler.daemon.service``) runs :meth:`run` on a thread
and passes :meth:`begin_pass`'s :class:`ShardScope` to each pass.

Every replica must be given the same ``--shards``. One that splits the cluster
differently (2 where the others say 3) counts as a member of the others' split
and they of its, so each takes a share of a split nobody completes: a shard stays
without an owner while every probe is green. The same list shows it: a current
Lease of another split (``-of-<M>``), or a presence Lease labelled with another
count (``reconciler.io/shards``). :attr:`ShardCoordinator.disagreement` then says
who splits how; the service logs it, sets ``reconciler_shards_disagreement`` and
answers ``/readyz`` 503 until every replica agrees.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
import re
import threading
import time
from collections.abc import Callable

from reconciler.kube.client import JsonObject, KubeClient
from reconciler.kube.lease import JITTER, LEASE_API_VERSION, LeaderElector, LeaseRecord
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError, UsageError
from reconciler.model.shards import ShardScope, ShardView, decide

log = logging.getLogger(__name__)

GROUP_LABEL = "reconciler.io/shard-group"
ROLE_LABEL = "reconciler.io/shard"  # the shard number, or "replica" for a presence Lease
REPLICA_ROLE = "replica"
COUNT_LABEL = "reconciler.io/shards"  # the --shards of the replica that created the Lease
MAX_SHARDS = 1000  # a Lease per shard, renewed every few seconds: far more is a mistake


def shard_lease_name(prefix: str, shard: int, count: int) -> str:
    """The Lease of one shard; the count is in the name so a different split never
    reads another split's Leases as its own."""
    return f"{prefix}-shard-{shard}-of-{count}"


def replica_lease_name(prefix: str, identity: str) -> str:
    """The presence Lease of one replica (identities may hold characters a name may not)."""
    return f"{prefix}-replica-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def group_value(prefix: str) -> str:
    """``prefix`` as a label value (at most 63 characters), else a digest of it."""
    if len(prefix) <= 63:
        return prefix
    return f"group-{hashlib.sha256(prefix.encode()).hexdigest()[:40]}"


def check_shard_count(count: int) -> int:
    if not 1 <= count <= MAX_SHARDS:
        raise UsageError(f"--shards must be between 1 and {MAX_SHARDS} (got {count})")
    return count


class ShardCoordinator:
    """One replica's shard Leases; thread-safe between its thread and the daemon's loop."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        prefix: str,
        count: int,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        release_on_cancel: bool = True,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.prefix = prefix
        self.count = check_shard_count(count)
        self.identity = identity
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        group = group_value(prefix)

        def elector(name: str, role: str) -> LeaderElector:
            return LeaderElector(
                client,
                namespace,
                name,
                identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                clock=clock,
                monotonic=monotonic,
                labels={GROUP_LABEL: group, ROLE_LABEL: role, COUNT_LABEL: str(count)},
            )

        self.electors = [elector(shard_lease_name(prefix, k, count), str(k)) for k in range(count)]
        self.presence = elector(replica_lease_name(prefix, identity), REPLICA_ROLE)
        self._selector = f"{GROUP_LABEL}={group}"
        self._lock = threading.Lock()
        self._mine: set[int] = set()  # shards we renew; a held one is also still current
        self._busy = False  # a pass runs: no shard is given up until it ends
        self._split = re.compile(rf"{re.escape(prefix)}-shard-\d+-of-(\d+)")
        self._disagreement: str | None = None

    # -- what the daemon asks ---------------------------------------------------------

    @property
    def held(self) -> frozenset[int]:
        """The shards we hold now (renewed within the renew deadline)."""
        with self._lock:
            mine = set(self._mine)
        return frozenset(k for k in mine if self.electors[k].is_leader)

    @property
    def disagreement(self) -> str | None:
        """What the last look at the Leases showed of replicas with another ``--shards``
        (None: every live replica splits the cluster as this one does)."""
        with self._lock:
            return self._disagreement

    def begin_pass(self) -> ShardScope:
        """The shards a pass may reconcile; none is given up until :meth:`end_pass`."""
        with self._lock:
            self._busy = True
        return ShardScope(self.count, self.held)

    def end_pass(self) -> None:
        with self._lock:
            self._busy = False

    # -- one step ---------------------------------------------------------------------

    def tick(self) -> bool:
        """Renew, look, then acquire or release at most one shard; True if the set changed."""
        before = self.held
        self._step(self.presence)
        with self._lock:
            mine = sorted(self._mine)
        for k in mine:
            if not self._step(self.electors[k]) and not self.electors[k].is_leader:
                log.warning("%s: lost shard %d (%s)", self.identity, k, self.electors[k].subject)
                self._forget(k)
        view = self._view()
        if view is not None:
            decision = decide(view)
            if decision.release is not None:
                self._give_up(decision.release)
            for k in decision.acquire:
                if self._step(self.electors[k]):
                    # debug: the service logs the whole set held after each change
                    log.debug("%s: holds shard %d of %d", self.identity, k, self.count)
                    with self._lock:
                        self._mine.add(k)
                    break
        return self.held != before

    def run(
        self,
        stop: threading.Event,
        on_change: Callable[[], None] | None = None,
        on_disagreement: Callable[[str | None], None] | None = None,
    ) -> None:
        """Tick every ``retry_period`` (jittered) until ``stop``; then release everything.

        ``on_change`` runs on this thread after a tick that changed the held shards,
        ``on_disagreement`` after one that changed :attr:`disagreement` (with it);
        they should only signal the daemon's loop or its probes.
        """
        seen: str | None = None
        while not stop.is_set():
            if self.tick() and on_change is not None:
                _callback(on_change, "on_change")
            now = self.disagreement
            if now != seen and on_disagreement is not None:
                _callback(functools.partial(on_disagreement, now), "on_disagreement")
            seen = now
            stop.wait(self.retry_period * (1 + random.uniform(0, JITTER)))
        if self.release_on_cancel:
            self.release_all()

    def release_all(self) -> None:
        """Give every shard and the presence Lease up (a clean stop: others take over at once)."""
        with self._lock:
            mine, self._mine = sorted(self._mine), set()
        for k in mine:
            self.electors[k].release()
        self.presence.release()

    # -- internals --------------------------------------------------------------------

    def _step(self, elector: LeaderElector) -> bool:
        try:
            return elector.try_acquire_or_renew()
        except KubeError as e:
            log.warning("%s: shard lease step failed: %s", elector.subject, e)
            return False

    def _forget(self, shard: int) -> None:
        with self._lock:
            self._mine.discard(shard)

    def _give_up(self, shard: int) -> None:
        """Release ``shard`` for a replica with fewer, unless a pass may be applying it."""
        with self._lock:
            if self._busy or shard not in self._mine:
                return
            self._mine.discard(shard)  # the next pass no longer sees it
        log.info("%s: hands shard %d over (more than its share)", self.identity, shard)
        self.electors[shard].release()

    def _view(self) -> ShardView | None:
        """Who holds which shard and who is alive, from one list of the group's Leases."""
        try:
            leases = self.client.list(
                LEASE_API_VERSION, "Lease", namespace=self.namespace, label_selector=self._selector
            )
        except KubeError as e:
            log.warning("%s: cannot list the shard Leases: %s", self.identity, e)
            return None
        now = self._clock()
        with self._lock:
            mine = set(self._mine)
        names = {e.name: k for k, e in enumerate(self.electors)}
        holders: dict[int, str] = {}
        members: set[str] = set()
        others: dict[str, str] = {}  # identity -> the --shards its live Leases say
        for lease in leases:
            name = str((lease.get("metadata") or {}).get("name") or "")
            record = LeaseRecord.from_dict(lease.get("spec") or {})
            if not _current(record, now):
                continue
            split = self._other_split(lease, name)
            if split is not None and record.holder != self.identity:
                others.setdefault(record.holder, split)
            if name in names:
                k = names[name]
                if record.holder == self.identity and k not in mine:
                    continue  # ours from an earlier life of this identity: free to take back
                holders[k] = record.holder
            elif (lease.get("metadata") or {}).get("labels", {}).get(ROLE_LABEL) == REPLICA_ROLE:
                members.add(record.holder)
        self._collect_presence(leases, now)
        self._note_disagreement(others)
        return ShardView(self.count, self.identity, holders, frozenset(members))

    def _other_split(self, lease: JsonObject, name: str) -> str | None:
        """The ``--shards`` of a Lease of the group when it is not ours, else None."""
        match = self._split.fullmatch(name)
        if match is not None:
            return match.group(1) if int(match.group(1)) != self.count else None
        labels = (lease.get("metadata") or {}).get("labels") or {}
        count = str(labels.get(COUNT_LABEL) or "")
        return count if count and count != str(self.count) else None

    def _note_disagreement(self, others: dict[str, str]) -> None:
        """Remember (and log, when it changes) replicas that split into another count."""
        message = None
        if others:
            said = ", ".join(f"{who} says {n}" for who, n in sorted(others.items())[:5])
            more = f" and {len(others) - 5} more" if len(others) > 5 else ""
            message = (
                f"replicas disagree on --shards: {self.identity} says {self.count}, "
                f"{said}{more}; some shards may have no owner until every replica is "
                "given the same --shards"
            )
        with self._lock:
            before, self._disagreement = self._disagreement, message
        if message != before:
            if message is not None:
                log.warning("%s", message)
            else:
                log.info("%s: every replica now says --shards %d", self.identity, self.count)

    def _collect_presence(self, leases: list[JsonObject], now: float) -> None:
        """Delete presence Leases of replicas gone for ``PRESENCE_GC_FACTOR`` lease durations.

        A replica of a Deployment has a new name (so a new presence Lease) after every
        restart; without this its old Leases would stay forever. The delete carries
        the Lease's uid and resourceVersion as preconditions, so a replica that came
        back and renewed meanwhile keeps its Lease
        (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/).
        Shard Leases are never deleted: their names are fixed and reused.
        """
        for lease in leases:
            meta = lease.get("metadata") or {}
            if (meta.get("labels") or {}).get(ROLE_LABEL) != REPLICA_ROLE:
                continue
            record = LeaseRecord.from_dict(lease.get("spec") or {})
            renewed = record.expires_at()
            if record.holder == self.identity or renewed is None:
                continue
            if now - renewed < PRESENCE_GC_FACTOR * max(record.lease_duration_seconds, 1):
                continue
            ref = ObjectRef(LEASE_API_VERSION, "Lease", self.namespace, str(meta.get("name")))
            try:
                self.client.delete(
                    ref,
                    uid=str(meta.get("uid") or ""),
                    resource_version=str(meta.get("resourceVersion") or ""),
                )
                log.info(
                    "%s: deleted the presence Lease of a replica gone since %s",
                    self.identity,
                    record.renew_time,
                )
            except KubeError as e:  # a race with its owner, or no delete right: harmless
                log.debug("%s: presence Lease %s kept: %s", self.identity, ref.name, e)


def _callback(call: Callable[[], None], what: str) -> None:
    try:
        call()
    except Exception:  # a failing callback must not end the Leases' renewal
        log.exception("shard %s callback failed", what)


# a presence Lease expired this many lease durations ago belongs to a replica that is gone
PRESENCE_GC_FACTOR = 10


def _current(record: LeaseRecord, now: float) -> bool:
    """A holder whose Lease has not expired (an unreadable renew time counts as current:
    the elector's own observed-time rule frees it)."""
    if not record.holder:
        return False
    expires = record.expires_at()
    return expires is None or expires >= now
