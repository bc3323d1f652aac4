"""Leader election on a ``coordination.k8s.io/v1`` Lease, so only one replica reconciles.

``reconciler run --leader-elect`` runs two or more replicas for availability; the
daemon builds one :class:`LeaderElector` and starts :meth:`LeaderElector.run` on
a background thread, and only the replica whose elector :attr:`is_leader`
applies anything. The protocol is client-go's ``leaderelection`` package:

- one step (:meth:`try_acquire_or_renew`) reads the Lease, creates it when it is
  missing, renews it when we hold it, takes it over when it is free or expired,
  and writes with the resourceVersion it read, so of two racing candidates the
  API server accepts one and answers the other 409 Conflict;
- the leader renews every ``retry_period`` and steps down when it has not renewed
  for ``renew_deadline``, which is shorter than ``lease_duration``: it stops
  acting before any other replica may take the expired Lease;
- on a clean shutdown :meth:`release` empties ``holderIdentity`` so a standby
  takes over at once instead of waiting for the Lease to expire
  (client-go's ``ReleaseOnCancel``).

A Lease is expired when ``renewTime + leaseDurationSeconds`` is in the past (wall
clock, so replicas need roughly synchronised clocks, as on any cluster with NTP)
or when we have watched the same record unchanged for that long (client-go's
observed-time rule, which also frees a Lease whose holder's clock runs ahead).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconciler.kube.client import KubeClient
from reconciler.kube.discovery import segment
from reconciler.kube.errors import KubeApiError, NotFoundError
from reconciler.model.errors import KubeError, UsageError

log = logging.getLogger(__name__)

LEASE_API_VERSION = "coordination.k8s.io/v1"
MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
JITTER = 0.2  # candidates spread their retries so they do not hit the server in step

Callback = Callable[[], None]


def format_micro_time(seconds: float) -> str:
    """A ``metav1.MicroTime`` string (``2026-01-01T00:00:00.000000Z``) for a Unix time."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime(MICRO_TIME_FORMAT)


def parse_micro_time(text: str) -> float | None:
    """The Unix time of an RFC 3339 timestamp (with or without fraction); None if unreadable."""
    if not text:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def default_identity() -> str:
    """A candidate identity unique per process: the pod name (or host name) and a random suffix."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "reconciler"
    return f"{base}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseRecord:
    """The ``spec`` of a Lease as leader election reads and writes it."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> LeaseRecord:
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=_int(spec.get("leaseDurationSeconds")),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=_int(spec.get("leaseTransitions")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }

    def expires_at(self) -> float | None:
        """Unix time after which the holder no longer owns the Lease (None: unreadable)."""
        renewed = parse_micro_time(self.renew_time)
        return None if renewed is None else renewed + self.lease_duration_seconds


