"""DaemonMetrics: names, labels and values as Prometheus parses them back."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.daemon.metrics import ACTIONS, PHASES, DaemonMetrics


def samples(metrics: DaemonMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, keyed by name and sorted labels."""
    found = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_all_families_are_exported_with_their_types() -> None:
    text = DaemonMetrics().render().decode()
    # prometheus_client adds a ``<name>_created`` gauge per unlabelled counter/histogram.
    # process_* and python_* come from prometheus_client's standard collectors
    families = {
        f.name: f.type
        for f in text_string_to_metric_families(text)
        if not f.name.endswith("_created") and f.name.startswith("reconciler_")
    }
    assert families == {
        "reconciler_pass_duration_seconds": "histogram",
        "reconciler_passes": "counter",
        "reconciler_last_successful_pass_timestamp_seconds": "gauge",
        "reconciler_instances": "gauge",
        "reconciler_git_fetch_duration_seconds": "histogram",
        "reconciler_git_fetch_errors": "counter",
        "reconciler_apply_actions": "counter",
        "reconciler_api_throttled": "counter",
        "reconciler_watch_restarts": "counter",
        "reconciler_is_leader": "gauge",
        "reconciler_analysis_measurements": "counter",
        "reconciler_shards_held": "gauge",
        "reconciler_shards_disagreement": "gauge",
        "reconciler_webhooks": "counter",
        "reconciler_image_scans": "counter",
        "reconciler_rollouts": "counter",
        "reconciler_rollout_batch_duration_seconds": "histogram",
        "reconciler_instance_rollout_batch": "gauge",
        "reconciler_migration_duration_seconds": "histogram",
        "reconciler_build_info": "gauge",
        "reconciler_instance_info": "gauge",
        "reconciler_api_requests": "counter",
        "reconciler_api_retries": "counter",
        "reconciler_status_push_failures": "counter",
        "reconciler_health_wait_seconds": "histogram",
        "reconciler_wave_gate_waiting": "gauge",
        "reconciler_wave_halts": "counter",
    }


def test_migration_runs_are_timed_by_migration_phase_and_outcome() -> None:
    metrics = DaemonMetrics()
    metrics.observe_migration("add-index", "pre", "succeeded", 41.2)
    metrics.observe_migration("add-index", "pre", "notNeeded", 0.004)
    got = samples(metrics)
    ran = (("migration", "add-index"), ("outcome", "succeeded"), ("phase", "pre"))
    skipped = (("migration", "add-index"), ("outcome", "notNeeded"), ("phase", "pre"))
    assert got[("reconciler_migration_duration_seconds_sum", ran)] == pytest.approx(41.2)
    bucket = "reconciler_migration_duration_seconds_bucket"
    assert got[(bucket, (("le", "15.0"), *ran))] == 0
    assert got[(bucket, (("le", "0.01"), *skipped))] == 1
    with pytest.raises(ValueError, match="unknown migration outcome"):
        metrics.observe_migration("add-index", "pre", "skipped", 1.0)


def test_pass_observations() -> None:
    metrics = DaemonMetrics(clock=lambda: 1_700_000_000.0)
    metrics.observe_pass("prod", 0.3, ok=True)
    metrics.observe_pass("prod", 42.0, ok=False)
    got = samples(metrics)
    cluster = (("cluster", "prod"),)
    assert got[("reconciler_pass_duration_seconds_count", cluster)] == 2
    assert got[("reconciler_pass_duration_seconds_sum", cluster)] == pytest.approx(42.3)
    assert got[("reconciler_pass_duration_seconds_bucket", (*cluster, ("le", "0.5")))] == 1
    assert got[("reconciler_pass_duration_seconds_bucket", (*cluster, ("le", "60.0")))] == 2
    assert got[("reconciler_passes_total", (*cluster, ("result", "success")))] == 1
    assert got[("reconciler_passes_total", (*cluster, ("result", "failure")))] == 1
    assert got[("reconciler_last_successful_pass_timestamp_seconds", cluster)] == 1_700_000_000.0


def test_failed_pass_does_not_move_last_success() -> None:
    metrics = DaemonMetrics(clock=lambda: 5.0)
    metrics.observe_pass("prod", 1.0, ok=False)
    assert not any(
        name == "reconciler_last_successful_pass_timestamp_seconds" for name, _ in samples(metrics)
    )


def test_phases_cover_every_phase_and_drop_to_zero() -> None:
    metrics = DaemonMetrics()
    metrics.set_phases("prod", {"Ready": 3, "Failed": 1})
    metrics.set_phases("prod", {"Ready": 4, "Custom": 2})
    got = samples(metrics)

    def phase(name: str) -> float:
        return got[("reconciler_instances", (("cluster", "prod"), ("phase", name)))]

    assert phase("Ready") == 4
    assert phase("Failed") == 0  # gone since the first pass
    assert phase("Custom") == 2
    assert all(phase(p) == 0 for p in PHASES if p != "Ready")


def test_fetch_duration_and_errors() -> None:
    metrics = DaemonMetrics()
    metrics.observe_fetch(0.2, ok=True)
    metrics.observe_fetch(3.0, ok=False)
    got = samples(metrics)
    assert got[("reconciler_git_fetch_duration_seconds_count", ())] == 2
    assert got[("reconciler_git_fetch_errors_total", ())] == 1


def test_apply_actions_accumulate_and_every_action_is_present() -> None:
    metrics = DaemonMetrics()
    metrics.count_actions("prod", {"created": 2, "unchanged": 5})
    metrics.count_actions("prod", {"created": 1, "deleted": 0})
    got = samples(metrics)

    def action(name: str) -> float:
        return got[("reconciler_apply_actions_total", (("action", name), ("cluster", "prod")))]

    assert action("created") == 3
    assert action("unchanged") == 5
    assert {a: action(a) for a in ACTIONS if a not in ("created", "unchanged")} == dict.fromkeys(
        ("configured", "deleted", "skipped", "failed"), 0
    )


def test_leader_and_webhooks() -> None:
    metrics = DaemonMetrics()
    metrics.set_leader(True)
    metrics.count_webhook("github", "triggered")
    metrics.count_webhook("github", "rejected")
    got = samples(metrics)
    assert got[("reconciler_is_leader", ())] == 1
    key = ("reconciler_webhooks_total", (("provider", "github"), ("result", "rejected")))
    assert got[key] == 1
    metrics.set_leader(False)
    assert samples(metrics)[("reconciler_is_leader", ())] == 0


def test_shards_held_gauge_starts_at_zero_and_follows_the_leases() -> None:
    metrics = DaemonMetrics()
    metrics.start("prod")
    key = ("reconciler_shards_held", (("cluster", "prod"),))
    assert samples(metrics)[key] == 0
    metrics.set_shards_held("prod", 2)
    assert samples(metrics)[key] == 2


def test_bad_arguments_are_refused() -> None:
    metrics = DaemonMetrics()
    with pytest.raises(ValueError, match="Ready: count must not be negative"):
        metrics.set_phases("prod", {"Ready": -1})
    with pytest.raises(ValueError, match="created: count must not be negative"):
        metrics.count_actions("prod", {"created": -2})
    with pytest.raises(ValueError, match="unknown webhook result"):
        metrics.count_webhook("github", "maybe")


def test_two_daemons_in_one_process_do_not_clash() -> None:
    first, second = DaemonMetrics(), DaemonMetrics()
    first.observe_fetch(1.0, ok=False)
    assert samples(first)[("reconciler_git_fetch_errors_total", ())] == 1
    assert samples(second)[("reconciler_git_fetch_errors_total", ())] == 0
