"""The daemon never waits on health (SPEC section 4): slow pods are observed across passes.

Before, a pass polled an applied instance's objects until healthy, for up to
``--health-timeout``, so one instance with slow pods held every other instance's
change and status commit. Now a pass looks (a short grace shared by the whole
pass), records ``Progressing`` and looks again; the timeout counts from the change.

Readiness here is the sandbox's readiness delay per image, standing for a pod
whose readiness probe passes late; the engine reads it only through the pod's
``Ready`` condition and the Deployment's ``availableReplicas``
(https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.daemon.healthwatch import HealthWatch
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import InstanceStatus, Phase
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.daemon.conftest import World, sandbox_world, settle

SLOW = 30.0  # seconds until a slow pod is ready: longer than any of these tests


def version_file(version: str, upgrade_from: str = "") -> str:
    """A podinfo version without a batch plan (it changes at once)."""
    extra = f"upgradeFrom: '{upgrade_from}'\n" if upgrade_from else ""
    return (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\n"
        f"version: {version}\n{extra}"
        f"images:\n  podinfo: ghcr.io/stefanprodan/podinfo:{version}\n"
        "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
    )


DEPLOYMENT = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${instance.name}\n"
    "spec:\n  replicas: ${params.replicas}\n"
    "  selector: {matchLabels: {app.kubernetes.io/instance: '${instance.name}'}}\n"
    "  template:\n"
    "    metadata: {labels: {app.kubernetes.io/instance: '${instance.name}'}}\n"
    "    spec:\n      containers:\n"
    "        - {name: podinfo, image: '${images.podinfo}'}\n"
)


def slow_world(
    tmp_path: Path, ready_delays: tuple[tuple[str, float], ...], grace: float = 1.0
) -> Iterator[World]:
    overrides: dict[str, str | bytes | None] = {
        "apps/podinfo/versions/6.6.0/version.yaml": version_file("6.6.0", ">=6.0.0"),
    }
    for version, upgrade in (("6.5.1", ""), ("6.7.0", ">=6.6.0")):
        overrides[f"apps/podinfo/versions/{version}/version.yaml"] = version_file(version, upgrade)
        overrides[f"apps/podinfo/versions/{version}/manifests/deployment.yaml"] = DEPLOYMENT
    timing = Timing(
        pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.02, ready_delays=ready_delays
    )
    with sandbox_world(
        tmp_path, overrides, timing=timing, health_timeout=60.0, health_grace=grace
    ) as world:
        yield world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """api (``>=6.0.0 <7.0.0``: 6.7.0) has pods that are ready only after ``SLOW`` seconds.

    A pass looks at health for 0.3 s: every pass waits that long for api, which never
    becomes ready here, so a longer grace only makes the test slower; web's pods (ready
    in hundredths of a second) still come up across passes when they miss it."""
    yield from slow_world(tmp_path, (("*:6.7.0", SLOW),), grace=0.3)


def by_name(statuses: tuple[InstanceStatus, ...]) -> dict[str, InstanceStatus]:
    return {s.instance: s for s in statuses}


def image(world: World, name: str, namespace: str) -> str:
    obj: Any = world.client.get(ObjectRef("apps/v1", "Deployment", namespace, name))
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def test_a_channel_move_is_applied_while_another_instance_comes_up(world: World) -> None:
    first = world.daemon.run_pass()
    assert first.report is not None
    api = by_name(first.report.statuses)["api"]
    assert api.phase is Phase.PROGRESSING and api.reason == "Progressing", api
    assert "waiting for its objects to become healthy" in api.message
    assert first.report.next_look is not None  # the daemon comes back to look
    assert [c.instance for c in first.commits] == ["api", "web"]

    world.commit(
        "apps/podinfo/channels.yaml",
        "apiVersion: reconciler/v1\nkind: Channels\napp: podinfo\n"
        "channels:\n  stable: 6.5.1\n  fast: 6.6.0\n",
        "stable -> 6.5.1",
    )
    moved = world.daemon.run_pass()
    assert moved.report is not None
    statuses = by_name(moved.report.statuses)
    # applied in the very next pass, although api's pods are still not ready
    assert statuses["web"].version == "6.5.1" and statuses["api"].phase is Phase.PROGRESSING
    assert image(world, "web", "web").endswith(":6.5.1")
    for _ in range(100):  # web's new pods come up while api's still do not
        if statuses["web"].phase is Phase.READY:
            break
        time.sleep(0.05)
        statuses = by_name(world.daemon.run_pass().report.statuses)  # type: ignore[union-attr]
    assert statuses["web"].phase is Phase.READY and statuses["api"].phase is Phase.PROGRESSING


class Clock:
    """A hand-moved clock for the daemon's health waits: the test decides when time passes."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_instance_still_unhealthy_after_the_timeout_fails(world: World) -> None:
    daemon = world.new_daemon(health_timeout=60.0, health_grace=0.05)
    clock = Clock()
    daemon.health = HealthWatch(clock=clock, on_end=daemon.health.on_end)
    first = daemon.run_pass()
    assert by_name(first.report.statuses)["api"].phase is Phase.PROGRESSING  # type: ignore[union-attr]
    clock.now += 59.0
    assert by_name(daemon.run_pass().report.statuses)["api"].phase is Phase.PROGRESSING  # type: ignore[union-attr]
    clock.now += 2.0  # 61 s since the change
    later = daemon.run_pass()
    api = by_name(later.report.statuses)["api"]  # type: ignore[union-attr]
    assert api.phase is Phase.FAILED and api.reason == "HealthCheckFailed"
    assert "not healthy within 60s" in api.message
    assert "api" in [c.instance for c in later.commits]
    # reconciler_health_wait_seconds: web's wait ended healthy, api's timed out, once
    daemon.run_pass()
    waits = {
        s.labels["outcome"]: s.value
        for f in text_string_to_metric_families(daemon.metrics.render().decode())
        for s in f.samples
        if s.name == "reconciler_health_wait_seconds_count"
    }
    assert waits == {"healthy": 1, "failed": 0, "timeout": 1}


