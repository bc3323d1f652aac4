"""The long-running daemon's watch cache: list a kind once, then watch it.

What these tests rely on of a real API server
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
a watch from a list's ``resourceVersion`` sends every later change of the objects
its label selector matches, in order; every write changes the object's
``resourceVersion`` (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions);
a watch from a version whose history is gone is answered ``410 Gone``
(https://kubernetes.io/docs/reference/using-api/api-concepts/#410-gone-responses),
and the server may end a watch at any time (its ``timeoutSeconds``, a restart), after
which a watch from the last version seen misses nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from reconciler.daemon.loop import PassOutcome
from reconciler.kube.live import version_of
from reconciler.kube.watchcache import ENDED, EXPIRED, WatchCache
from reconciler.model.changeset import Action, ObjectRef
from reconciler.model.status import Phase
from reconciler.sandbox.requestlog import RequestLogEntry
from tests.daemon.conftest import World, settle
from tests.kube.conftest import edit_like_kubectl

WEB_DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "web", "web")
API_CONFIG = ObjectRef("v1", "ConfigMap", "team-api", "api-config")
READS = ("list", "get")


@pytest.fixture
def cache(world: World) -> Iterator[WatchCache]:
    """The daemon's watch cache, as ``reconciler run`` starts it; closed after the test."""
    started = world.daemon.start_watching()
    yield started
    world.daemon.stop_watching()
    assert not any(t.is_alive() for t in started.threads())


def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait until the watch has delivered what ``check`` looks for (never a timing claim)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def seen_by_cache(cache: WatchCache, world: World, ref: ObjectRef) -> Callable[[], bool]:
    """True once the cache holds ``ref`` at the version the server has now (or both lack it)."""

    def check() -> bool:
        live = world.client.get(ref)
        synced, packed = cache.current(ref)
        if not synced:
            return False
        if live is None:
            return packed is None
        return packed is not None and version_of(packed) == live["metadata"]["resourceVersion"]

    return check


def requests(world: World, verbs: tuple[str, ...] = READS) -> list[str]:
    assert world.sandbox is not None
    return [f"{e.verb} {e.path}" for e in world.sandbox.request_log() if e.verb in verbs]


def settled(world: World) -> PassOutcome:
    settle(world.daemon)
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    return outcome


def test_a_no_op_pass_of_a_settled_daemon_sends_no_request(world: World, cache: WatchCache) -> None:
    settled(world)
    assert world.sandbox is not None
    world.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None and outcome.report.reused == {"web", "api"}
    # watches still open are logged when they end: nothing but watches was asked
    assert [e for e in world.sandbox.request_log() if e.verb != "watch"] == []


def test_each_kind_is_listed_once_then_watched(world: World, cache: WatchCache) -> None:
    settle(world.daemon)
    world.daemon.run_pass()
    assert world.sandbox is not None
    # by the first pass that touched each kind, never again (Namespaces, every one of
    # them and not only ours, are not watched)
    managed = [
        f"{e.verb} {e.path}"
        for e in world.sandbox.request_log()
        if e.verb == "list" and "labelSelector=app.kubernetes.io" in e.query
    ]
    assert sorted(managed) == ["list /api/v1/configmaps", "list /apis/apps/v1/deployments"]
    ended = cache.restarts.get(ENDED, 0)
    world.sandbox.close_watches()  # a watch is logged when it ends
    until(lambda: cache.restarts.get(ENDED, 0) >= ended + 2, "both watches to end")

    sandbox = world.sandbox

    def watches() -> list[RequestLogEntry]:
        return [e for e in sandbox.request_log() if e.verb == "watch"]

    # the server logs a watch as its handler returns, which can be just after the client
    # saw the stream end: wait for the log too, then compare
    until(lambda: len(watches()) >= 2, "both watches to be logged")
    assert {e.path for e in watches()} == {"/api/v1/configmaps", "/apis/apps/v1/deployments"}
    for entry in watches():
        assert "allowWatchBookmarks=true" in entry.query and "resourceVersion=" in entry.query
        assert "labelSelector=app.kubernetes.io" in entry.query


def test_drift_made_between_passes_is_seen_and_reverted(world: World, cache: WatchCache) -> None:
    settled(world)
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 1}})
    until(seen_by_cache(cache, world, WEB_DEPLOYMENT), "the edit's watch event")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    assert Action.CONFIGURED in {e.action for e in outcome.report.changes.entries}
    live = world.client.get(WEB_DEPLOYMENT)
    assert live is not None and live["spec"]["replicas"] == 5


def test_a_deleted_object_is_created_again(world: World, cache: WatchCache) -> None:
    settled(world)
    assert world.client.delete(API_CONFIG)
    until(seen_by_cache(cache, world, API_CONFIG), "the DELETED event")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    assert Action.CREATED in {e.action for e in outcome.report.changes.entries}
    assert world.client.get(API_CONFIG) is not None


def test_our_own_write_causes_no_write_in_the_next_pass(world: World, cache: WatchCache) -> None:
    """Pass N's write is in the cache at once; the next pass, run straight after (its
    watch event may not have arrived), finds nothing to do."""
    settled(world)
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 1}})
    until(seen_by_cache(cache, world, WEB_DEPLOYMENT), "the edit's watch event")
    assert world.daemon.run_pass().report is not None  # reverts it: one write
    assert world.sandbox is not None
    world.reset_request_log()
    world.daemon.run_pass()
    assert world.writes() == 0


