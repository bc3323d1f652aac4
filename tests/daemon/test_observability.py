"""Following the daemon: its metrics, and a pass ID across logs, status commits and Events."""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import reconciler
from reconciler.daemon.logs import (
    JsonFormatter,
    TextFormatter,
    current_pass_id,
    pass_scope,
    timestamp,
)
from reconciler.daemon.loop import PASS_ANNOTATION
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.kube import KubeClient, observe
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.ledger import StatusLedger
from reconciler.source.runner import run
from reconciler.status import TRAILER_PASS, parse_trailers
from tests.daemon.conftest import World
from tests.daemon.test_service import eventually, running
from tests.kube.test_client import FAST, Flaky, kubeconfig

Sample = tuple[str, tuple[tuple[str, str], ...]]


def samples(metrics: DaemonMetrics) -> dict[Sample, float]:
    found = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def named(metrics: DaemonMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (n, labels), value in samples(metrics).items() if n == name}


# -- metrics ------------------------------------------------------------------------


def test_leader_gauge_reads_1_for_a_single_replica() -> None:
    """Without --leader-elect the one replica leads: the gauge must say so (it read 0)."""
    metrics = DaemonMetrics()
    metrics.start("prod")
    assert samples(metrics)[("reconciler_is_leader", ())] == 1


def test_process_python_and_build_info_are_exported() -> None:
    got = samples(DaemonMetrics())
    names = {name for name, _ in got}
    # the collectors every Prometheus exporter has (process_* needs /proc: Linux)
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= names
    assert {"python_info", "python_gc_objects_collected_total"} <= names
    build = reconciler.version_info()
    labels = (("python", build["python"]), ("version", build["version"]))
    assert got[("reconciler_build_info", labels)] == 1


def _status(instance: str, version: str, phase: Phase = Phase.READY, **kw: str) -> InstanceStatus:
    return InstanceStatus(
        cluster="prod",
        instance=instance,
        app="podinfo",
        version=version,
        desired_version=kw.get("desired", version),
        phase=phase,
        reason=kw.get("reason", ""),
    )


def test_instance_info_has_one_series_per_instance_and_drops_gone_ones() -> None:
    metrics = DaemonMetrics()
    metrics.set_instances("prod", [_status("web", "6.5.0"), _status("api", "6.6.0")])
    metrics.set_instances(
        "prod",
        [
            _status("web", "6.5.0", Phase.PROGRESSING, desired="6.6.0", reason="Progressing"),
            _status("api", "6.6.0", Phase.REMOVED),
        ],
    )
    info = named(metrics, "reconciler_instance_info")
    assert info == {
        (
            ("app", "podinfo"),
            ("cluster", "prod"),
            ("desired", "6.6.0"),
            ("instance", "web"),
            ("phase", "Progressing"),
            ("reason", "Progressing"),
            ("version", "6.5.0"),
        ): 1
    }  # web's old (Ready) series is gone, api was removed
    metrics.set_instances("prod", [])  # e.g. its shard went to another replica
    assert named(metrics, "reconciler_instance_info") == {}


