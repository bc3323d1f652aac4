"""The long-running daemon: triggers in, passes out, until SIGTERM.

``Service`` wires the daemon's parts around ``Daemon.run_pass``: a poll timer
with jitter, a drift timer, a file watcher (``--watch``), the HTTP server for
webhooks, ``/metrics``, ``/healthz``, ``/readyz`` and the status page ``/ui``, and
optionally leader election on a Lease so that only one replica acts. The loop
itself is small: wait for a trigger, run one pass if this replica leads, schedule a retry when
an instance backs off or an upgrade goes through intermediate versions.
With ``--scan-images`` an ``ImageScanner`` (``imagescans.py``) commits new image
builds to the catalog from its own thread and asks for a pass when it pushed.
SIGTERM only enqueues a shutdown trigger, so the in-flight pass finishes and
pushes its status before the process exits; the Lease is released only after
that, so a standby never acts while this replica still writes. A pass is
bounded by ``--health-timeout`` plus its status push, so the pod's
``terminationGracePeriodSeconds`` must exceed it (deploy/ does).

With ``--shards N`` there is no single leader: a ``ShardCoordinator``
(``reconciler.kube.shards``) holds the Leases of some shards, each pass
reconciles the instances of those only, and a shard is handed to another
replica only between passes. Gaining a shard starts a pass at once.

Without either, the daemon still takes the cluster's Lease, as the only writer: two
replicas started without ``--leader-elect`` would both apply and both write
``status/<cluster>``, each overwriting the other's records with what it saw. The
second one waits for the Lease to expire (its holder may have died without
releasing it, as a restarted pod's predecessor does), then refuses to start,
naming the holder. Where the Lease cannot be read or written at all (no RBAC for
Leases, no such namespace) it says so once and runs unguarded.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import __version__
from reconciler.daemon.logs import pass_scope
from reconciler.daemon.loop import Daemon, PassOutcome
from reconciler.daemon.probes import METRICS, PROBES, WEBHOOKS, DaemonHealth
from reconciler.daemon.statuses import UPGRADE_IN_PROGRESS
from reconciler.daemon.triggers import (
    DirectoryWatcher,
    DriftTimer,
    PeriodicTrigger,
    PollTimer,
    Trigger,
    TriggerQueue,
    install_signal_handlers,
)
from reconciler.kube import KubeClient, RetryPolicy
from reconciler.kube.errors import NotFoundError
from reconciler.kube.lease import LeaderElector, default_identity
from reconciler.kube.shards import ShardCoordinator
from reconciler.model.errors import KubeError, UsageError
from reconciler.source import CatalogWorkClone, redact_url

if TYPE_CHECKING:
    # imported in start() only when used: aiohttp (the HTTP server) and the registry
    # client (image scans) are a sixth of a second of a plain daemon's start
    from reconciler.daemon.http import DaemonHttpServer
    from reconciler.daemon.imagescans import ImageScanner

log = logging.getLogger("reconciler.daemon")

NEXT_STEP_DELAY = 1.0  # seconds before the next step of a multi-step upgrade
CRASH_RETRY_DELAY = 30.0  # seconds before retrying after a pass that raised unexpectedly
MIN_LOOK = 0.1  # floor of a rollout's next look, so a busy rollout cannot spin the loop


def parse_address(address: str, flag: str = "--metrics-address") -> tuple[str, int]:
    """``:8080`` (all interfaces), ``127.0.0.1:8080`` or ``8080`` as (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = "", address
    try:
        number = int(port)
    except ValueError:
        raise UsageError(f'{flag} "{address}" must look like :8080 or HOST:PORT') from None
    return host or "0.0.0.0", number


def http_listeners(
    metrics: str, webhooks: str = "", probes: str = ""
) -> list[tuple[tuple[str, int], list[str]]]:
    """The servers to start: ((host, port), route groups) per distinct address.

    ``--metrics-address`` alone serves every group (the behaviour before the other two
    flags existed); ``--webhook-address`` and ``--probe-address`` move their group to a
    server of its own. Groups given the same address share a server; port 0 (any free
    port) is never shared, since two such flags mean two ports.
    """
    flags = {METRICS: "--metrics-address", WEBHOOKS: "--webhook-address", PROBES: "--probe-address"}
    given = {METRICS: metrics, WEBHOOKS: webhooks, PROBES: probes}
    listeners: list[tuple[tuple[str, int], list[str]]] = []
    for group in (METRICS, WEBHOOKS, PROBES):
        if given[group]:
            address = parse_address(given[group], flags[group])
        elif metrics:
            listeners[0][1].append(group)  # on the metrics server (the first), as before
            continue
        else:
            continue
        shared = [groups for where, groups in listeners if where == address and address[1] != 0]
        if shared:
            shared[0].append(group)
        else:
            listeners.append((address, [group]))
    return listeners


def _lease_hint(error: KubeError, namespace: str) -> str:
    """What to do when the single-writer Lease cannot be taken: a missing namespace
    (the deploy manifests create it; a hand-run daemon may not have it) needs another
    remedy than a missing permission."""
    if isinstance(error, NotFoundError):
        return (
            f"create the namespace {namespace} (the deploy manifests do), or name an "
            "existing one with --leader-elect-namespace"
        )
    return "grant access to Leases there, or run with --leader-elect"


class Service:
    """One daemon process: its triggers, endpoints and (optional) leader election."""

    def __init__(self, daemon: Daemon, *, install_signals: bool = True) -> None:
        self.daemon = daemon
        self.settings = daemon.settings
        self.queue = TriggerQueue()
        self.stop_event = threading.Event()
        self.health = DaemonHealth()
        self._install_signals = install_signals
        self._timers: list[PeriodicTrigger] = []
        self._watcher: DirectoryWatcher | None = None
        self.scanner: ImageScanner | None = None  # --scan-images
        self.http: DaemonHttpServer | None = None  # the one serving /metrics, if any
        self.http_port = 0
        self.servers: list[DaemonHttpServer] = []
        self.ports: dict[str, int] = {}  # route group -> bound port
        self.elector: LeaderElector | None = None
        self.shards: ShardCoordinator | None = None
        self._held: frozenset[int] = frozenset()  # shards held after the last tick
        self._elector_thread: threading.Thread | None = None
        # The Lease is held until the loop has stopped, not merely until SIGTERM:
        # releasing it while the in-flight pass still applies would let a standby
        # act at the same time (two writers for several seconds).
        self._release_lease = threading.Event()

    @property
    def leading(self) -> bool:
        """Whether this replica acts: it leads, holds a shard, or runs alone."""
        if self.shards is not None:
            return bool(self.shards.held)
        return self.elector is None or self.elector.is_leader

    def _scans(self) -> bool:
        """Whether this replica scans images: it acts, and with shards it holds shard 0
        (like global migrations), so replicas of one cluster never race to commit."""
        if self.shards is not None:
            return 0 in self.shards.held
        return self.leading

    def run(self) -> int:
        restore = (
            install_signal_handlers(self.queue, self.stop_event) if self._install_signals else None
        )
        try:
            self._start()
            log.info("%s", self.startup_line(), extra={"cluster": self.settings.cluster})
            self.queue.put(Trigger("startup", f"reconciler for cluster {self.settings.cluster}"))
            self._loop()
        finally:
            self._stop()
            if restore is not None:
                restore()
        return 0

    def startup_line(self) -> str:
        """What the daemon says once it listens: a default-level log that shows it is alive.

        Version, repository (credentials redacted), cluster and the ports it serves, so
        an operator knows at once where to curl ``/readyz`` and ``/ui``.
        """
        s = self.settings
        served: dict[int, list[str]] = {}  # port -> route groups, in the order named
        for group, port in self.ports.items():
            served.setdefault(port, []).append(group)
        ports = (
            ", ".join(f"{'+'.join(groups)} on :{port}" for port, groups in served.items())
            or "no HTTP port (see --metrics-address)"
        )
        if METRICS in self.ports:
            ports += f", status page /ui on :{self.ports[METRICS]}"
        return (
            f"reconciler {__version__} started: repo {redact_url(s.repo)}, "
            f"cluster {s.cluster}, {ports}"
        )

    def shutdown(self, why: str = "asked to stop") -> None:
        self.queue.put(Trigger("shutdown", why))
        self.stop_event.set()

    def _loop(self) -> None:
        while True:
            trigger = self.queue.wait(timeout=1.0)
            self.health.heartbeat()
            if trigger is None:
                continue
            if trigger.reason == "shutdown":
                log.info(
                    "shutting down: %s", trigger.detail, extra={"cluster": self.settings.cluster}
                )
                return
            if not self.leading:
                log.debug("not the leader; ignoring %s", trigger.describe())
                continue
            with pass_scope():  # the pass's ID, from its first line to its last
                self._pass(trigger)

    def _pass(self, trigger: Trigger) -> None:
        # debug: a quiet cluster passes every --interval; the pass's summary says what changed
        log.debug("pass (%s)", trigger.describe(), extra={"cluster": self.settings.cluster})
        started = time.monotonic()
        try:
            outcome = self._run_pass()
        except Exception:
            # A bug must not end reconciliation of every instance: log it with its
            # traceback, count it, and try again after a pause.
            log.exception("pass crashed", extra={"cluster": self.settings.cluster})
            self.daemon.metrics.observe_pass(
                self.settings.cluster, time.monotonic() - started, ok=False, crashed=True
            )
            self.health.pass_completed(False)
            self.queue.schedule(Trigger("retry", "after a crashed pass"), CRASH_RETRY_DELAY)
            return
        self.health.pass_completed(outcome.error is None)
        self._schedule_follow_up(outcome)

    def _run_pass(self) -> PassOutcome:
        if self.shards is None:
            return self.daemon.run_pass()
        scope = self.shards.begin_pass()  # none of these shards is handed over meanwhile
        try:
            log.debug("reconciling %s", scope.describe(), extra={"cluster": self.settings.cluster})
            return self.daemon.run_pass(scope)
        finally:
            self.shards.end_pass()

    def _schedule_follow_up(self, outcome: PassOutcome) -> None:
        report = outcome.report
        if report is not None and any(s.reason == UPGRADE_IN_PROGRESS for s in report.statuses):
            # the next step is a change in flight like a rollout's next batch: --max-look
            # bounds the pause too (a cluster whose pods are ready in a tenth of a second,
            # the sandbox's, need not wait a whole second for it)
            step = max(min(NEXT_STEP_DELAY, self.settings.max_look), MIN_LOOK)
            self.queue.schedule(Trigger("retry", "next step of an upgrade path"), step)
        if report is not None and report.next_look is not None:
            # a rollout in flight: look again soon, whatever the poll interval says
            look = max(min(report.next_look, self.settings.max_look), MIN_LOOK)
            self.queue.schedule(Trigger("retry", "next look at a rollout"), look)
        retry_in = self.daemon.next_retry_in()
        if retry_in is not None:
            self.queue.schedule(Trigger("retry", "an instance's backoff ended"), retry_in)

    def _start(self) -> None:
        s = self.settings
        self.daemon.start_watching()  # one watch cache for the daemon's life
        self._timers = [
            PollTimer(self.queue, s.interval, jitter=s.jitter),
            DriftTimer(self.queue, s.drift_interval),
        ]
        for timer in self._timers:
            timer.start()
        if s.watch:
            self._watcher = DirectoryWatcher(self.queue, Path(s.repo))
            self._watcher.start()
        if s.scan_images:
            from reconciler.daemon.imagescans import ImageScanner

            self.scanner = ImageScanner(
                CatalogWorkClone(s.repo, branch=s.branch, cache_dir=s.cache_dir),
                self.queue,
                s.scan_images,
                acting=self._scans,
                observe=lambda result: self.daemon.metrics.image_scans.labels(result).inc(),
                jitter=s.jitter,
            )
            self.scanner.start()
        listeners = http_listeners(s.metrics_address, s.webhook_address, s.probe_address)
        if listeners:
            from reconciler.daemon.http import DaemonHttpServer
            from reconciler.daemon.status_site import StatusPages, ui_options
        for (host, port), groups in listeners:
            server = DaemonHttpServer(
                host,
                port,
                self.queue,
                self.daemon.metrics,
                self.health,
                s.webhook_secret or None,
                s.branch,
                cluster=s.cluster,
                routes=groups,
                pages=(
                    StatusPages(
                        self.daemon.ledger,
                        options=ui_options(s),
                        pipelines=self.daemon.wave_pipelines,
                    ).page
                    if METRICS in groups
                    else None
                ),
            )
            self.servers.append(server)
            bound = server.start()
            self.ports.update(dict.fromkeys(groups, bound))
        if self.servers:
            self.http = next((v for v in self.servers if METRICS in v.routes), self.servers[0])
            self.http_port = self.http.port
        if s.shards:
            self._start_shards()
        elif s.leader_elect:
            self._start_election()
        else:
            self._start_single_writer()

    def _quick_client(self) -> KubeClient:
        """Lease calls must fail fast: a holder still retrying a hung request after its
        renew deadline would act while another replica has already taken over."""
        bound = max(0.5, self.settings.renew_deadline / 3)
        quick = RetryPolicy(
            attempts=2,
            base_delay=0.1,
            max_delay=bound,
            timeout=(bound, bound),
            throttle_attempts=2,
        )
        return self.daemon.client.with_retry(quick)

    def _start_shards(self) -> None:
        s = self.settings
        self.shards = ShardCoordinator(
            self._quick_client(),
            s.leader_namespace,
            s.lease_name,
            s.shards,
            s.identity,
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
        )
        self.health.set_leader(False)
        self.daemon.metrics.set_leader(False)
        coordinator = self.shards

        def changed() -> None:
            held = coordinator.held
            gained = held - self._held
            self._held = held
            log.info(
                "%s holds %d shard(s) of %d: %s",
                s.identity,
                len(held),
                s.shards,
                sorted(held),
                extra={"cluster": s.cluster},
            )
            self.health.set_leader(bool(held))
            self.daemon.metrics.set_leader(bool(held))
            self.daemon.metrics.set_shards_held(s.cluster, len(held))
            if gained:
                self.queue.put(Trigger("startup", f"took shard(s) {sorted(gained)}"))

        def disagreement(problem: str | None) -> None:  # the coordinator logs it
            self.health.set_problem(problem)
            self.daemon.metrics.set_shards_disagreement(s.cluster, problem is not None)

        self._elector_thread = threading.Thread(
            target=coordinator.run,
            args=(self._release_lease, changed, disagreement),
            name="shard-leases",
            daemon=True,
        )
        self._elector_thread.start()

    def _start_single_writer(self) -> None:
        """Take the Lease before the first pass, or refuse to start (``UsageError``)."""
        s = self.settings
        elector = self._elector()
        deadline = time.monotonic() + s.lease_duration + 2 * s.retry_period
        waited = False
        while True:
            try:
                if elector.try_acquire_or_renew():
                    break
            except KubeError as e:
                log.warning(
                    "%s: cannot take the Lease (%s); a second replica writing %s would go "
                    "unnoticed: %s",
                    elector.subject,
                    e,
                    self.daemon.ledger.branch,
                    _lease_hint(e, s.leader_namespace),
                    extra={"cluster": s.cluster},
                )
                return
            if time.monotonic() >= deadline or self.stop_event.is_set():
                raise UsageError(
                    f"another reconciler ({elector.leader or 'unknown'}) holds {elector.subject} "
                    f"for cluster {s.cluster}: a second writer of {self.daemon.ledger.branch} "
                    "would overwrite its status records with stale ones. Stop it, or run "
                    "every replica with --leader-elect (one acts, the others stand by)"
                )
            if not waited:
                log.info(
                    "%s is held by %s: waiting up to %.0fs for it to expire (a replica "
                    "that stopped without releasing it)",
                    elector.subject,
                    elector.leader,
                    s.lease_duration,
                    extra={"cluster": s.cluster},
                )
                waited = True
            self.stop_event.wait(s.retry_period)
        self._run_elector(elector)

    def _elector(self) -> LeaderElector:
        s = self.settings
        return LeaderElector(
            self._quick_client(),
            s.leader_namespace,
            s.lease_name or f"reconciler-{s.cluster}",
            s.identity or default_identity(),  # the command gives one; a library user may not
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
        )

    def _start_election(self) -> None:
        self._run_elector(self._elector(), election=True)

    def _run_elector(self, elector: LeaderElector, *, election: bool = False) -> None:
        """Keep ``elector``'s Lease (campaigning for it when not held) until shutdown.

        ``election`` (``--leader-elect``): the probes report leadership, a standby
        being ready. Without it the Lease only guards against a second writer: the
        replica is not "a leader" to its probes, it is the daemon.
        """
        s = self.settings
        self.elector = elector
        if election:
            self.health.set_leader(False)
        self.daemon.metrics.set_leader(False)

        def started() -> None:  # the elector logs "<Lease>: <identity> is the leader"
            if election:
                self.health.set_leader(True)
                self.queue.put(Trigger("startup", "became the leader"))
            self.daemon.metrics.set_leader(True)

        def stopped() -> None:
            if not self._release_lease.is_set():  # not our shutdown: another replica leads
                log.warning("lost the leadership (%s)", s.identity, extra={"cluster": s.cluster})
            if election:
                self.health.set_leader(False)
            self.daemon.metrics.set_leader(False)

        self._elector_thread = threading.Thread(
            target=elector.run,
            args=(self._release_lease, started, stopped),
            name="leader-election",
            daemon=True,
        )
        self._elector_thread.start()

    def _stop(self) -> None:
        """Called once the loop has returned: no pass runs any more, so the Lease can go."""
        self.stop_event.set()
        for timer in self._timers:
            timer.stop()
        if self._watcher is not None:
            self._watcher.stop()
        if self.scanner is not None:
            self.scanner.stop()
        for server in self.servers:
            server.stop()
        self.daemon.flush_events()  # the last pass's Events, before the Lease goes
        self.daemon.close_events()
        self._release_lease.set()
        if self._elector_thread is not None:
            self._elector_thread.join(timeout=10.0)  # releases the Lease on the way out
        self.daemon.stop_watching()


def serve(daemon: Daemon) -> int:
    """Run the daemon until SIGTERM/SIGINT; exit code 0 after a clean shutdown."""
    return Service(daemon).run()
