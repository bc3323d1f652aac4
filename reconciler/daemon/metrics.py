"""Prometheus metrics of the daemon, in a registry of its own.

The reconcile loop reports what it did through the plain-argument helpers
(``observe_pass``, ``set_phases``, ``observe_fetch``, ``count_actions``,
``set_leader``, ``count_webhook``, ``observe_migration``, ``set_throttled``);
``DaemonHttpServer`` serves ``render()`` on ``GET /metrics``. Each ``DaemonMetrics`` owns a
``CollectorRegistry`` instead of using prometheus_client's global one, so tests
and several daemons in one process never clash over metric names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reconciler.model.rollout import BatchState, RolloutRecord

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


class DaemonMetrics:
    """Every metric the daemon exports, and the helpers the loop calls."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
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
        self.is_leader = Gauge(
            "reconciler_is_leader",
            "1 when this replica holds the leader lease (or election is off), else 0.",
            registry=self.registry,
        )
        self.webhooks = Counter(
            "reconciler_webhooks",
            "Webhook deliveries received, by provider and result.",
            ["provider", "result"],
            registry=self.registry,
        )
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
        self._phases_seen: dict[str, set[str]] = {}

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
        self.api_throttled.labels(cluster)

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

    def observe_rollout(
        self,
        cluster: str,
        instance: str,
        before: RolloutRecord | None,
        after: RolloutRecord | None,
    ) -> None:
        """Count a rollout's end, time a batch that became ready, show the batch in flight."""
        if after is None:
            return
        if after.state.terminal:
            self.rollout_batch.labels(cluster, instance).set(0)
            if (
                before is None
                or before.state != after.state
                or before.to_version != after.to_version
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

    def count_webhook(self, provider: str, result: str) -> None:
        if result not in WEBHOOK_RESULTS:
            raise ValueError(f"unknown webhook result {result!r}")
        self.webhooks.labels(provider, result).inc()

    def observe_migration(self, migration: str, phase: str, outcome: str, seconds: float) -> None:
        """One migration run: ``phase`` is pre, post, uninstall or undo."""
        if outcome not in MIGRATION_OUTCOMES:
            raise ValueError(f"unknown migration outcome {outcome!r}")
        self.migration_duration.labels(migration, phase, outcome).observe(max(seconds, 0.0))

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)


def _count(value: int, name: str) -> int:
    if value < 0:
        raise ValueError(f"{name}: count must not be negative, got {value}")
    return value
