"""Issue 8, "fail closed": a broken cluster.yaml stops every write to its cluster.

cluster.yaml holds the limits (allowed namespaces, cluster-scoped objects). If
it cannot be read, treating the cluster as unrestricted would let any app
manifest create, say, a ClusterRoleBinding to cluster-admin. So an unreadable
or invalid cluster.yaml makes every instance ``Stalled``/``CatalogInvalid`` and
the pass writes nothing, deletes nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import plan_cluster
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World
from tests.factories import DEPLOYMENT_TEMPLATE, remove_file, write_catalog

ADMIN_BINDING = (
    DEPLOYMENT_TEMPLATE
    + """\
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ${instance.name}-admin
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: "${instance.namespace}"}]
"""
)

BROKEN_CLUSTER_FILES = {
    "unknown key": (
        "apiVersion: reconciler/v1\nkind: Cluster\nname: prod\n"
        "allowedNamespaces: [web]\nallowClusterScope: false\n"
    ),
    "unclosed bracket": (
        "apiVersion: reconciler/v1\nkind: Cluster\nname: prod\n"
        "allowedNamespaces: [web, team-*\nallowClusterScoped: false\n"
    ),
    "duplicate key": (
        "apiVersion: reconciler/v1\nkind: Cluster\nname: prod\n"
        "allowClusterScoped: false\nallowClusterScoped: true\n"
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CLUSTER_FILES))
def test_invalid_cluster_yaml_stalls_every_instance_offline(tmp_path: Path, case: str) -> None:
    root = write_catalog(tmp_path, {"clusters/prod/cluster.yaml": BROKEN_CLUSTER_FILES[case]})
    catalog = load_catalog(root)
    assert not catalog.clusters["prod"].cluster.valid
    plans = plan_cluster(catalog, "prod")
    assert [p.name for p in plans] == ["api", "web"]
    for plan in plans:
        assert not plan.ok and plan.reason == "CatalogInvalid"
        assert plan.message.startswith("clusters/prod/cluster.yaml:")
        assert plan.objects == ()


def test_cluster_yaml_that_is_a_dangling_link_is_invalid(tmp_path: Path) -> None:
    root = write_catalog(tmp_path, {"clusters/prod/cluster.yaml": None})
    (root / "clusters/prod/cluster.yaml").symlink_to(root / "nowhere.yaml")
    catalog = load_catalog(root)
    assert not catalog.clusters["prod"].cluster.valid
    assert any(p.file == "clusters/prod/cluster.yaml" for p in catalog.problems)


def test_missing_cluster_yaml_is_still_an_unrestricted_cluster(tmp_path: Path) -> None:
    # SPEC: cluster.yaml is optional; only a file that exists and is broken fails closed
    root = write_catalog(tmp_path, {"clusters/prod/cluster.yaml": None})
    catalog = load_catalog(root)
    assert catalog.clusters["prod"].cluster.valid
    assert all(plan.ok for plan in plan_cluster(catalog, "prod"))


@pytest.mark.parametrize("case", sorted(BROKEN_CLUSTER_FILES))
def test_daemon_writes_nothing_to_a_cluster_whose_limits_are_broken(
    world: World, case: str
) -> None:
    assert world.daemon.run_pass().ok
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", ADMIN_BINDING)
    world.commit("clusters/prod/cluster.yaml", BROKEN_CLUSTER_FILES[case], "break limits")
    remove_file(world.repo, "clusters/prod/instances/api.yaml", "delete api")
    world.reset_request_log()

    outcome = world.daemon.run_pass()

    assert outcome.report is not None
    writes = [
        (e.method, e.path)
        for e in world.sandbox.request_log()
        if e.method in ("POST", "PUT", "PATCH", "DELETE") and "/events" not in e.path
    ]
    assert writes == []  # Events saying why are fine; objects are not touched
    binding = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "api-admin")
    assert world.client.get(binding) is None
    # the deleted instance keeps its objects: no deletion without known limits
    assert world.client.get(ObjectRef("apps/v1", "Deployment", "team-api", "api")) is not None
    statuses = {s.instance: s for s in outcome.report.statuses}
    assert statuses["web"].phase is Phase.STALLED
    assert statuses["web"].reason == "CatalogInvalid"
    assert "clusters/prod/cluster.yaml" in statuses["web"].message


def test_a_stalled_instance_warns_once_not_every_pass(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 8: log on change; a Stalled instance repeated its warning every pass."""
    assert world.daemon.run_pass().ok
    world.commit(
        "clusters/prod/instances/api.yaml", "apiVersion: reconciler/v1\nkind: [\n", "break"
    )
    with caplog.at_level(logging.WARNING, logger="reconciler.daemon"):
        world.daemon.run_pass()
        first = [r for r in caplog.records if "Stalled" in r.getMessage()]
        caplog.clear()
        world.daemon.run_pass()
        world.daemon.run_pass()
        again = [r for r in caplog.records if "Stalled" in r.getMessage()]
    assert len(first) == 1 and again == []