def test_a_cut_watch_resumes_without_relisting_and_without_losing_an_event(
    world: World, cache: WatchCache
) -> None:
    settled(world)
    assert world.sandbox is not None
    world.reset_request_log()
    ended = cache.restarts.get(ENDED, 0)
    world.sandbox.close_watches()  # as a server restart or a watch's timeout does
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 2}})
    until(lambda: cache.restarts.get(ENDED, 0) > ended, "the watches to start again")
    until(seen_by_cache(cache, world, WEB_DEPLOYMENT), "the edit made while cut")
    assert requests(world, ("list",)) == []  # resumed from the last version: no list
    assert cache.relists == 0
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    assert Action.CONFIGURED in {e.action for e in outcome.report.changes.entries}


def test_a_version_too_old_for_the_server_is_listed_again(world: World, cache: WatchCache) -> None:
    settled(world)
    assert world.sandbox is not None
    # a write the watches do not see (no label of ours), then the history goes: every
    # watch's version is now older than what the server keeps
    world.client.request(
        "POST",
        "/api/v1/namespaces/web/configmaps",
        subject="other",
        verb="create",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}},
    )
    world.sandbox.compact_history()
    world.reset_request_log()
    world.sandbox.close_watches()
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 2}})
    until(lambda: cache.relists >= 1 and cache.restarts.get(EXPIRED, 0) >= 1, "a relist")
    relisted = [e for e in world.sandbox.request_log() if e.verb == "list"]
    assert relisted and all("labelSelector=app.kubernetes.io" in e.query for e in relisted)
    until(seen_by_cache(cache, world, WEB_DEPLOYMENT), "the edit, after the relist")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    assert Action.CONFIGURED in {e.action for e in outcome.report.changes.entries}  # reverted
    live = world.client.get(WEB_DEPLOYMENT)
    assert live is not None and live["spec"]["replicas"] == 5


def test_a_fresh_install_is_judged_healthy_from_the_cache(world: World, cache: WatchCache) -> None:
    outcomes = settle(world.daemon)
    report = outcomes[-1].report
    assert report is not None and all(s.phase is Phase.READY for s in report.statuses)
    gets = [p for p in requests(world, ("get",)) if "/deployments/" in p]
    assert gets == []  # no GET polling of the Deployments' health


def test_stopping_the_daemon_ends_every_watch_thread(world: World) -> None:
    cache = world.daemon.start_watching()
    settle(world.daemon)
    threads = cache.threads()
    assert threads and all(t.is_alive() for t in threads)
    world.daemon.stop_watching()
    assert not any(t.is_alive() for t in threads)
    assert not [t for t in threading.enumerate() if t.name.startswith("watch-")]


def test_reconciler_run_watches_while_it_runs_and_not_after(world: World) -> None:
    from tests.daemon.test_service import running

    daemon = world.new_daemon(interval=0.2, jitter=0.0, drift_interval=3600.0)
    with running(daemon):
        until(
            lambda: (
                daemon.live_cache is not None and daemon.live_cache.watched("apps/v1", "Deployment")
            ),
            "the first pass to start watching",
        )
        cache = daemon.live_cache
        assert cache is not None
        threads = cache.threads()
    assert daemon.live_cache is None
    assert not any(t.is_alive() for t in threads)
    assert not [t for t in threading.enumerate() if t.name.startswith("watch-")]


def test_a_quiet_cluster_compares_no_object_and_still_sees_each_change(
    world: World, cache: WatchCache
) -> None:
    """When every kind the memo's instances use is at the generation the last pass saw,
    the memo compares no object one by one (``daemon.memo``); an edit, a deletion and a
    label taken off, each made between two such passes, still reach the cluster in the
    next pass."""
    settled(world)
    memo = world.daemon.memo

    def quiet_pass() -> None:
        outcome = world.daemon.run_pass()
        assert outcome.report is not None and outcome.report.reused == {"web", "api"}

    world.daemon.run_pass()  # every instance checked against one view
    quiet_pass()
    assert memo._unchanged  # nothing compared object by object

    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 1}})
    until(seen_by_cache(cache, world, WEB_DEPLOYMENT), "the edit's watch event")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and not memo._unchanged
    assert outcome.report.reused == {"api"}
    assert Action.CONFIGURED in {e.action for e in outcome.report.changes.entries}
    live = world.client.get(WEB_DEPLOYMENT)
    assert live is not None and live["spec"]["replicas"] == 5
    world.daemon.run_pass()  # its own write seen by the cache: a view at one generation
    quiet_pass()
    assert memo._unchanged

    assert world.client.delete(API_CONFIG)
    until(seen_by_cache(cache, world, API_CONFIG), "the DELETED event")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and "api" not in outcome.report.reused
    assert Action.CREATED in {e.action for e in outcome.report.changes.entries}
    assert world.client.get(API_CONFIG) is not None
    world.daemon.run_pass()
    quiet_pass()
    assert memo._unchanged

    # our label taken off: the object leaves the watch (a DELETED event)
    edit_like_kubectl(
        world.client, API_CONFIG, {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
    )
    until(lambda: cache.current(API_CONFIG) == (True, None), "the object to leave the watch")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and "api" not in outcome.report.reused
    obj = world.client.get(API_CONFIG)
    assert obj is not None
    assert obj["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "reconciler"
