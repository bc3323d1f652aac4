"""Issue 8, "deleting is explicit, and mass deletion is guarded" (SPEC section 3).

Deleting an instance file uninstalls it with no flag: objects pruned, one
``Removed`` status commit, gone from the ``status`` table. A commit that would
remove more than half of a cluster's instances (or all of them) removes none
(``PruneRefused``) unless ``prune.maxRemovedInstances`` or ``--allow-mass-prune``
allows it. An instance that still exists but renders nothing keeps its objects
(``Stalled``/``EmptyRender``) unless ``allowEmptyPrune: true``.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.kube import ApplyOptions, InstanceTarget, LiveState, apply_instance
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World
from tests.factories import remove_file, write_catalog

API = ObjectRef("apps/v1", "Deployment", "team-api", "api")
WEB = ObjectRef("apps/v1", "Deployment", "web", "web")
CLUSTER = (
    "apiVersion: reconciler/v1\nkind: Cluster\nname: prod\n"
    'allowedNamespaces: [web, "team-*"]\nallowClusterScoped: false\n'
)


def _git(world: World, *args: str) -> None:
    subprocess.run(["git", *args], cwd=world.repo.work, check=True, capture_output=True)


def _commit_all(world: World, message: str) -> None:
    _git(world, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", message)
    _git(world, "push", "-q")


@pytest.mark.parametrize("limit", ["", 'prune: {maxRemovedInstances: "100%"}\n'])
def test_renaming_instances_directory_deletes_nothing(world: World, limit: str) -> None:
    """Issue 28 (4): even where the cluster's prune limit allows removing every
    instance, the renamed directory is a validation error, and that removes nothing."""
    if limit:
        world.commit("clusters/prod/cluster.yaml", CLUSTER + limit, "allow removing all")
    assert world.daemon.run_pass().ok
    _git(world, "mv", "clusters/prod/instances", "clusters/prod/instance")
    _commit_all(world, "oops")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    assert world.client.get(API) is not None and world.client.get(WEB) is not None
    removed = {s.instance: s for s in outcome.report.statuses}
    assert {removed["api"].reason, removed["web"].reason} == {"CatalogInvalid"}
    assert removed["api"].phase is Phase.STALLED
    assert "validation errors in clusters/prod/ (clusters/prod/instance)" in removed["api"].message


def test_a_mistyped_instance_file_name_uninstalls_nothing(world: World) -> None:
    """Issue 28 (4): ``git mv web.yaml web.yaml.bak`` is an "unexpected file" error, so
    the commit is not valid and removes nothing; deleting the file in a valid commit
    then uninstalls as usual."""
    assert world.daemon.run_pass().ok
    _git(world, "mv", "clusters/prod/instances/web.yaml", "clusters/prod/instances/web.yaml.bak")
    _commit_all(world, "web: oops")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    assert world.client.get(WEB) is not None and world.client.get(API) is not None
    statuses = {s.instance: s for s in outcome.report.statuses}
    web = statuses["web"]
    assert (web.phase, web.reason) == (Phase.STALLED, "CatalogInvalid")
    assert "clusters/prod/instances/web.yaml.bak" in web.message and "not removed" in web.message
    assert statuses["api"].phase is Phase.READY  # the rest of the cluster carries on
    assert not any("removed (" in c.subject for c in outcome.commits)
    again = world.daemon.run_pass()
    assert world.client.get(WEB) is not None and again.commits == []
    _git(world, "rm", "-q", "clusters/prod/instances/web.yaml.bak")
    _commit_all(world, "web: removed on purpose")
    done = world.daemon.run_pass()
    assert world.client.get(WEB) is None
    assert [c.subject for c in done.commits] == ["prod/web: removed (1 object deleted)"]


def test_apply_removes_nothing_from_a_cluster_directory_with_errors(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """``reconciler apply`` follows the same rule as the daemon."""
    assert world.daemon.run_pass().ok
    _git(world, "mv", "clusters/prod/instances/web.yaml", "clusters/prod/instances/web.yaml.bak")
    code = main(
        ["apply", str(world.repo.work), "--cluster", "prod", "--kubeconfig", str(world.kubeconfig)]
    )
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert world.client.get(WEB) is not None
    assert "not removed" in out + err


def test_mass_removal_allowed_by_cluster_yaml(world: World) -> None:
    assert world.daemon.run_pass().ok
    world.commit(
        "clusters/prod/cluster.yaml",
        CLUSTER + "prune: {maxRemovedInstances: 100%}\n",
        "allow removing everything",
    )
    remove_file(world.repo, "clusters/prod/instances/api.yaml", "remove api")
    remove_file(world.repo, "clusters/prod/instances/web.yaml", "remove web")
    outcome = world.daemon.run_pass()
    assert world.client.get(API) is None and world.client.get(WEB) is None
    assert sorted(c.subject for c in outcome.commits) == [
        "prod/api: removed (2 objects deleted)",
        "prod/web: removed (1 object deleted)",
    ]


def test_mass_removal_allowed_by_flag(world: World) -> None:
    assert world.daemon.run_pass().ok
    remove_file(world.repo, "clusters/prod/instances/api.yaml", "remove api")
    remove_file(world.repo, "clusters/prod/instances/web.yaml", "remove web")
    outcome = world.new_daemon(allow_mass_prune=True).run_pass()
    assert world.client.get(API) is None and world.client.get(WEB) is None
    assert all(s.phase is Phase.REMOVED for s in outcome.report.statuses)  # type: ignore[union-attr]


def test_removed_instance_leaves_the_status_table(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.daemon.run_pass().ok
    remove_file(world.repo, "clusters/prod/instances/api.yaml", "remove api")
    assert world.daemon.run_pass().commits
    capsys.readouterr()
    assert main(["status", "--repo", str(world.repo.remote), "--cluster", "prod"]) == 0
    out = capsys.readouterr().out
    assert "web" in out and "api" not in out
    assert main(["history", "--repo", str(world.repo.remote), "--cluster", "prod", "api"]) == 0
    assert "removed (2 objects deleted)" in capsys.readouterr().out


def test_emptied_manifests_keep_objects_as_empty_render(world: World) -> None:
    assert world.daemon.run_pass().ok
    shutil.rmtree(world.repo.work / "apps/podinfo/versions/6.6.0/manifests")
    (world.repo.work / "apps/podinfo/versions/6.6.0/manifests").mkdir()
    (world.repo.work / "apps/podinfo/versions/6.6.0/manifests/.keep").write_text("")
    _git(world, "add", "-A")
    _git(world, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "empty it")
    _git(world, "push", "-q")
    outcome = world.daemon.run_pass()
    assert world.client.get(API) is not None  # api runs 6.6.0: its objects are kept
    api = next(s for s in outcome.report.statuses if s.instance == "api")  # type: ignore[union-attr]
    assert api.phase is not Phase.READY
    assert api.reason in ("EmptyRender", "CatalogInvalid")


def test_allow_empty_prune_in_the_instance_file(world: World) -> None:
    """``allowEmptyPrune: true`` reaches the engine as the instance's own allowance."""
    assert world.daemon.run_pass().ok
    kept = InstanceTarget("prod", "api", "team-api", (), "podinfo", "6.6.0")
    live = LiveState(world.client, "prod")
    refused = apply_instance(world.client, kept, ApplyOptions(), live)
    assert refused.reason == "EmptyRender" and world.client.get(API) is not None
    allowed = replace(kept, allow_empty_prune=True)
    result = apply_instance(world.client, allowed, ApplyOptions(), LiveState(world.client, "prod"))
    assert result.ok and world.client.get(API) is None
    instance = (
        load_catalog(
            write_catalog(
                world.cache / "flagged",
                {
                    "clusters/prod/instances/api.yaml": "apiVersion: reconciler/v1\nkind: Instance\n"
                    "name: api\napp: podinfo\nversion: 6.6.0\nnamespace: team-api\n"
                    "allowEmptyPrune: true\n"
                },
            )
        )
        .clusters["prod"]
        .instances["api"]
    )
    assert instance.allow_empty_prune
