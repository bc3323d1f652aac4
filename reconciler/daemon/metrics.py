"""Prometheus metrics of the daemon, in a registry of its own.

The reconcile loop reports what it did through the plain-argument helpers
(``observe_pass``, ``set_phases``, ``observe_fetch``, ``count_actions``,
``set_leader``, ``set_shards_held``, ``set_shards_disagreement``, ``count_webhook``,
``observe_migration``,
``set_instances``, ``count_status_push_failure``, ``observe_health_wait``,
``set_throttled``, ``set_wave_waiting``, ``count_wave_halt``); the
Kubernetes client reports its answers and retries through
``reconciler.kube.observe`` (``count_request``, ``count_retry``), since ``kube/``
cannot import the daemon. ``DaemonHttpServer`` serves ``render()`` on ``GET
/metrics``. Each ``DaemonMetrics`` owns a ``CollectorRegistry`` instead of using
prometheus_client's global one, so tests and several daemons in one process
never clash over metric names; the standard ``process_*`` and ``python_*``
collectors are registered on it too, as every Prometheus exporter has them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import reconciler
from reconciler.kube import observe
from reconciler.model.analysis import RESULTS, Measurement
from reconciler.model.rollout import BatchState, RollingState, RolloutRecord
from reconciler.model.status import InstanceStatus, Phase

# Content type of ``render()``, for the HTTP layer.
CONTENT_TYPE = CONTENT_TYPE_LATEST

# The kstatus-style phases of an InstanceStatus (SPEC section 3). Every one is
# always exported per cluster, at 0 when empty, so dashboards need no absent().
PHASES = ("Ready", "Progressing", "Stalled", "Failed", "Suspended")

# The change-set actions of an apply (ARCHITECTURE habit 1) plus ``failed``.
ACTIONS = ("created", "configured", "unchanged", "deleted", "skipped", "failed")

WEBHOOK_RESULTS = ("triggered", "ignored", "rejected")

# A pass spans fetch, render, apply and health waits: from sub-second to minutes.
PASS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
FETCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# A migration is a state check (milliseconds when the cluster is in shape) or a run
# (a Job: seconds to an hour).
MIGRATION_BUCKETS = (0.01, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)
MIGRATION_OUTCOMES = ("succeeded", "notNeeded", "failed")


PASS_RESULTS = ("success", "failure", "error")

# How a health wait ended: the objects became healthy, one failed outright (a pod
# in CrashLoopBackOff, a failed Job), or --health-timeout passed first.
HEALTH_WAIT_OUTCOMES = ("healthy", "failed", "timeout")
# --health-timeout defaults to 120s; waits run from a second to many minutes.
HEALTH_WAIT_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

# The labels of reconciler_instance_info, in order.
INSTANCE_INFO_LABELS = ("cluster", "instance", "app", "version", "desired", "phase", "reason")


# the label sets of reconciler_api_retries_total created at start-up: the client's write
# and read verbs, with the answers it retries most (throttled, and no answer at all)
RETRY_VERBS = ("GET", "POST", "PUT", "PATCH", "DELETE")
RETRY_CODES = ("429", "error")


class DaemonMetrics:
    """Every metric the daemon exports, and the helpers the loop calls."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        # the same collectors prometheus_client puts on its global registry
        # (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR), on this one
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.build_info = Gauge(
            "reconciler_build_info",
            "Always 1; the labels say which reconciler and Python this daemon runs.",
            ["version", "python"],
            registry=self.registry,
        )
        build = reconciler.version_info()
        self.build_info.labels(build["version"], build["python"]).set(1)
        self.pass_duration = Histogram(
            "reconciler_pass_duration_seconds",
            "Duration of a reconcile pass.",
            ["cluster"],
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.passes = Counter(
            "reconciler_passes",
            "Reconcile passes, by result (success: every instance handled without error).",
            ["cluster", "result"],
            registry=self.registry,
        )
        self.last_success = Gauge(
            "reconciler_last_successful_pass_timestamp_seconds",
            "Unix time at which the last successful pass ended.",
            ["cluster"],
            registry=self.registry,
        )
        self.instances = Gauge(
            "reconciler_instances",
            "Instances by phase after the last pass.",
            ["cluster", "phase"],
            registry=self.registry,
        )
        self.fetch_duration = Histogram(
            "reconciler_git_fetch_duration_seconds",
            "Duration of a Git fetch of the catalog.",
            buckets=FETCH_BUCKETS,
            registry=self.registry,
        )
        self.fetch_errors = Counter(
            "reconciler_git_fetch_errors",
            "Git fetches of the catalog that failed.",
            registry=self.registry,
        )
        self.apply_actions = Counter(
            "reconciler_apply_actions",
            "Objects handled by apply, by action.",
            ["cluster", "action"],
            registry=self.registry,
        )
        self._throttled_seen: dict[str, int] = {}  # the client's total, last reported
        self.api_throttled = Counter(
            "reconciler_api_throttled",
            "API requests the API server turned away (429, or 503 with Retry-After) "
            "and that were sent again after waiting.",
            ["cluster"],
            registry=self.registry,
        )
        self.watch_restarts = Counter(
            "reconciler_watch_restarts",
            "Watches of live objects started again, by reason (expired: the version was "
            "too old, 410 Gone, and the kind was listed again; failed: the connection or "
            "request failed, retried with backoff; ended: the server ended the stream at "
            "its timeout, as it should).",
            ["cluster", "reason"],
            registry=self.registry,
        )
        self.is_leader = Gauge(
            "reconciler_is_leader",
            "1 when this replica acts: it holds the leader Lease, leader election is off "
            "(a single replica leads), or with --shards it holds at least one shard; else 0.",
            registry=self.registry,
        )
        self.shards_held = Gauge(
            "reconciler_shards_held",
            "Shards whose Lease this replica holds (--shards; 0 without it). The instance "
            "gauges count the instances of these shards only.",
            ["cluster"],
            registry=self.registry,
        )
        self.shards_disagreement = Gauge(
            "reconciler_shards_disagreement",
            "1 when the shard Leases show a replica of this cluster run with another "
            "--shards than this one (some shards may have no owner); else 0.",
            ["cluster"],
            registry=self.registry,
        )
        self.webhooks = Counter(
            "reconciler_webhooks",
            "Webhook deliveries received, by provider and result.",
            ["provider", "result"],
            registry=self.registry,
        )
        self.image_scans = Counter(
            "reconciler_image_scans",
            "Image scans of run --scan-images, by result (changed: builds.yaml commits "
            "pushed; unchanged; failed: a registry or the catalog remote failed, nothing "
            "pushed).",
            ["result"],
            registry=self.registry,
        )
        self.analysis_measurements = Counter(
            "reconciler_analysis_measurements",
            "Prometheus measurements of rollout batches, by result (passed, failed, inconclusive).",
            ["result"],
            registry=self.registry,
        )
        for result in RESULTS:  # at 0 from the start, so rate() sees the first failure
            self.analysis_measurements.labels(result)
        self.rollouts = Counter(
            "reconciler_rollouts",
            "Batch rollouts that ended, by result (rolloutSucceed, rolloutFailed, rolledBack, "
            "rolloutAbandoned).",
            ["cluster", "result"],
            registry=self.registry,
        )
        self.rollout_batch_duration = Histogram(
            "reconciler_rollout_batch_duration_seconds",
            "Time from a batch's start to its batchReady.",
            ["cluster"],
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.rollout_batch = Gauge(
            "reconciler_instance_rollout_batch",
            "The batch an instance's unfinished rollout is in (0: none).",
            ["cluster", "instance"],
            registry=self.registry,
        )
        self.migration_duration = Histogram(
            "reconciler_migration_duration_seconds",
            "Migration hook runs (state check plus run), by migration, phase and outcome.",
            ["migration", "phase", "outcome"],
            buckets=MIGRATION_BUCKETS,
            registry=self.registry,
        )
        self.instance_info = InstanceInfo(registry=self.registry)
        self.api_requests = Counter(
            "reconciler_api_requests",
            "Kubernetes API requests answered, by HTTP verb and status code "
            '(code "error": no answer).',
            ["verb", "code"],
            registry=self.registry,
        )
        self._request_counters: dict[tuple[str, str], Counter] = {}  # (verb, code) -> child
        self.api_retries = Counter(
            "reconciler_api_retries",
            "Kubernetes API requests sent again, by HTTP verb and the code that made the "
            'client retry (429, 5xx, or "error": no answer).',
            ["verb", "code"],
            registry=self.registry,
        )
        self.status_push_failures = Counter(
            "reconciler_status_push_failures",
            "Passes whose status commits could not be pushed to the status branch "
            "(retried on the next pass).",
            ["cluster"],
            registry=self.registry,
        )
        self.health_wait = Histogram(
            "reconciler_health_wait_seconds",
            "Time from a change to an instance's objects until they were healthy, failed, "
            "or ran out of --health-timeout (outcome).",
            ["cluster", "outcome"],
            buckets=HEALTH_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.wave_waiting = Gauge(
            "reconciler_wave_gate_waiting",
            "Instances of this cluster holding on their version until earlier waves prove "
            "the new one (WaitingForWave), by app and by the wave whose gate holds them.",
            ["app", "wave"],
            registry=self.registry,
        )
        self.wave_halts = Counter(
            "reconciler_wave_halts",
            "Instances that became WaveHalted: earlier waves failed the version beyond "
            "maxFailures, so this cluster never starts it.",
            ["app", "wave"],
            registry=self.registry,
        )
        self._waiting_seen: set[tuple[str, str]] = set()
        self._phases_seen: dict[str, set[str]] = {}
        observe.add_listener(self)

    def start(self, cluster: str) -> None:
        """Create the per-cluster series at start-up, before any pass ends.

        An alert on ``time() - reconciler_last_successful_pass_timestamp_seconds``
        must fire for a daemon that never completes a pass (every pass crashes),
        so the gauge starts at the start time instead of being absent; the pass
        counters start at 0 so ``rate()`` sees the first failure.
        """
        self.last_success.labels(cluster).set(self._clock())
        for result in PASS_RESULTS:
            self.passes.labels(cluster, result)
        self.shards_held.labels(cluster).set(0)
        self.shards_disagreement.labels(cluster).set(0)
        self.status_push_failures.labels(cluster)
        for outcome in HEALTH_WAIT_OUTCOMES:
            self.health_wait.labels(cluster, outcome)
        # A single replica leads; leader election and --shards set it to 0 until
        # they hold a Lease (reconciler.daemon.service).
        self.set_leader(True)
        self.api_throttled.labels(cluster)
        # Series that appear only with their first event read "No data" in Grafana
        # until then, and increase() misses that first event: start them at zero.
        for state in RollingState:
            if state.terminal:
                self.rollouts.labels(cluster, str(state))
        self.rollout_batch_duration.labels(cluster)
        for verb in RETRY_VERBS:
            for code in RETRY_CODES:
                self.api_retries.labels(verb, code)

    def observe_pass(
        self, cluster: str, seconds: float, ok: bool, *, crashed: bool = False
    ) -> None:
        """Record a finished pass; a successful one also moves the last-success time.

        ``crashed``: the pass raised (a bug, or input nothing caught); it counts
        as ``result="error"`` so it is never invisible to alerts.
        """
        self.pass_duration.labels(cluster).observe(max(seconds, 0.0))
        result = "error" if crashed else ("success" if ok else "failure")
        self.passes.labels(cluster, result).inc()
        if ok and not crashed:
            self.last_success.labels(cluster).set(self._clock())

    def set_phases(self, cluster: str, counts: Mapping[str, int]) -> None:
        """Set the instance count of every phase; phases absent from ``counts`` drop to 0."""
        seen = self._phases_seen.setdefault(cluster, set(PHASES))
        seen.update(counts)
        for phase in sorted(seen):
            self.instances.labels(cluster, phase).set(_count(counts.get(phase, 0), phase))

    def observe_fetch(self, seconds: float, ok: bool) -> None:
        self.fetch_duration.observe(max(seconds, 0.0))
        if not ok:
            self.fetch_errors.inc()

    def count_actions(self, cluster: str, counts: Mapping[str, int]) -> None:
        """Add one apply's change-set counts (``{"created": 2, "unchanged": 5}``)."""
        for action in ACTIONS:
            # Touch every known action so rate() works before the first of its kind.
            self.apply_actions.labels(cluster, action)
        for action, count in counts.items():
            if count:
                self.apply_actions.labels(cluster, action).inc(_count(count, action))

    def set_throttled(self, cluster: str, total: int) -> None:
        """Raise the throttled-requests counter to the client's running ``total``."""
        seen = self._throttled_seen.get(cluster, 0)
        if total > seen:
            self.api_throttled.labels(cluster).inc(total - seen)
            self._throttled_seen[cluster] = total

    def count_measurements(self, measured: Iterable[Measurement]) -> None:
        """Count analysis measurements taken outside a rollout (a wave's, before it opens)."""
        for m in measured:
            self.analysis_measurements.labels(m.result).inc()

    def observe_rollout(
        self,
        cluster: str,
        instance: str,
        before: RolloutRecord | None,
        after: RolloutRecord | None,
    ) -> None:
        """Count a rollout's end and its new measurements, time a batch that became ready,
        show the batch in flight."""
        if after is None:
            return
        seen = {(m.batch, m.name, m.at) for m in before.analysis} if before is not None else set()
        if before is not None and before.started_at != after.started_at:
            seen = set()
        for m in after.analysis:
            if (m.batch, m.name, m.at) not in seen:
                self.analysis_measurements.labels(m.result).inc()
        if after.state.terminal:
            self.rollout_batch.labels(cluster, instance).set(0)
            if (
                before is None
                or before.state != after.state
                or before.to_key != after.to_key  # a rebuild is another rollout
            ):
                self.rollouts.labels(cluster, str(after.state)).inc()
            return
        self.rollout_batch.labels(cluster, instance).set(after.batch)
        became_ready = after.batch_state is BatchState.READY and (
            before is None or (before.batch, before.batch_state) != (after.batch, after.batch_state)
        )
        if became_ready and after.batch_started_at and after.updated_at:
            started = datetime.fromisoformat(after.batch_started_at.replace("Z", "+00:00"))
            ended = datetime.fromisoformat(after.updated_at.replace("Z", "+00:00"))
            self.rollout_batch_duration.labels(cluster).observe(
                max(0.0, (ended - started).total_seconds())
            )

    def set_leader(self, leader: bool) -> None:
        self.is_leader.set(1 if leader else 0)

    def set_shards_held(self, cluster: str, count: int) -> None:
        self.shards_held.labels(cluster).set(count)

    def set_shards_disagreement(self, cluster: str, disagree: bool) -> None:
        self.shards_disagreement.labels(cluster).set(1 if disagree else 0)

    def count_webhook(self, provider: str, result: str) -> None:
        if result not in WEBHOOK_RESULTS:
            raise ValueError(f"unknown webhook result {result!r}")
        self.webhooks.labels(provider, result).inc()

    def observe_migration(self, migration: str, phase: str, outcome: str, seconds: float) -> None:
        """One migration run: ``phase`` is pre, post, uninstall or undo."""
        if outcome not in MIGRATION_OUTCOMES:
            raise ValueError(f"unknown migration outcome {outcome!r}")
        self.migration_duration.labels(migration, phase, outcome).observe(max(seconds, 0.0))

    def set_instances(self, cluster: str, statuses: Iterable[InstanceStatus]) -> None:
        """One ``reconciler_instance_info`` series per instance in ``statuses``.

        ``statuses`` is every instance this replica reconciled in the pass (with
        ``--shards``, those of its shards): an instance no longer among them, or
        removed from Git, loses its series, and an instance whose labels changed
        (a new version, phase or reason) loses the old series, so a query never sees
        two versions of one instance.
        """
        wanted: dict[str, tuple[str, ...]] = {}
        for status in statuses:
            if status.phase is Phase.REMOVED:
                continue
            wanted[status.instance] = (
                cluster,
                status.instance,
                status.app,
                status.version or "",
                status.desired_version or "",
                status.phase.value,  # the enum's own string, not a copy per instance
                status.reason or "",
            )
        self.instance_info.set(cluster, wanted)

    def count_request(self, verb: str, code: str) -> None:
        """One answer of the API server (``reconciler.kube.observe``).

        The counter of each (verb, code) is looked up once and kept: ``labels`` checks
        and joins its values under the metric's lock, for every request otherwise.
        """
        counter = self._request_counters.get((verb, code))
        if counter is None:
            counter = self._request_counters.setdefault(
                (verb, code), self.api_requests.labels(verb, code)
            )
        counter.inc()

    def count_retry(self, verb: str, code: str) -> None:
        """One request sent again (``reconciler.kube.observe``)."""
        self.api_retries.labels(verb, code).inc()

    def count_status_push_failure(self, cluster: str) -> None:
        self.status_push_failures.labels(cluster).inc()

    def set_wave_waiting(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Instances waiting per (app, wave) this pass; pairs no longer waiting drop to 0."""
        for key in self._waiting_seen | set(counts):
            self.wave_waiting.labels(*key).set(counts.get(key, 0))
        self._waiting_seen |= set(counts)

    def count_wave_halt(self, app: str, wave: str) -> None:
        self.wave_halts.labels(app, wave).inc()

    def observe_health_wait(self, cluster: str, outcome: str, seconds: float) -> None:
        if outcome not in HEALTH_WAIT_OUTCOMES:
            raise ValueError(f"unknown health wait outcome {outcome!r}")
        self.health_wait.labels(cluster, outcome).observe(max(seconds, 0.0))

    def metric_names(self) -> set[str]:
        """Every series name this registry can expose (``_total``, ``_bucket``... included).

        For checking that alert rules and dashboards name metrics that exist.
        """
        names: set[str] = set()
        for family in self.registry.collect():
            names.add(family.name)
            names.update(sample.name for sample in family.samples)
            if family.type == "counter":
                names.update({family.name + "_total", family.name + "_created"})
            elif family.type == "histogram":
                names.update(family.name + s for s in ("_bucket", "_count", "_sum", "_created"))
        return names

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)


def _count(value: int, name: str) -> int:
    if value < 0:
        raise ValueError(f"{name}: count must not be negative, got {value}")
    return value


class InstanceInfo(Collector):
    """``reconciler_instance_info``: always 1, one series per instance, made when scraped.

    A labelled ``Gauge`` keeps a child metric per label set (an object with its own
    lock and value, about 1 KiB) for each of thousands of instances, and the daemon
    kept the labels again to know which series to remove. Here the labels are the
    only copy, and the family is built from them at each scrape: the same exposition,
    a fraction of the memory per instance (bench/scale.py at 10,000 instances).
    """

    NAME = "reconciler_instance_info"
    HELP = (
        "Always 1, one series per instance this replica reconciles: its app, the version "
        "running, the desired version, the phase and its reason after the last pass."
    )

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self._series: dict[str, dict[str, tuple[str, ...]]] = {}  # cluster -> instance -> labels
        registry.register(self)

    def set(self, cluster: str, series: dict[str, tuple[str, ...]]) -> None:
        """The cluster's series are now ``series`` (instance -> label values, in
        ``INSTANCE_INFO_LABELS`` order); other clusters' stay."""
        with self._lock:
            if series:
                self._series[cluster] = series
            else:
                self._series.pop(cluster, None)

    def describe(self) -> Iterator[Metric]:
        """The family without samples: what ``CollectorRegistry`` checks names against."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        with self._lock:
            rows = [labels for series in self._series.values() for labels in series.values()]
        for labels in rows:
            family.add_metric(labels, 1.0)
        yield family

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.NAME, self.HELP, labels=INSTANCE_INFO_LABELS)
