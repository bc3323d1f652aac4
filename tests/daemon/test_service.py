"""The running daemon: webhook and poll triggers, shutdown mid-pass, leader failover.

Each test runs ``Service`` on a thread against a real catalog repository and the
sandbox, changes Git the way a user would, and waits (bounded) for the cluster
and the status branch to follow.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from reconciler.daemon.loop import Daemon, PassOutcome
from reconciler.daemon.passes import PassReport
from reconciler.daemon.service import Service, parse_address
from reconciler.daemon.triggers import TriggerQueue
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import SourceError
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World
from tests.daemon.test_pass import CHANNELS

SECRET = "s3cret-for-tests"


# a bound for a machine whose cores other processes keep busy, not a figure: a check
# that holds returns at its first look
EVENTUALLY = 120.0


def eventually(check: Callable[[], bool], timeout: float = EVENTUALLY) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout}s")


def status_log(world: World) -> list[str]:
    """The status branch's subjects, newest first; empty until the branch exists."""
    try:
        return [line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, "status/prod")]
    except SourceError:
        return []


def web_image(world: World) -> str:
    obj = world.client.get(ObjectRef("apps/v1", "Deployment", "web", "web"))
    return "" if obj is None else str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


@contextmanager
def serving(service: Service) -> Iterator[list[BaseException]]:
    """``service.run()`` on a thread, shut down and joined at the end; what it raised."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            service.run()
        except BaseException as e:  # the test reads it
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield errors
    finally:
        service.shutdown("test finished")
        thread.join(timeout=30)
        assert not thread.is_alive()


@contextmanager
def running(daemon: Daemon) -> Iterator[Service]:
    service = Service(daemon, install_signals=False)
    with serving(service):
        yield service


def test_parse_address() -> None:
    assert parse_address(":8080") == ("0.0.0.0", 8080)
    assert parse_address("127.0.0.1:9") == ("127.0.0.1", 9)
    assert parse_address("8081") == ("0.0.0.0", 8081)


def test_webhook_push_starts_a_pass_at_once(world: World) -> None:
    daemon = world.new_daemon(
        interval=3600.0, drift_interval=3600.0, metrics_address="127.0.0.1:0", webhook_secret=SECRET
    )
    with running(daemon) as service:
        eventually(lambda: web_image(world).endswith(":6.5.0"))
        world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(
            f"http://127.0.0.1:{service.http_port}/hooks/generic",
            data=body,
            headers={"X-Reconciler-Signature": signature, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 202
        eventually(lambda: web_image(world).endswith(":6.6.0"))
        # 6.6.0 rolls in batches: the service schedules each next look by itself
        eventually(
            lambda: (
                "prod/web: rollout podinfo 6.5.0 -> 6.6.0: succeeded"
                in log_oneline(world.repo.remote, "status/prod")[0]
            )
        )

        def all_ready() -> bool:
            # the gauge is set after the pass's status commit: look until it is
            url = f"http://127.0.0.1:{service.http_port}/metrics"
            with urllib.request.urlopen(url) as response:
                metrics = response.read().decode()
            return 'reconciler_instances{cluster="prod",phase="Ready"} 2.0' in metrics

        eventually(all_ready)


def test_poll_picks_up_a_commit_within_the_interval(world: World) -> None:
    daemon = world.new_daemon(interval=0.3, jitter=0.0, drift_interval=3600.0)
    with running(daemon):
        eventually(lambda: web_image(world).endswith(":6.5.0"))
        world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
        eventually(lambda: web_image(world).endswith(":6.6.0"))


def test_shutdown_finishes_the_in_flight_pass_and_its_status(world: World) -> None:
    daemon = world.new_daemon(interval=3600.0, drift_interval=3600.0)
    started = threading.Event()
    original = daemon.run_pass

    def slow_pass() -> object:
        started.set()
        time.sleep(0.3)  # the shutdown arrives while this pass runs
        return original()

    daemon.run_pass = slow_pass  # type: ignore[method-assign]
    service = Service(daemon, install_signals=False)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    assert started.wait(10)
    service.shutdown("SIGTERM (simulated)")
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(status_log(world)) == 2  # both records pushed


@pytest.mark.slow
def test_leader_failover_loses_and_duplicates_nothing(world: World) -> None:
    timings = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}
    common = {
        "interval": 0.3,
        "jitter": 0.0,
        "drift_interval": 3600.0,
        "leader_elect": True,
        "leader_namespace": "default",
        "lease_name": "reconciler-prod",
        **timings,
    }
    first = world.new_daemon(identity="replica-a", cache_dir=world.cache / "a", **common)
    second = world.new_daemon(identity="replica-b", cache_dir=world.cache / "b", **common)
    with running(first) as a, running(second) as b:
        eventually(lambda: a.leading != b.leading)
        leader, standby = (a, b) if a.leading else (b, a)
        eventually(lambda: leader.daemon.metrics.is_leader._value.get() == 1)
        assert standby.daemon.metrics.is_leader._value.get() == 0  # a standby does not act
        eventually(lambda: web_image(world).endswith(":6.5.0"))
        eventually(lambda: len(status_log(world)) == 2)
        # the leader dies without releasing its Lease: the standby waits for expiry
        assert leader.elector is not None
        leader.elector.release_on_cancel = False
        leader.shutdown("killed")
        world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
        eventually(lambda: standby.leading)
        # 6.6.0 rolls in batches; the new leader drives every step of it
        eventually(lambda: "succeeded" in log_oneline(world.repo.remote, "status/prod")[0])
        assert web_image(world).endswith(":6.6.0")
    subjects = [line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, "status/prod")]
    rollout = "prod/web: rollout podinfo 6.5.0 -> 6.6.0: "
    assert list(reversed(subjects)) in (
        [first, second, *[rollout + step for step in STEPS]]
        for first, second in (
            ("prod/web: podinfo 6.5.0 (Ready)", "prod/api: podinfo 6.6.0 (Ready)"),
            ("prod/api: podinfo 6.6.0 (Ready)", "prod/web: podinfo 6.5.0 (Ready)"),
        )
    )  # nothing lost, nothing duplicated


STEPS = [
    "started, 3 batches",
    "batch 1/3 ready (1/5 replicas)",
    "batch 2/3 ready (3/5 replicas)",
    "batch 3/3 ready (5/5 replicas)",
    "succeeded (5/5 replicas)",
]


def test_watch_reconciles_a_local_checkout_on_save(world: World) -> None:
    daemon = world.new_daemon(
        repo=str(world.repo.work), watch=True, interval=3600.0, drift_interval=3600.0
    )
    with running(daemon):
        eventually(lambda: web_image(world).endswith(":6.5.0"))
        # saved, not committed: watch mode applies the working tree as it is on disk
        (world.repo.work / "apps/podinfo/channels.yaml").write_text(CHANNELS.format(stable="6.6.0"))
        eventually(lambda: web_image(world).endswith(":6.6.0"))
        eventually(lambda: daemon.ledger.read()["web"].version == "6.6.0")
    record = daemon.ledger.read()["web"]
    assert record.source_commit.endswith("-dirty")  # HEAD did not hold what was applied


@pytest.mark.slow
def test_multi_step_upgrade_goes_through_intermediate_versions(world: World) -> None:
    version = (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: {v}\n"
        "{upgrade}images: {{podinfo: 'ghcr.io/stefanprodan/podinfo:{v}'}}\n"
        "parameters: {{replicas: {{default: 2}}, message: {{default: hello}}}}\n"
    )
    manifest = (
        world.repo.work / "apps/podinfo/versions/6.5.0/manifests/deployment.yaml"
    ).read_text()
    world.commit("apps/podinfo/versions/6.4.0/version.yaml", version.format(v="6.4.0", upgrade=""))
    world.commit("apps/podinfo/versions/6.4.0/manifests/deployment.yaml", manifest)
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.4.0"), "stable -> 6.4.0")
    world.daemon.run_pass()
    assert web_image(world).endswith(":6.4.0")
    # 6.6.0 accepts upgrades only from >=6.5.0: 6.4.0 must go through 6.5.0 first
    v660 = world.repo.work / "apps/podinfo/versions/6.6.0/version.yaml"
    world.commit(
        v660.relative_to(world.repo.work).as_posix(),
        v660.read_text().replace('">=6.0.0"', '">=6.5.0"'),
        "6.6.0 needs 6.5.0 first",
    )
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "stable -> 6.6.0")
    daemon = world.new_daemon(interval=3600.0, drift_interval=3600.0)
    with running(daemon):
        eventually(lambda: web_image(world).endswith(":6.6.0"))
        eventually(lambda: daemon.ledger.read()["web"].version == "6.6.0")
    web_history = [e for e in daemon.ledger.history("web")]
    assert [(e.version, e.phase) for e in web_history][:2] == [
        ("6.6.0", "Ready"),
        ("6.5.0", "Progressing"),
    ]


def test_the_next_step_of_an_upgrade_path_is_due_within_max_look(world: World) -> None:
    """A pass that leaves an upgrade path mid-way asks for the next step after 1s, or
    after ``--max-look`` when that is shorter (the pause a rollout's next batch gets)."""
    midway = PassOutcome(
        PassReport(
            "prod",
            "c0ffee",
            statuses=(
                InstanceStatus(
                    "prod", "web", "podinfo", Phase.PROGRESSING, reason="UpgradeInProgress"
                ),
            ),
        )
    )
    due = {}
    now = [100.0]
    for max_look in (0.3, 2.0, 0.01):
        now[0] = 100.0
        service = Service(world.new_daemon(max_look=max_look), install_signals=False)
        service.queue = TriggerQueue(clock=lambda: now[0])
        service._schedule_follow_up(midway)
        for waited in (0.0, 0.1, 0.3, 1.0):
            now[0] = 100.0 + waited
            trigger = service.queue.wait(timeout=0)
            if trigger is not None:
                assert trigger.detail == "next step of an upgrade path"
                due[max_look] = waited
                break
    assert due == {0.3: 0.3, 2.0: 1.0, 0.01: 0.1}  # never sooner than the 100ms floor


def test_a_crashing_pass_does_not_stop_the_daemon(world: World) -> None:
    daemon = world.new_daemon(interval=0.2, jitter=0.0, drift_interval=3600.0)
    original = daemon.run_pass
    calls = []

    def flaky() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in a stage")
        return original()

    daemon.run_pass = flaky  # type: ignore[method-assign]
    with running(daemon) as service:
        eventually(lambda: web_image(world).endswith(":6.5.0"))  # a later pass still ran
        assert service.health.liveness()[0]


def test_lease_is_released_only_after_the_in_flight_pass(world: World) -> None:
    """Issue 8: SIGTERM mid-pass kept applying after the Lease was released (two writers)."""
    daemon = world.new_daemon(
        interval=3600.0,
        drift_interval=3600.0,
        leader_elect=True,
        leader_namespace="default",
        lease_name="reconciler-prod",
        identity="replica-a",
        lease_duration=1.0,
        renew_deadline=0.6,
        retry_period=0.1,
    )
    in_pass, finish = threading.Event(), threading.Event()
    original = daemon.run_pass

    def slow_pass() -> object:
        in_pass.set()
        finish.wait(timeout=20)
        return original()

    daemon.run_pass = slow_pass  # type: ignore[method-assign]
    lease = ObjectRef("coordination.k8s.io/v1", "Lease", "default", "reconciler-prod")

    def holder() -> str:
        body = world.client.get(lease) or {}
        return str((body.get("spec") or {}).get("holderIdentity") or "")

    service = Service(daemon, install_signals=False)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        assert in_pass.wait(timeout=20)
        service.shutdown("SIGTERM")
        time.sleep(1.5)  # longer than the lease duration: a released Lease would show now
        assert holder() == "replica-a"
        finish.set()
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert holder() == ""  # released once the loop stopped
    finally:
        finish.set()
        service.shutdown("test finished")
        thread.join(timeout=30)


def test_a_missing_lease_namespace_is_named_with_its_remedy(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """A daemon run by hand where its namespace was never created cannot take its
    single-writer Lease (404 on the namespace): the warning says to create that
    namespace or name another, not to grant access to Leases. The daemon still runs."""
    daemon = world.new_daemon(interval=3600.0, leader_namespace="nowhere-to-be-found")
    with caplog.at_level(logging.WARNING), running(daemon):
        eventually(lambda: "cannot take the Lease" in caplog.text)
    assert "create the namespace nowhere-to-be-found" in caplog.text
    assert "--leader-elect-namespace" in caplog.text
    assert "grant access to Leases" not in caplog.text