class LeaderElector:
    """One candidate for one Lease; thread-safe to query from the daemon's loop."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        release_on_cancel: bool = True,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        check_timings(identity, lease_duration, renew_deadline, retry_period)
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.labels = dict(labels or {})  # set on create, so a group of Leases lists as one
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._observed = LeaseRecord()
        self._observed_rv = ""
        self._observed_at = monotonic()
        self._renewed_at: float | None = None  # monotonic time of our last successful write

    @property
    def subject(self) -> str:
        return f"Lease/{self.namespace}/{self.name}"

    @property
    def is_leader(self) -> bool:
        """True while we hold the Lease and renewed it less than ``renew_deadline`` ago."""
        with self._lock:
            return (
                self._renewed_at is not None
                and self._observed.holder == self.identity
                and self._monotonic() - self._renewed_at < self.renew_deadline
            )

    @property
    def leader(self) -> str:
        """The holder identity we last saw on the Lease ("" when free or never read)."""
        with self._lock:
            return self._observed.holder

    # -- one election step ----------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """Read the Lease and create, renew or take it over when allowed; True if we lead.

        Losing a race (409 Conflict on create or replace) returns False; any other API
        failure raises ``KubeError``.
        """
        lease = self._read()
        now = self._clock()
        if lease is None:
            return self._create(now)
        current = LeaseRecord.from_dict(lease.get("spec") or {})
        self._observe(current, str((lease.get("metadata") or {}).get("resourceVersion") or ""))
        if current.holder and current.holder != self.identity and not self._expired(current, now):
            self._lose()
            return False
        if current.holder == self.identity:
            wanted = replace(current, renew_time=format_micro_time(now))
        else:
            wanted = replace(self._fresh_record(now), transitions=current.transitions + 1)
        wanted = replace(wanted, lease_duration_seconds=self._duration_seconds())
        won = self._replace(lease, wanted)
        if won and current.holder != self.identity:
            log.info("%s: %s took over from %r", self.subject, self.identity, current.holder)
        return won

    def release(self) -> bool:
        """Give the Lease up so another candidate takes it at once; True if released.

        Never raises: a failed release only means the standby waits for expiry.
        """
        with self._lock:
            held = self._renewed_at is not None
        if not held:
            return False
        try:
            lease = self._read()
            current = LeaseRecord.from_dict((lease or {}).get("spec") or {})
            if lease is None or current.holder != self.identity:
                self._lose()
                return False
            now = format_micro_time(self._clock())
            released = replace(
                current, holder="", lease_duration_seconds=1, acquire_time=now, renew_time=now
            )
            ok = self._replace(lease, released)
        except KubeError as e:
            log.warning("%s: could not release the lease: %s", self.subject, e)
            return False
        self._lose()
        if ok:
            log.info("%s: released by %s", self.subject, self.identity)
        return ok

    # -- the background loop --------------------------------------------------------

    def run(
        self,
        stop: threading.Event,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
    ) -> None:
        """Campaign, lead, and campaign again after losing the Lease, until ``stop`` is set.

        Callbacks run on this thread and should only signal the daemon's loop. On stop
        a leader calls ``on_stopped_leading`` and then releases the Lease (unless
        ``release_on_cancel`` is off, which tests use to simulate a killed replica).
        """
        while self._campaign(stop):
            log.info("%s: %s is the leader", self.subject, self.identity)
            _call(on_started_leading, "on_started_leading")
            self._lead(stop)
            # debug: whoever runs the elector says why (shutdown, or a lost Lease)
            log.debug("%s: %s stopped leading", self.subject, self.identity)
            _call(on_stopped_leading, "on_stopped_leading")
            if stop.is_set():
                if self.release_on_cancel:
                    self.release()
                return

    def start(
        self,
        stop: threading.Event,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
    ) -> threading.Thread:
        """:meth:`run` on a daemon thread; join it after setting ``stop``."""
        thread = threading.Thread(
            target=self.run,
            args=(stop, on_started_leading, on_stopped_leading),
            name=f"leader-election-{self.name}",
            daemon=True,
        )
        thread.start()
        return thread

    def _campaign(self, stop: threading.Event) -> bool:
        """Try every ``retry_period`` (jittered) until we lead (True) or are stopped (False)."""
        while not stop.is_set():
            if self._step():
                return True
            stop.wait(self.retry_period * (1 + random.uniform(0, JITTER)))
        return False

    def _lead(self, stop: threading.Event) -> None:
        """Renew every ``retry_period`` until stopped or the renew deadline passes."""
        while not stop.wait(self.retry_period):
            if not self._step() and not self.is_leader:
                return

    def _step(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except KubeError as e:
            log.warning("%s: leader election step failed: %s", self.subject, e)
            return False

    # -- requests and bookkeeping ---------------------------------------------------

    def _path(self, name: str = "") -> str:
        base = f"/apis/{LEASE_API_VERSION}/namespaces/{segment(self.namespace)}/leases"
        return f"{base}/{segment(name)}" if name else base

    def _read(self) -> dict[str, Any] | None:
        try:
            path = self._path(self.name)
            return self.client.request("GET", path, subject=self.subject, verb="get").body
        except NotFoundError:
            return None

    def _create(self, now: float) -> bool:
        record = self._fresh_record(now)
        body = {
            "apiVersion": LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                **({"labels": self.labels} if self.labels else {}),
            },
            "spec": record.to_dict(),
        }
        return self._write("POST", self._path(), body, record, verb="create")

    def _replace(self, lease: Mapping[str, Any], record: LeaseRecord) -> bool:
        # the read metadata carries resourceVersion: a concurrent writer makes this a 409
        body = {
            "apiVersion": LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": dict(lease.get("metadata") or {}),
            "spec": record.to_dict(),
        }
        return self._write("PUT", self._path(self.name), body, record, verb="update")

    def _write(
        self, method: str, path: str, body: dict[str, Any], record: LeaseRecord, *, verb: str
    ) -> bool:
        """Write the Lease; False when another writer got there first (409)."""
        try:
            answer = self.client.request(method, path, subject=self.subject, verb=verb, body=body)
        except KubeApiError as e:
            if e.status == 409:
                log.debug("%s: %s lost a race: %s", self.subject, self.identity, e)
                return False
            raise
        written = str((answer.body.get("metadata") or {}).get("resourceVersion") or "")
        self._observe(record, written)
        if record.holder == self.identity:
            with self._lock:
                self._renewed_at = self._monotonic()
        return True

    def _observe(self, record: LeaseRecord, resource_version: str) -> None:
        with self._lock:
            if (record, resource_version) != (self._observed, self._observed_rv):
                self._observed = record
                self._observed_rv = resource_version
                self._observed_at = self._monotonic()

    def _expired(self, record: LeaseRecord, now: float) -> bool:
        expires = record.expires_at()
        if expires is not None and expires < now:
            return True
        with self._lock:
            unchanged_for = self._monotonic() - self._observed_at
        return unchanged_for >= max(record.lease_duration_seconds, self.lease_duration)

    def _lose(self) -> None:
        with self._lock:
            self._renewed_at = None

    def _fresh_record(self, now: float) -> LeaseRecord:
        stamp = format_micro_time(now)
        return LeaseRecord(
            holder=self.identity,
            lease_duration_seconds=self._duration_seconds(),
            acquire_time=stamp,
            renew_time=stamp,
        )

    def _duration_seconds(self) -> int:
        # the API field is whole seconds and must be positive
        return max(1, math.ceil(self.lease_duration))


def check_timings(
    identity: str, lease_duration: float, renew_deadline: float, retry_period: float
) -> None:
    """Refuse timings under which a holder could still act after another took over.

    ``reconciler run`` calls it too, so a bad ``--lease-duration`` is a usage error
    at once rather than when the daemon starts its Leases.
    """
    if not identity:
        raise UsageError("leader election needs a non-empty identity")
    if not 0 < retry_period < renew_deadline < lease_duration:
        raise UsageError(
            "Lease timings must satisfy 0 < --retry-period < --renew-deadline < "
            f"--lease-duration (got {retry_period}s, {renew_deadline}s, {lease_duration}s)"
        )


def _call(callback: Callback | None, what: str) -> None:
    if callback is None:
        return
    try:
        callback()
    except Exception:  # a failing callback must not kill the election thread
        log.exception("leader election %s callback failed", what)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
