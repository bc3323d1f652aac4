"""The daemon: keep one cluster equal to the catalog and record every change in Git.

``Daemon.run_pass`` is one pass: sync the catalog source (a cached clone of the
repository, or with ``watch`` the local working tree as saved), reconcile the
checkout (``reconciler.daemon.passes``), commit the status records that changed
(``StatusLedger``), and report metrics. A remote that goes away does not stop
the daemon: it keeps reconciling the last good commit (drift is still corrected)
and picks the new head up when the remote is back. ``Daemon.serve`` repeats
passes on triggers (poll, webhook, file save, drift timer) until told to stop.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.catalog.incremental import CatalogCache
from reconciler.daemon.backoff import BackoffBook, BackoffPolicy
from reconciler.daemon.healthwatch import DEFAULT_HEALTH_GRACE, HealthWatch
from reconciler.daemon.logs import pass_scope
from reconciler.daemon.memo import PassMemo
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.migrating import MIGRATION_FAILED
from reconciler.daemon.passes import PassReport, PassSettings, reconcile_checkout
from reconciler.daemon.plan import InstancePlan, plan_fingerprint
from reconciler.daemon.rolling import EVENT_REASONS
from reconciler.daemon.waving import WaveView, app_board, release_versions
from reconciler.kube import PRUNE_REFUSED, KubeClient
from reconciler.kube.events import EventQueue, EventRecorder
from reconciler.kube.inventory import inventory_name
from reconciler.kube.watchcache import WatchCache
from reconciler.migrations import Registry
from reconciler.model.catalog import Catalog
from reconciler.model.changeset import ChangeSet, ObjectRef
from reconciler.model.errors import ReconcilerError, SourceError
from reconciler.model.gcpause import gc_paused
from reconciler.model.rollout import RollingState, noteworthy
from reconciler.model.shards import ShardScope, shard_of
from reconciler.model.status import ConditionType, InstanceStatus, Phase
from reconciler.model.waves import SeenRecord
from reconciler.source.changes import TreeState, changed_since, tree_state
from reconciler.source.checkout import CatalogSource
from reconciler.source.fleet import FLEET_PATTERN, ReleaseHistory
from reconciler.source.ledger import CommitInfo, StatusLedger
from reconciler.source.redact import redact_url
from reconciler.source.verify import SignaturePolicy
from reconciler.source.worktree import read_worktree
from reconciler.waves import WAITING_FOR_WAVE, WAVE_HALTED, Halted, Waiting

if TYPE_CHECKING:
    from reconciler.status.report import Pipeline

log = logging.getLogger("reconciler.daemon")

# The annotation naming the pass that recorded (or last bumped) an Event.
PASS_ANNOTATION = "reconciler.dev/pass"
EVENT_FLUSH_SECONDS = 10.0  # how long a stopping daemon waits for its queued Events


def utc_now() -> datetime:
    return datetime.now(UTC)


@contextmanager
def young_collections_only() -> Iterator[None]:
    """Pause the cyclic garbage collector during a pass; collect what the pass made after.

    A pass allocates hundreds of thousands of short-lived objects (decoded lists,
    records); their bursts trigger collections, and about once a pass a full one
    that walks every object the daemon holds (catalog, caches): measured at 500
    instances, 40% of a no-op pass's CPU, and growing with the heap, so the cost
    per instance grew with the instances. Reference counting frees almost all of
    it anyway. After the pass the young generations alone are collected, which
    frees the pass's cyclic garbage at a cost proportional to what the pass
    allocated, not to the heap; full collections still run when enough survives.
    """
    was_enabled = gc.isenabled()
    try:
        with gc_paused():
            yield
    finally:
        if was_enabled:
            gc.collect(1)


@dataclass(frozen=True)
class DaemonSettings:
    """Everything ``reconciler run`` was told; plain data, built by the CLI."""

    repo: str
    cluster: str
    branch: str | None = None
    status_branch: str | None = None
    interval: float = 60.0
    jitter: float = 0.1
    drift_interval: float = 300.0
    health_timeout: float = 120.0
    health_grace: float = DEFAULT_HEALTH_GRACE
    force_conflicts: bool = False
    allow_empty_prune: bool = False
    allow_mass_prune: bool = False
    watch: bool = False
    verify: SignaturePolicy | None = None
    cache_dir: Path | None = None
    leader_elect: bool = False
    shards: int = 0  # --shards N: this replica reconciles the shards whose Leases it holds
    leader_namespace: str = "reconciler-system"
    lease_name: str = ""
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_address: str = ""
    webhook_address: str = ""  # "" serves webhooks on metrics_address
    probe_address: str = ""  # "" serves probes on metrics_address
    webhook_secret: str = ""
    backoff_base: float = 10.0
    backoff_cap: float = 600.0
    max_look: float = 2.0  # a rollout in flight is looked at again at least this often
    scan_images: float = 0.0  # --scan-images: seconds between image scans (0: off)
    prometheus_url: str = ""  # --prometheus-url: for analyses that name no address
    commit_url: str = ""  # --commit-url: where /ui links commit ids (empty: plain text)

    @property
    def pass_settings(self) -> PassSettings:
        return PassSettings(
            cluster=self.cluster,
            health_timeout=self.health_timeout,
            health_grace=self.health_grace,
            force_conflicts=self.force_conflicts,
            allow_empty_prune=self.allow_empty_prune,
            allow_mass_prune=self.allow_mass_prune,
            writer=self.writer,
            ledger_namespace=self.leader_namespace,  # the reconciler's own namespace
            prometheus_url=self.prometheus_url,
        )

    @property
    def writer(self) -> str:
        """Who this daemon is to other reconcilers: what it follows, never a secret.

        Replicas of one Deployment share it (they follow the same source), so only
        a reconciler with different input counts as another writer. The status
        branch is left out: two daemons on one catalog branch apply the same objects.
        """
        followed = "working tree" if self.watch else self.branch or "default branch"
        return f"{redact_url(self.repo)} ({followed})"


@dataclass(frozen=True)
class Checkout:
    path: Path
    commit: str
    dirty: bool = False  # a working tree with uncommitted edits (watch mode)


@dataclass
class PassOutcome:
    """A pass as the loop saw it: its report (None if it could not run) and commits."""

    report: PassReport | None
    commits: list[CommitInfo] = field(default_factory=list)
    error: str | None = None
    source_changed: bool = False
    reason: str | None = None  # the error's kstatus reason (``UsageError``: fix the command)
    pass_id: str = ""  # in its log lines, status commits and Events (daemon.logs)

    @property
    def ok(self) -> bool:
        return self.error is None and self.report is not None and self.report.all_ready


class Daemon:
    """Composes source, kube, ledger and metrics; one instance per cluster and process."""

    def __init__(
        self,
        settings: DaemonSettings,
        client: KubeClient,
        *,
        metrics: DaemonMetrics | None = None,
        registry: Registry | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings
        self.clock = clock  # the wave gate's "now" (soak); tests move it instead of waiting
        self.client = client
        self.registry = registry or Registry.installed()  # Python migrations, read once
        self.metrics = metrics or DaemonMetrics()
        self.metrics.start(settings.cluster)
        self.ledger = StatusLedger(
            settings.repo,
            settings.cluster,
            branch=settings.status_branch,
            cache_dir=settings.cache_dir,
        )
        self.fleet = self.ledger.fleet()  # other clusters' status branches (waves.yaml)
        self._history: ReleaseHistory | None = None  # where releases began, per catalog head
        self._history_read: str | None = None  # the catalog head the status mirror holds
        self._fleet_fetched: bool | None = None  # this pass's refresh of the fleet: None: none
        self._fleet_at: float | None = None  # when the fleet was last refreshed (monotonic)
        self._wave_catalog: Catalog | None = None  # the last pass's, when it has waves.yaml
        self._catalog_branch = "HEAD"  # the catalog's branch as the last sync named it
        # the remote's refs this pass's catalog sync listed (this cluster's status branch
        # too, and status/* with waves.yaml), and whether the status branch was among them
        self._listed: Mapping[str, str] | None = None
        self._status_listed = False
        self.source: CatalogSource | None = None
        if not settings.watch:
            self.source = CatalogSource(
                settings.repo,
                branch=settings.branch,
                cache_dir=settings.cache_dir,
                verify=settings.verify,
            )
        self.last_good: Checkout | None = None
        self._catalog: tuple[str, Catalog] | None = None  # (commit, catalog loaded from it)
        self._catalogs = CatalogCache[TreeState](
            changed_since
        )  # reloads only what a commit changed
        self.backoff = BackoffBook(
            BackoffPolicy(base=settings.backoff_base, cap=settings.backoff_cap)
        )
        self._failed_inputs: dict[str, str] = {}  # instance -> plan fingerprint when it failed
        self._failed_removals: dict[str, str] = {}  # instance -> catalog commit when it failed
        self.statuses: dict[str, InstanceStatus] = {}  # last records, for held instances
        self._seeded = False  # statuses read from the status branch once
        self._seeded_shards: frozenset[int] = frozenset()  # with --shards: read for these
        # sent in the background (kube.events.EventQueue): a pass never waits on them
        self.events = EventQueue(EventRecorder(client), cluster=settings.cluster)
        # health waits across passes (daemon.healthwatch), timed for the metrics
        self.health = HealthWatch(on_end=self._health_wait_ended)
        self.memo = PassMemo()  # settled instances' verdicts, reused while nothing changes
        # live objects kept current by watches (``start_watching``): long-running only
        self.live_cache: WatchCache | None = None
        self._pass_id = ""  # the pass running (for its Events' annotation)
        self.passes = 0  # passes run, numbered in the summary line

    def start_watching(self) -> WatchCache:
        """Keep live objects in a watch cache from now on (``reconciler run``).

        Passes then list a kind only the first time they touch it, and watch it after
        (``kube.watchcache``). ``run --once`` and the CLI commands do without: a
        single pass would only pay for the threads. ``stop_watching`` ends it.
        """
        if self.live_cache is None:
            cluster = self.settings.cluster
            restarts = self.metrics.watch_restarts
            self.live_cache = WatchCache(
                self.client, on_restart=lambda reason: restarts.labels(cluster, reason).inc()
            )
        return self.live_cache

    def flush_events(self, timeout: float = EVENT_FLUSH_SECONDS) -> None:
        """Send the Events still queued (the daemon stops, or ``run --once`` ends); those
        not sent within ``timeout`` are dropped, in one line naming the cluster."""
        if not self.events.flush(timeout):
            self.events.discard(f"not sent within {timeout:.0f} s")

    def close_events(self) -> None:
        """Send no more Events (the daemon stops, after ``flush_events``): what still
        waits is dropped in one line, and a send still under way logs nothing when it
        fails, as the API server (a test's sandbox) may be gone by then."""
        self.events.close()

    def stop_watching(self) -> None:
        """End every watch and its thread (the daemon stops)."""
        cache, self.live_cache = self.live_cache, None
        if cache is not None:
            cache.close()

    def sync(self) -> tuple[Checkout, bool]:
        """The checkout to reconcile and whether it moved; the last good one if Git is away."""
        started = time.monotonic()
        self._listed = None
        self._status_listed = False
        try:
            if self.source is None:
                tree = read_worktree(self.settings.repo)
                checkout = Checkout(tree.path, tree.commit, tree.dirty)
            else:
                patterns = self._listing_patterns
                result = self.source.sync(also=patterns)
                checkout = Checkout(result.path, result.commit)
                self._catalog_branch = f"refs/heads/{result.branch}"
                self._listed = result.listed
                self._status_listed = bool(patterns) and result.listed is not None
        except SourceError as e:
            self.metrics.observe_fetch(time.monotonic() - started, ok=False)
            if self.last_good is None:
                raise
            log.warning(
                "catalog unreachable, reconciling the last good commit %s: %s",
                self.last_good.commit[:12],
                e,
                extra={"cluster": self.settings.cluster},
            )
            return self.last_good, False
        self.metrics.observe_fetch(time.monotonic() - started, ok=True)
        moved = self.last_good is None or self.last_good.commit != checkout.commit
        self.last_good = checkout
        return checkout, moved

    def catalog_at(self, checkout: Checkout) -> Catalog:
        """The catalog of ``checkout``, loaded once per commit.

        A commit never changes, and most passes (polls, drift checks) see the same
        head again, so reloading and re-validating every file would be repeated
        work. A ``-dirty`` working tree (``--watch``) can change under the same
        id, so it is always read again. A new commit (or edit) reloads only the
        apps, clusters and instances whose files changed (``catalog.incremental``),
        falling back to a full load when that cannot be done safely.
        """
        cached = self._catalog
        if cached is not None and cached[0] == checkout.commit and not checkout.dirty:
            return cached[1]
        head = checkout.commit.removesuffix("-dirty") if checkout.dirty else checkout.commit
        state = tree_state(checkout.path, head, worktree=checkout.dirty)
        catalog = self._catalogs.load(checkout.path, state)
        self._catalog = (checkout.commit, catalog)
        return catalog

    def run_pass(self, scope: ShardScope | None = None) -> PassOutcome:
        """One whole pass; never raises for a stage failure (it is logged and returned).

        ``scope`` (``--shards``): reconcile only the instances of the shards held.
        The pass has an ID (the service's, or a new one): every line it logs, every
        status commit (``Reconciler-Pass``) and Event (``reconciler.dev/pass``) it
        writes carries it.
        """
        with pass_scope() as pass_id, young_collections_only():
            self._pass_id = pass_id
            self.passes += 1
            try:
                outcome = self._run_pass(scope)
            finally:
                self._pass_id = ""
            outcome.pass_id = pass_id
            return outcome

    def _run_pass(self, scope: ShardScope | None) -> PassOutcome:
        cluster = self.settings.cluster
        started = time.monotonic()
        self._fleet_fetched = None  # this pass has not fetched the status branches yet
        try:
            checkout, moved = self.sync()
            if moved:
                log.info("catalog at %s", checkout.commit[:12], extra={"cluster": cluster})
            fetched = self._seed_statuses(scope)
            catalog = self.catalog_at(checkout)
            waves = self._wave_view(checkout) if catalog.waves is not None else None
            self._wave_catalog = catalog if catalog.waves is not None else None
            report = reconcile_checkout(
                catalog,
                checkout.commit,
                self.client,
                self.settings.pass_settings,
                hold=self._holding,
                hold_removal=lambda name: self._holding_removal(name, checkout.commit),
                previous=self.statuses,
                registry=self.registry,
                watch=self.health,
                scope=scope,
                memo=self.memo,
                cache=self.live_cache,
                waves=waves,
            )
        except ReconcilerError as e:
            self.metrics.observe_pass(cluster, time.monotonic() - started, ok=False)
            log.error("pass failed (%s): %s", e.reason, e, extra={"cluster": cluster})
            return PassOutcome(None, error=f"{e.reason}: {e}", reason=e.reason)
        runs = tuple(s for event in report.migrations for s in event.statuses)
        # at most one status fetch per pass: a pass that has just read the branch (or whose
        # wave gate's fetch brought it) builds on that, and one whose listing shows it
        # unmoved builds on the mirror's copy
        fetched = fetched or (self._fleet_fetched is True and self._default_branch)
        refresh = not fetched and not self._status_unmoved()
        commits, error = self.record(
            (*runs, *report.statuses), checkout.commit, refresh=refresh, known=report.known
        )
        self._log_changes(report, {c.instance for c in commits})
        self._log_summary(report, {c.instance for c in commits}, time.monotonic() - started)
        self._emit_events(report, {c.instance for c in commits})
        self._report_rollouts(report)
        self._report_waves(report, {c.instance for c in commits})
        self._update_backoff(report)
        if report.known is not None and error is None:
            # records of instances that do not exist left the branch: and memory
            for name in [n for n in self.statuses if n not in report.known]:
                del self.statuses[name]
        self._report_metrics(report, time.monotonic() - started, error is None)
        return PassOutcome(report, commits, error, moved)

    @property
    def _listing_patterns(self) -> tuple[str, ...]:
        """What the catalog's ``git ls-remote`` lists besides its branch, when the status
        branches live in the same repository: this cluster's (whether ``record`` must
        fetch it), and every cluster's when the last pass had waves (the wave gate's).
        One listing, one round trip, where a fetch of an unmoved branch is a round trip
        and half a dozen processes (its upload-pack, its connectivity check)."""
        if self.source is None or self.source.access.url != self.ledger.access.url:
            return ()
        own = f"refs/heads/{self.ledger.branch}"
        return (own, FLEET_PATTERN) if self._wave_catalog is not None else (own,)

    def _status_unmoved(self) -> bool:
        """Whether this pass's listing shows the status branch where the ledger last
        fetched or pushed it (no branch on either side counts too): ``record`` then builds
        on that copy without a fetch. A writer that moves it after the listing makes the
        push fail as a conflict, which fetches and re-applies (``StatusLedger.record``)."""
        if not self._status_listed or self._listed is None:
            return False
        return self._listed.get(f"refs/heads/{self.ledger.branch}") == self.ledger.head()

    @property
    def _default_branch(self) -> bool:
        return self.ledger.branch == f"status/{self.settings.cluster}"

    def _wave_view(self, checkout: Checkout) -> WaveView:
        """What the wave gate may ask this pass: the other clusters' records, where
        releases began, and the time.

        Nothing is fetched here: the status branches that moved (and the catalog's
        history, for a new catalog commit) are fetched on the gate's first question,
        once (``_refresh_fleet``). A settled pass asks none, so it fetches nothing;
        where-a-release-began answers are kept per catalog commit. When the branches
        cannot be read the records are None, and the gate holds every change it would
        judge (``daemon.waving``), since deciding without them could release to the fleet.
        """
        head = checkout.commit.removesuffix("-dirty")
        if self._history is None or self._history.head != head:
            self._history = ReleaseHistory(self.fleet.repo, head)
        history = self._history

        def ready() -> bool:
            # the mirror holds ``head``'s history once a refresh since it moved succeeded
            return self._history_read == head or self._refresh_fleet()

        def start(app: str, version: str, channel: str | None) -> str | None:
            return history.start(app, version, channel) if ready() else None

        def contains(app: str, version: str, channel: str | None, commit: str) -> bool:
            return ready() and history.contains(app, version, channel, commit)

        def read() -> dict[tuple[str, str], SeenRecord] | None:
            if not self._refresh_fleet():
                return None
            try:
                return self.fleet.records(skip=self.settings.cluster)
            except SourceError as e:
                self._fleet_unreadable(e)
                return None

        return WaveView(
            read, contains, self.clock(), start, prometheus_url=self.settings.prometheus_url
        )

    def _refresh_fleet(self) -> bool:
        """Fetch the status branches that moved, and the catalog's history, once a pass
        (this pass's listing says which moved); whether the mirror is up to date."""
        if self._fleet_fetched is None:
            try:
                self.fleet.refresh(self._catalog_branch, self._listed)
            except SourceError as e:
                self._fleet_unreadable(e)
                self._fleet_fetched = False
            else:
                self._fleet_fetched = True
                self._fleet_at = time.monotonic()
                self._history_read = self._history.head if self._history is not None else None
        return self._fleet_fetched

    def _fleet_unreadable(self, error: SourceError) -> None:
        log.warning(
            "cannot read the status branches for the wave gate: %s",
            error,
            extra={"cluster": self.settings.cluster},
        )

    def _log_summary(self, report: PassReport, committed: set[str], seconds: float) -> None:
        """One INFO line per pass that changed something; a quiet pass logs nothing.

        ``pass 41: 3 changed, 1 waiting for promotion, 0 failed (1.2 s)``: changed are
        the instances with a new status record or a changed object; the other counts
        are the cluster's state after the pass (Failed and Stalled count as failed).
        """
        line = pass_summary(self.passes, report, committed, seconds)
        if line is not None:
            log.info("%s", line, extra={"cluster": report.cluster})

    def wave_pipelines(self) -> list[Pipeline]:
        """Each app's release across the waves, for ``/ui``: the gate the passes ask, on
        every cluster's status branch (this one's included) and the time now.

        A settled pass fetches no status branch (``_wave_view``), so the page fetches
        those that moved when the last fetch is older than a poll ``interval``: one
        ``git ls-remote`` and a fetch of the moved heads per interval at most, however
        often the page is read. Empty without a valid ``waves.yaml``; a Git failure is
        logged and leaves the page without pipelines rather than failing the page.
        """
        catalog, history = self._wave_catalog, self._history
        if catalog is None or catalog.waves is None or not catalog.waves.valid or history is None:
            return []
        # the status page's module (and the HTML report it draws with) is imported when
        # the page is drawn: a daemon nobody asks for /ui never needs it (0.05 s of CPU
        # at every start)
        from reconciler.daemon.status_site import pipeline_of

        now = self.clock()
        try:
            at = self._fleet_at
            if at is None or time.monotonic() - at >= self.settings.interval:
                self.fleet.refresh(self._catalog_branch)
                self._fleet_at = time.monotonic()
            records = self.fleet.records()
        except SourceError as e:
            log.warning("status page: cannot read the status branches: %s", e)
            return []
        return [
            pipeline_of(
                app, version, app_board(catalog, app, version, records, history.contains, now), now
            )
            for app, version in sorted(release_versions(catalog, records).items())
        ]

    def _log_changes(self, report: PassReport, changed: set[str]) -> None:
        """One log line per instance whose status or objects changed, carrying its fields.

        The pass's change set is indexed by instance once: looking each instance up
        in it would scan every entry per instance (quadratic in the instances).
        """
        touched_by = ChangeSet(report.changed_entries).by_instance()
        untouched = ChangeSet()
        for status in report.statuses:
            # log on change: a Stalled instance must not repeat its warning every pass
            touched = touched_by.get(status.instance, untouched)
            if status.instance not in changed and not touched.entries:
                continue
            objects = touched.summary() if touched.entries else ""
            level = (
                logging.INFO
                if status.phase in (Phase.READY, Phase.PROGRESSING, Phase.REMOVED)
                else logging.WARNING
            )
            log.log(
                level,
                "%s %s %s%s: %s",
                status.app,
                status.version or "-",
                status.phase,
                f" (objects: {objects})" if objects else "",
                status.message,
                extra={
                    "cluster": status.cluster,
                    "instance": status.instance,
                    "app": status.app,
                    "version": status.version,
                    "phase": str(status.phase),
                    "reason": status.reason or None,
                },
            )

    def _emit_events(self, report: PassReport, changed: set[str]) -> None:
        """Kubernetes Events for instances whose status changed (best effort, never raises).

        They land on the instance's inventory ConfigMap, so ``kubectl describe`` and
        ``kubectl get events -n <namespace>`` tell the story next to the objects.
        """
        for status in report.statuses:
            writer = status.condition(ConditionType.CONFLICTING_WRITER)
            if writer is None and status.instance not in changed:
                continue  # the usual case, a settled instance: nothing to say, nothing made
            namespace = report.namespaces.get(status.instance, "")
            if not namespace:
                continue
            ref = ObjectRef("v1", "ConfigMap", namespace, inventory_name(status.instance))
            notes = self._event_annotations()
            if writer is not None:  # every pass it is seen: the Event's count says how often
                self.events.warning(ref, writer.reason, writer.message, annotations=notes)
            if status.instance not in changed:
                continue
            message = f"{status.app} {status.version or '-'}: {status.message}"
            if status.reason == WAVE_HALTED:
                continue  # said once per halt by _report_waves
            if status.phase in (Phase.FAILED, Phase.STALLED):
                reason = status.reason or str(status.phase)
                self.events.warning(ref, reason, message, annotations=notes)
            elif status.phase is Phase.READY:
                self.events.normal(ref, "ReconcileSucceeded", message, annotations=notes)

    def _report_rollouts(self, report: PassReport) -> None:
        """Metrics and an Event for each rollout step a person cares about (best effort)."""
        for status in report.statuses:
            before = self.statuses.get(status.instance)
            last = before.rollout if before is not None else None
            self.metrics.observe_rollout(report.cluster, status.instance, last, status.rollout)
            namespace = report.namespaces.get(status.instance, "")
            if status.rollout is None or not namespace or not noteworthy(last, status.rollout):
                continue
            ref = ObjectRef("v1", "ConfigMap", namespace, inventory_name(status.instance))
            reason = EVENT_REASONS[status.rollout.state]
            notes = self._event_annotations()
            if status.phase in (Phase.FAILED, Phase.STALLED):
                self.events.warning(ref, reason, status.message, annotations=notes)
            else:
                self.events.normal(ref, reason, status.message, annotations=notes)

    def _event_annotations(self) -> dict[str, str]:
        return {PASS_ANNOTATION: self._pass_id} if self._pass_id else {}

    def _health_wait_ended(self, instance: str, outcome: str, seconds: float) -> None:
        self.metrics.observe_health_wait(self.settings.cluster, outcome, seconds)

    def _seed_statuses(self, scope: ShardScope | None = None) -> bool:
        """After a (re)start, the last records come from the status branch, once.

        A rollout in flight continues from its last recorded step and what the
        cluster shows (SPEC section 4, "a restarted reconciler continues"). With
        shards, a shard taken over (again) is read afresh: its instances' records are
        the ones the replica that held it wrote meanwhile, not what we read before.
        True when the branch was fetched and read (the pass's ``record`` need not
        fetch it again).
        """
        gained: frozenset[int] = frozenset()
        if scope is not None:
            gained = scope.held - self._seeded_shards
            self._seeded_shards = scope.held  # a shard lost and taken back is read again
            if not gained and self._seeded:
                return False
        elif self._seeded:
            return False
        self._seeded = True
        try:
            recorded = self.ledger.read()
        except (SourceError, ValueError) as e:
            log.warning(
                "cannot read the last status records: %s",
                e,
                extra={"cluster": self.settings.cluster},
            )
            return False
        for name, status in recorded.items():
            if scope is None:
                self.statuses.setdefault(name, status)
            elif shard_of(name, scope.count) in gained:
                self.statuses[name] = status
        return True

    def _holding(self, plan: InstancePlan) -> bool:
        """Skip a failing instance until its backoff ends, unless its inputs changed."""
        name = plan.name
        if name not in self._failed_inputs:
            return False
        if plan_fingerprint(plan) != self._failed_inputs[name]:
            self.backoff.reset(name)  # a new commit touched it: try the fix at once
            del self._failed_inputs[name]
            return False
        return not self.backoff.ready(name, time.monotonic())

    def _holding_removal(self, name: str, commit: str) -> bool:
        """Skip a failed uninstall until its backoff ends, unless the catalog moved.

        A new commit may fix the uninstall migration (or restore the file), so it is
        tried at once; otherwise its Job is not re-run on every pass.
        """
        if name not in self._failed_removals:
            return False
        if self._failed_removals[name] != commit:
            self.backoff.reset(name)
            del self._failed_removals[name]
            return False
        return not self.backoff.ready(name, time.monotonic())

    def _update_backoff(self, report: PassReport) -> None:
        now = time.monotonic()
        plans = {o.name: o for o in report.plans}
        for status in report.statuses:
            self.statuses[status.instance] = status
            plan = plans.get(status.instance)
            failed = status.phase is Phase.FAILED or status.reason == MIGRATION_FAILED
            if failed and plan is not None:
                if status.instance not in self._failed_inputs or self.backoff.ready(
                    status.instance, now
                ):
                    self.backoff.failed(status.instance, now)
                self._failed_inputs[status.instance] = plan_fingerprint(plan)
            else:
                self.backoff.succeeded(status.instance)
                self._failed_inputs.pop(status.instance, None)
        for result in report.removed:
            name = result.instance
            if result.ok or result.reason == PRUNE_REFUSED:  # the guard needs a commit
                self.backoff.succeeded(name)
                self._failed_removals.pop(name, None)
            elif name not in self._failed_removals or self.backoff.ready(name, now):
                self.backoff.failed(name, now)
                self._failed_removals[name] = report.commit
        self.backoff.forget_except(set(plans) | set(self._failed_removals))

    def next_retry_in(self) -> float | None:
        """Seconds until the earliest backing-off instance may be retried."""
        now = time.monotonic()
        at = self.backoff.next_retry_at(now)
        return None if at is None else max(0.0, at - now)

    def record(
        self,
        statuses: tuple[InstanceStatus, ...],
        commit: str,
        *,
        refresh: bool = True,
        known: frozenset[str] | None = None,
    ) -> tuple[list[CommitInfo], str | None]:
        """Commit changed records; a failed push is retried on the next pass, never lost.

        ``refresh=False``: this pass fetched the status branch already (``StatusLedger.record``).
        ``known``: the instances of the catalog and the cluster; records of others go.
        """
        try:
            pass_id = self._pass_id or None
            recorded = self.ledger.record(
                statuses, source_commit=commit, pass_id=pass_id, refresh=refresh, known=known
            )
            return recorded, None
        except SourceError as e:
            log.error("cannot write status: %s", e, extra={"cluster": self.settings.cluster})
            self.metrics.count_status_push_failure(self.settings.cluster)
            return [], f"{e.reason}: {e}"

    def _report_waves(self, report: PassReport, changed: set[str]) -> None:
        """The wave gate's metrics (instances waiting per app and wave, halts, the
        measurements of waves' analyses) and Events.

        A halt counts once, and an instance's Event says once that it waits or halts:
        in the pass whose status commit starts it (a later commit while it lasts, e.g.
        one more failed cluster named, is the same halt). A commit that failed to push
        is tried again by the next pass, which then counts it.
        """
        waiting: dict[tuple[str, str], int] = {}
        for hold in report.waves:
            self.metrics.count_measurements(hold.measured)
            key = (hold.app, hold.decision.wave)
            if isinstance(hold.decision, Waiting):
                waiting[key] = waiting.get(key, 0) + 1
            if not hold.started or hold.instance not in changed:
                continue
            namespace = report.namespaces.get(hold.instance, "")
            ref = ObjectRef("v1", "ConfigMap", namespace, inventory_name(hold.instance))
            notes = self._event_annotations()
            message = f"{hold.app} {hold.version}: {hold.decision.message}"
            if isinstance(hold.decision, Halted):
                self.metrics.count_wave_halt(*key)
                if namespace:
                    self.events.warning(ref, WAVE_HALTED, message, annotations=notes)
            elif namespace:
                self.events.normal(ref, WAITING_FOR_WAVE, message, annotations=notes)
        self.metrics.set_wave_waiting(waiting)

    def _report_metrics(self, report: PassReport, seconds: float, ok: bool) -> None:
        cluster = self.settings.cluster
        self.metrics.observe_pass(cluster, seconds, ok=ok)
        self.metrics.set_phases(cluster, report.phase_counts())
        self.metrics.set_instances(cluster, report.statuses)
        counts = {str(action): count for action, count in report.action_counts.items()}
        self.metrics.count_actions(cluster, counts)
        self.metrics.set_throttled(cluster, self.client.budget.throttled)
        for event in report.migrations:
            record = event.record
            self.metrics.observe_migration(record.name, record.phase, record.outcome, event.seconds)


def pass_summary(
    number: int, report: PassReport, committed: set[str], seconds: float
) -> str | None:
    """The pass's summary line, or None when it changed nothing (``Daemon._log_summary``)."""
    changed = committed | {e.instance for e in report.changed_entries}
    changed |= {r.instance for r in report.removed}
    if not changed:
        return None
    waiting = sum(
        1
        for s in report.statuses
        if s.rollout is not None and s.rollout.state is RollingState.WAITING
    )
    failed = sum(1 for s in report.statuses if s.phase in (Phase.FAILED, Phase.STALLED))
    return (
        f"pass {number}: {len(changed)} changed, {waiting} waiting for promotion, "
        f"{failed} failed ({seconds:.1f} s)"
    )