@pytest.fixture
def path_world(tmp_path: Path) -> Iterator[World]:
    """6.6.0's pods take half a second to become ready (five times the pass's grace, so
    the pass that applies 6.6.0 sees it Progressing); 6.7.0 can only come from 6.6.0."""
    yield from slow_world(tmp_path, (("*:6.6.0", 0.5),), grace=0.1)


@pytest.mark.slow
def test_the_next_step_of_an_upgrade_path_waits_for_the_last_one(path_world: World) -> None:
    world = path_world
    world.commit(
        "clusters/prod/instances/api.yaml",
        "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: podinfo\n"
        "version: 6.5.0\nnamespace: team-api\n",
        "api at 6.5.0",
    )
    settle(world.daemon)
    world.commit(
        "clusters/prod/instances/api.yaml",
        "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: podinfo\n"
        "version: 6.7.0\nnamespace: team-api\n",
        "api to 6.7.0 (through 6.6.0)",
    )
    seen: list[tuple[str | None, str]] = []
    for _ in range(200):
        api = by_name(world.daemon.run_pass().report.statuses)["api"]  # type: ignore[union-attr]
        seen.append((api.version, api.reason))
        if api.phase is Phase.READY:
            break
        if api.version == "6.6.0" and api.reason == "Progressing":
            # 6.6.0 is not healthy yet: 6.7.0 is not applied
            assert image(world, "api", "team-api").endswith(":6.6.0")
        time.sleep(0.05)
    assert seen[-1] == ("6.7.0", "Succeeded"), seen
    steps = list(dict.fromkeys(seen))
    assert steps[0] == ("6.6.0", "Progressing"), steps  # the step applied, waited for
    assert ("6.6.0", "UpgradeInProgress") in steps  # healthy: on to the next step
    assert steps.index(("6.6.0", "UpgradeInProgress")) < steps.index(("6.7.0", "Succeeded"))
