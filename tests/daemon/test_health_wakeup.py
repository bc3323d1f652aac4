"""A pass's health wait wakes when a pending object changes, not on a timer.

With the daemon's watch cache, a Deployment waited for is read from the cache's
store, and the wait between two reads lasts until the cache applies a watch event
for it (``kube.watchcache.Wakeup``): a real API server sends a watcher every change
of the objects it watches, in order
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes),
so nothing else can make the verdict change. Without the cache, or for what it does
not keep current, the wait polls at its backoff as before.

The web Deployment's pods are never ready within these tests; a test ends the wait
by scaling it to 0 replicas, which a Deployment controller reports available
(https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#deployment-status).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon import passes
from reconciler.daemon.plan import plan_cluster
from reconciler.kube import HealthReport, InstanceResult, KubeClient, LiveState
from reconciler.kube.inventory import MANAGED_SELECTOR
from reconciler.kube.watchcache import WatchCache
from reconciler.model.changeset import ChangeSet, ObjectRef
from reconciler.sandbox.testing import SandboxHandle
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.daemon.conftest import World, rested, sandbox_world
from tests.daemon.test_watch_cache import API_CONFIG, WEB_DEPLOYMENT, until
from tests.kube.conftest import edit_like_kubectl

NEVER = 600.0  # seconds until a pod is ready: longer than any test
LABEL, VALUE = MANAGED_SELECTOR.split("=")
QUIET = 1.0  # seconds in which nothing changes: a timer would have read several times


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[World]:
    """The catalog installed (one pass that does not wait), with pods that stay unready."""
    timing = Timing(
        pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.02, ready_delays=(("*", NEVER),)
    )
    with sandbox_world(tmp_path, timing=timing, health_grace=0.0) as world:
        outcome = world.daemon.run_pass()
        assert outcome.report is not None
        rested(world.daemon)  # the controllers are done answering the install
        yield world


class Rounds:
    """What each round of the wait read of web's pending objects, and from where."""

    def __init__(self) -> None:
        self.reports: list[HealthReport] = []
        self.cached: list[set[ObjectRef]] = []


def wait_for_web(
    world: World,
    cache: WatchCache | None,
    monkeypatch: pytest.MonkeyPatch,
    after_round: Callable[[int], None],
    grace: float = 120.0,
) -> tuple[HealthReport | None, Rounds]:
    """``check_health`` of web as the daemon's pass calls it, through ``cache``;
    ``after_round(n)`` runs after the n-th round's read, before the wait that follows.

    web is waited for through its inventory (as an instance whose upgrade waits for
    the running version): the objects are those the install wrote."""
    catalog = load_catalog(world.repo.work)
    entry = catalog.clusters[world.cluster]
    live = LiveState(world.client, world.cluster, entry.namespaces, cache=cache)
    plans = plan_cluster(catalog, world.cluster, live.deployed_versions(entry.instances))
    web = next(p for p in plans if p.name == "web")
    rounds = Rounds()
    read = passes._read_health

    def counted(*args: object) -> tuple[HealthReport, set[ObjectRef]]:
        report, cached = read(*args)  # type: ignore[arg-type]
        rounds.reports.append(report)
        rounds.cached.append(cached)
        after_round(len(rounds.reports))
        return report, cached

    monkeypatch.setattr(passes, "_read_health", counted)
    [report] = passes.check_health(
        world.client, live, [web], [InstanceResult("web", ChangeSet())], grace, gated={"web"}
    )
    return report, rounds


def scale_web_to_zero(world: World) -> None:
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 0}})