def test_api_requests_and_retries_are_counted_by_verb_and_code(tmp_path: Path) -> None:
    metrics = DaemonMetrics()
    flaky = Flaky(429, 2)
    thread = threading.Thread(target=flaky.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        client = KubeClient.connect(kubeconfig(tmp_path / "cfg", flaky.url), retry=FAST)
        client.resource("v1", "ConfigMap")
    finally:
        flaky.server.shutdown()
        flaky.server.server_close()
    requests = named(metrics, "reconciler_api_requests_total")
    assert requests[(("code", "429"), ("verb", "GET"))] == 2
    assert requests[(("code", "200"), ("verb", "GET"))] >= 1
    retries = named(metrics, "reconciler_api_retries_total")
    assert retries[(("code", "429"), ("verb", "GET"))] == 2


def test_a_failing_listener_never_fails_a_request(sandbox: object, tmp_path: Path) -> None:
    class Broken:
        def count_request(self, verb: str, code: str) -> None:
            raise RuntimeError("boom")

        def count_retry(self, verb: str, code: str) -> None:
            raise RuntimeError("boom")

    broken = Broken()
    observe.add_listener(broken)
    try:
        client = KubeClient.connect(sandbox.kubeconfig)  # type: ignore[attr-defined]
        assert client.resource("v1", "ConfigMap").plural == "configmaps"
    finally:
        observe.remove_listener(broken)


def test_a_pass_feeds_instance_info_requests_and_health_waits(world: World) -> None:
    outcome = world.daemon.run_pass()
    assert outcome.ok
    world.daemon.flush_events()  # their POSTs are counted once they are sent
    metrics = world.daemon.metrics
    info = named(metrics, "reconciler_instance_info")
    versions = {dict(labels)["instance"]: dict(labels)["version"] for labels in info}
    assert versions == {"web": "6.5.0", "api": "6.6.0"}
    requests = named(metrics, "reconciler_api_requests_total")
    assert requests[(("code", "201"), ("verb", "POST"))] >= 1  # Events created
    waits = named(metrics, "reconciler_health_wait_seconds_count")
    assert waits[(("cluster", "prod"), ("outcome", "healthy"))] >= 1
    assert waits[(("cluster", "prod"), ("outcome", "timeout"))] == 0


def test_a_refused_status_push_is_counted(world: World, tmp_path: Path) -> None:
    hook = world.repo.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'status branch is read-only' >&2\nexit 1\n")
    hook.chmod(0o755)
    daemon = world.new_daemon()
    daemon.ledger = StatusLedger(
        world.repo.url, "prod", cache_dir=tmp_path / "ledger", conflict_attempts=1
    )
    outcome = daemon.run_pass()
    assert outcome.error is not None and not outcome.commits
    failures = named(daemon.metrics, "reconciler_status_push_failures_total")
    assert failures == {(("cluster", "prod"),): 1}


# -- logs ---------------------------------------------------------------------------


def test_timestamps_have_milliseconds_in_both_formats() -> None:
    record = logging.LogRecord("reconciler.daemon", logging.INFO, __file__, 1, "hi", None, None)
    record.created = 1_795_967_197.123456
    assert timestamp(record.created) == "2026-11-29T15:46:37.123Z"
    assert json.loads(JsonFormatter().format(record))["time"] == "2026-11-29T15:46:37.123Z"
    assert TextFormatter().format(record) == "2026-11-29T15:46:37.123Z info: hi"


def test_pass_scope_reuses_an_open_pass_and_ends_with_it() -> None:
    assert current_pass_id() is None
    with pass_scope() as outer:
        assert re.fullmatch(r"[0-9a-f]{8}", outer)
        with pass_scope() as inner:
            assert inner == outer
        record = logging.getLogger("reconciler.test").makeRecord(
            "reconciler.test", logging.INFO, __file__, 1, "in a pass", None, None
        )
    assert current_pass_id() is None
    assert json.loads(JsonFormatter().format(record))["pass"] == outer
    assert TextFormatter().format(record).endswith(f"[pass={outer}]")


@contextmanager
def json_log() -> Iterator[io.StringIO]:
    """The daemon's JSON handler (as ``configure_logging`` sets it) on a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_one_pass_is_followed_across_logs_commits_and_events(world: World) -> None:
    with json_log() as stream:
        outcome = world.daemon.run_pass()
    pass_id = outcome.pass_id
    assert outcome.ok and re.fullmatch(r"[0-9a-f]{8}", pass_id)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    ours = [line for line in lines if line["logger"].startswith("reconciler")]
    assert ours and all(line.get("pass") == pass_id for line in ours)
    # every status commit of the pass names it
    shas = [c.commit for c in outcome.commits]
    assert len(shas) == 2
    for sha in shas:
        text = run(world.repo.remote, ["log", "-1", "--format=%(trailers:only,unfold)", sha])
        assert parse_trailers(text)[TRAILER_PASS] == pass_id
    # and so does every Event it recorded (sent in the background: wait for them)
    world.daemon.flush_events()
    listed = world.client.list("v1", "Event", namespace="web")
    # the cluster's controllers record theirs there too (ScalingReplicaSet, Scheduled...)
    events = [e for e in listed if e.get("reportingComponent") == "reconciler"]
    assert events and len(events) < len(listed)
    for event in events:
        assert event["metadata"]["annotations"][PASS_ANNOTATION] == pass_id
    # the next pass has its own ID
    assert world.daemon.run_pass().pass_id not in ("", pass_id)


# -- start-up -----------------------------------------------------------------------


@pytest.mark.parametrize("election", [False, True], ids=["single", "leader-elect"])
def test_start_up_lines_are_not_repeated(
    world: World, caplog: pytest.LogCaptureFixture, election: bool
) -> None:
    caplog.set_level(logging.INFO)
    extra = (
        {
            "leader_elect": True,
            "leader_namespace": "default",
            "lease_name": "reconciler-prod",
            "identity": "replica-a",
            "lease_duration": 1.0,
            "renew_deadline": 0.6,
            "retry_period": 0.1,
        }
        if election
        else {}
    )
    daemon = world.new_daemon(
        metrics_address="127.0.0.1:0", interval=3600.0, drift_interval=3600.0, **extra
    )
    with running(daemon) as service:
        eventually(lambda: service.health.readiness()[1]["passes"] >= 1)
        assert daemon.metrics.is_leader._value.get() == 1
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    repeated = {m for m in messages if messages.count(m) > 1}
    assert not repeated, f"logged more than once: {repeated}"
    assert sum("serving" in m for m in messages) == 1
    # one line per changed instance, not one more for its status commit
    assert not any(m.startswith("prod/web: ") for m in messages)
    assert not any("lost the leadership" in m for m in messages)  # a shutdown is no loss
