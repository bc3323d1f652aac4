"""Issue 28 (3): limits that existed are never dropped by a commit (SPEC section 3b).

Renaming ``clusters/prod/cluster.yaml`` to ``cluster.yml``, or deleting it, used to
read as "no limits": the daemon then applied a ClusterRoleBinding to
cluster-admin that the old limits refused, and ``run --once`` exited 0. Now the
cluster remembers the limits file its objects were applied under (the
inventories), so such a commit applies and removes nothing: every instance is
``Stalled``/``CatalogInvalid`` naming the file, after a restart too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.daemon.plan import plan_cluster
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World
from tests.factories import BASE_FILES, remove_file, write_catalog
from tests.safety.test_fail_closed import ADMIN_BINDING

LIMITS = "clusters/prod/cluster.yaml"
BINDING = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "api-admin")
API = ObjectRef("apps/v1", "Deployment", "team-api", "api")


def _git(world: World, *args: str) -> None:
    subprocess.run(["git", *args], cwd=world.repo.work, check=True, capture_output=True)


def _drop_limits(world: World, how: str) -> None:
    if how == "deleted":
        remove_file(world.repo, LIMITS, "limits: gone")
        return
    _git(world, "mv", LIMITS, f"clusters/prod/{how}")
    _git(world, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "limits: renamed")
    _git(world, "push", "-q")


def _writes(world: World) -> list[tuple[str, str]]:
    assert world.sandbox is not None
    return [
        (e.method, e.path)
        for e in world.sandbox.request_log()
        if e.method in ("POST", "PUT", "PATCH", "DELETE") and "/events" not in e.path
    ]


@pytest.mark.parametrize("name", ["cluster.yml", "cluster.yaml.bak"])
def test_a_renamed_cluster_yaml_makes_the_cluster_invalid_offline(
    tmp_path: Path, name: str
) -> None:
    root = write_catalog(tmp_path, {LIMITS: None, f"clusters/prod/{name}": BASE_FILES[LIMITS]})
    catalog = load_catalog(root)
    assert not catalog.clusters["prod"].cluster.valid
    for plan in plan_cluster(catalog, "prod"):
        assert plan.reason == "CatalogInvalid" and plan.objects == ()
        assert plan.message.startswith(f"{LIMITS}: cluster.yaml is missing, but clusters/prod/")


@pytest.mark.parametrize("how", ["deleted", "cluster.yml"])
def test_dropping_the_limits_file_applies_and_removes_nothing(world: World, how: str) -> None:
    assert world.daemon.run_pass().ok  # applied under the limits: the inventories say so
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", ADMIN_BINDING)
    _drop_limits(world, how)
    remove_file(world.repo, "clusters/prod/instances/web.yaml", "delete web")
    assert world.sandbox is not None
    world.sandbox.reset_request_log()

    outcome = world.daemon.run_pass()

    assert outcome.report is not None
    assert _writes(world) == []
    assert world.client.get(BINDING) is None
    assert world.client.get(ObjectRef("apps/v1", "Deployment", "web", "web")) is not None
    api = next(s for s in outcome.report.statuses if s.instance == "api")
    assert (api.phase, api.reason) == (Phase.STALLED, "CatalogInvalid")
    assert api.message.startswith(f"{LIMITS}: cluster.yaml is ")
    assert not any("removed (" in c.subject for c in outcome.commits)  # web is kept
    # a restarted daemon (no memory of its own) reads the same from the cluster
    restarted = world.new_daemon().run_pass()
    assert restarted.report is not None
    assert {s.reason for s in restarted.report.statuses} == {"CatalogInvalid"}
    assert world.client.get(BINDING) is None
    argv = ["run", "--repo", world.repo.url, "--cluster", "prod", "--once"]
    assert main([*argv, "--kubeconfig", str(world.kubeconfig)]) == 1
    assert world.client.get(BINDING) is None


def test_restoring_the_limits_file_lets_the_cluster_carry_on(world: World) -> None:
    assert world.daemon.run_pass().ok
    remove_file(world.repo, LIMITS, "limits: gone")
    assert {s.reason for s in world.daemon.run_pass().report.statuses} == {"CatalogInvalid"}  # type: ignore[union-attr]
    world.commit(LIMITS, BASE_FILES[LIMITS], "limits: back")
    again = world.daemon.run_pass()
    assert again.ok and again.report is not None
    assert all(s.phase is Phase.READY for s in again.report.statuses)


def test_limits_added_without_any_instance_change_are_remembered(world: World) -> None:
    """A commit that only adds cluster.yaml changes no object; the pass still records
    the limits on every inventory, so a later commit that deletes them is refused by
    a daemon that never saw them (a restart)."""
    remove_file(world.repo, LIMITS, "no limits yet")
    first = world.daemon.run_pass()  # a cluster that never had limits: unrestricted
    assert first.ok and first.report is not None
    assert all(s.phase is Phase.READY for s in first.report.statuses)
    world.commit(LIMITS, BASE_FILES[LIMITS], "limits: added")
    assert world.daemon.run_pass().ok
    inventory = world.client.get(
        ObjectRef("v1", "ConfigMap", "team-api", "reconciler-inventory-api")
    )
    assert inventory is not None and inventory["data"]["limits"] == LIMITS
    remove_file(world.repo, LIMITS, "limits: gone")
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", ADMIN_BINDING)
    outcome = world.new_daemon().run_pass()
    assert outcome.report is not None
    assert {s.reason for s in outcome.report.statuses} == {"CatalogInvalid"}
    assert world.client.get(BINDING) is None and world.client.get(API) is not None