def test_a_pending_deployment_is_read_again_once_per_change_and_never_on_a_timer(
    slow: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round after the first follows a change of web's Deployment: a change that
    leaves it pending (an annotation) only makes the loop go around, another
    instance's object wakes nobody, a second in which nothing changes costs no round,
    and no round sleeps on a timer."""
    changes: list[ObjectRef] = []
    seen: list[int] = []  # changes of web's Deployment the cache had applied at each round
    waiting = threading.current_thread()
    sleep = time.sleep
    later = threading.Timer(QUIET, scale_web_to_zero, args=(slow,))

    def no_timer(seconds: float) -> None:
        assert threading.current_thread() is not waiting, "the health wait slept on a timer"
        sleep(seconds)

    def after_round(n: int) -> None:
        seen.append(changes.count(WEB_DEPLOYMENT))
        if n == 1:
            edit_like_kubectl(slow.client, API_CONFIG, {"data": {"unrelated": "edit"}})
            annotation = {"metadata": {"annotations": {"example.com/touched": "yes"}}}
            edit_like_kubectl(slow.client, WEB_DEPLOYMENT, annotation)
        elif n == 2:
            later.start()  # nothing changes web's Deployment until then

    monkeypatch.setattr(time, "sleep", no_timer)
    try:
        with WatchCache(slow.client, on_change=changes.append) as cache:
            report, rounds = wait_for_web(slow, cache, monkeypatch, after_round)
            losses = sum(cache.restarts.values()) + cache.relists
    finally:
        later.cancel()
        if later.is_alive():
            later.join()
    assert report is not None and report.healthy, report
    *before, _ = rounds.reports
    assert len(before) >= 2  # the annotation's round came before the scale
    assert all(not r.healthy and not r.failed for r in before)  # no verdict before its time
    for read, cached in zip(rounds.reports, rounds.cached, strict=True):
        assert {o.ref for o in read.objects} <= cached  # every round read the cache
    # a round follows a wake-up, and only a change of web's Deployment (or a watch
    # losing its place) sets one, counted before it wakes anyone: not the ConfigMap's
    # edit, nor the time passing while nothing changes
    for n, applied in enumerate(seen, start=1):
        assert n - 1 <= applied + losses, seen


@pytest.mark.parametrize("cached", [False, True], ids=["no cache", "a closed cache"])
def test_what_the_cache_does_not_keep_current_is_polled_as_before(
    slow: World, monkeypatch: pytest.MonkeyPatch, cached: bool
) -> None:
    """``run --once`` has no cache, and a closed one keeps nothing current: the
    Deployment is read with a GET each round, at the backoff, until it is available."""
    slept: list[float] = []
    waiting = threading.current_thread()
    sleep = time.sleep

    def counted(seconds: float) -> None:
        if threading.current_thread() is waiting:
            slept.append(seconds)
        sleep(seconds)

    def after_round(n: int) -> None:
        if n == 1:
            scale_web_to_zero(slow)

    cache = None
    if cached:
        cache = WatchCache(slow.client)
        cache.close()
    monkeypatch.setattr(time, "sleep", counted)
    assert slow.sandbox is not None
    slow.sandbox.reset_request_log()
    report, rounds = wait_for_web(slow, cache, monkeypatch, after_round)
    assert report is not None and report.healthy, report
    assert len(rounds.reports) >= 2 and rounds.cached == [set()] * len(rounds.reports)
    gets = [e for e in slow.sandbox.request_log() if e.verb == "get" and "/deployments/" in e.path]
    assert len(gets) == len(rounds.reports)  # one GET per round
    if not cached:
        # a timed sleep between two rounds (a retried request may sleep as well)
        assert len(slept) >= len(rounds.reports) - 1


def test_a_pod_is_read_on_a_timer_even_from_the_cache(sandbox: SandboxHandle) -> None:
    """kstatus calls a Pod Failed once it has stayed unschedulable (its PodScheduled
    condition, https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions)
    for 15 s: its verdict changes with no write a watch would announce, so a wait for
    it does not sleep until the next event (a ConfigMap beside it is judged by its
    content alone)."""
    ours = {"namespace": "default", "labels": {LABEL: VALUE}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**ours, "name": "lone"},
        "spec": {"containers": [{"name": "main", "image": "example.com/lone:1"}]},
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {**ours, "name": "beside"},
        "data": {"a": "1"},
    }
    refs = [ObjectRef.of(pod), ObjectRef.of(config)]
    with KubeClient.connect(sandbox.kubeconfig) as client, WatchCache(client) as cache:
        live = LiveState(client, "test", cache=cache)
        for ref in refs:
            live.get(ref)  # lists the kind, which the cache watches from then on
        client.apply(pod)
        client.apply(config)
        until(lambda: all(cache.current(r)[1] is not None for r in refs), "both in the cache")
        _, announced = passes._read_health(client, live, refs)
    assert announced == {ObjectRef.of(config)}
