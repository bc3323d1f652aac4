"""A cluster whose ``allowedNamespaces`` are plain names is read per namespace.

A tenant's reconciler (``deploy/overlays/tenant/``) may read only its namespaces: a
list or watch across all namespaces would be refused (403) by its RBAC. So with
``allowedNamespaces: [web, team-api]`` every list and watch of a namespaced kind names
its namespace; only Namespaces themselves (names, to tell whether one exists) are
listed cluster-wide. With a pattern (``team-*``) a namespace may appear at any time,
and the pass lists across all namespaces as without limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.kube.watchcache import ENDED, WatchCache
from reconciler.model.changeset import Action, ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World, sandbox_world, settle
from tests.daemon.test_watch_cache import seen_by_cache, until
from tests.factories import write_catalog
from tests.kube.conftest import edit_like_kubectl

PLAIN_LIMITS = """\
    apiVersion: reconciler/v1
    kind: Cluster
    name: prod
    allowedNamespaces: [web, team-api]
    allowClusterScoped: false
    """
LIMITS_FILE = "clusters/prod/cluster.yaml"
WEB_DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "web", "web")


def cluster_wide_reads(entries: Any) -> list[str]:
    """Lists and watches that span every namespace, except of Namespaces themselves."""
    return [
        f"{e.verb} {e.path}"
        for e in entries
        if e.verb in ("list", "watch")
        and "/namespaces/" not in e.path
        and e.path != "/api/v1/namespaces"
    ]


@pytest.fixture
def scoped(tmp_path: Path) -> Iterator[World]:
    with sandbox_world(tmp_path, {LIMITS_FILE: PLAIN_LIMITS}) as world:
        yield world


@pytest.fixture
def cache(scoped: World) -> Iterator[WatchCache]:
    started = scoped.daemon.start_watching()
    yield started
    scoped.daemon.stop_watching()


def test_the_daemon_lists_and_watches_only_the_allowed_namespaces(
    scoped: World, cache: WatchCache
) -> None:
    outcome = settle(scoped.daemon)[-1]
    assert outcome.ok and outcome.report is not None
    assert {s.phase for s in outcome.report.statuses} == {Phase.READY}
    assert scoped.sandbox is not None
    log = scoped.sandbox.request_log()
    assert cluster_wide_reads(log) == []
    managed = {
        e.path for e in log if e.verb == "list" and "labelSelector=app.kubernetes.io" in e.query
    }
    assert {
        "/api/v1/namespaces/web/configmaps",
        "/api/v1/namespaces/team-api/configmaps",
        "/apis/apps/v1/namespaces/web/deployments",
        "/apis/apps/v1/namespaces/team-api/deployments",
    } <= managed
    # the watches run per namespace too (a watch is logged when it ends)
    ended = cache.restarts.get(ENDED, 0)
    scoped.sandbox.close_watches()
    until(lambda: cache.restarts.get(ENDED, 0) >= ended + 4, "the four watches to end")
    until(
        lambda: len([e for e in scoped.sandbox.request_log() if e.verb == "watch"]) >= 4,  # type: ignore[union-attr]
        "the watches to be logged",
    )
    watched = {e.path for e in scoped.sandbox.request_log() if e.verb == "watch"}
    assert watched == {
        "/api/v1/namespaces/web/configmaps",
        "/api/v1/namespaces/team-api/configmaps",
        "/apis/apps/v1/namespaces/web/deployments",
        "/apis/apps/v1/namespaces/team-api/deployments",
    }
    assert cluster_wide_reads(scoped.sandbox.request_log()) == []


def test_drift_in_an_allowed_namespace_is_seen_by_its_watch_and_reverted(
    scoped: World, cache: WatchCache
) -> None:
    settle(scoped.daemon)
    scoped.daemon.run_pass()
    edit_like_kubectl(scoped.client, WEB_DEPLOYMENT, {"spec": {"replicas": 1}})
    until(seen_by_cache(cache, scoped, WEB_DEPLOYMENT), "the edit's watch event")
    assert cache.watched("apps/v1", "Deployment", "web")
    assert not cache.watched("apps/v1", "Deployment")
    outcome = scoped.daemon.run_pass()
    assert outcome.report is not None
    assert Action.CONFIGURED in {e.action for e in outcome.report.changes.entries}
    live = scoped.client.get(WEB_DEPLOYMENT)
    assert live is not None and live["spec"]["replicas"] == 5


def test_a_pattern_in_the_limits_lists_across_all_namespaces(tmp_path: Path) -> None:
    """The baseline's ``[web, "team-*"]``: ``team-new`` may appear at any time."""
    with sandbox_world(tmp_path) as world:
        assert settle(world.daemon)[-1].ok
        assert world.sandbox is not None
        assert "list /api/v1/configmaps" in cluster_wide_reads(world.sandbox.request_log())


def test_apply_lists_per_allowed_namespace(
    tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = write_catalog(tmp_path / "catalog", {LIMITS_FILE: PLAIN_LIMITS})
    argv = ["apply", "--repo", str(catalog), "--cluster", "prod"]
    code = main([*argv, "--kubeconfig", str(sandbox.kubeconfig)])
    assert code == 0, capsys.readouterr().err
    log = sandbox.request_log()
    assert cluster_wide_reads(log) == []
    assert "/api/v1/namespaces/team-api/configmaps" in {e.path for e in log if e.verb == "list"}
