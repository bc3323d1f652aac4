"""``inventory: perNamespace`` in cluster.yaml, through the daemon's passes.

The engine's side (merge patches, moves, bounds, trust) is in
``tests/kube/test_shared_inventory.py``; here: the setting read from Git, a pass of
several instances of one namespace writing one ConfigMap, the memo reusing settled
instances whose inventories share it, an uninstall, and the switch back.
"""

from __future__ import annotations

from reconciler.kube.inventory import inventory_name, read_inventories, shared_name
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World, settle
from tests.factories import remove_file
from tests.kube.conftest import edit_like_kubectl

CLUSTER = """\
apiVersion: reconciler/v1
kind: Cluster
name: prod
allowedNamespaces: [web, "team-*"]
allowClusterScoped: false
inventory: {layout}
"""

INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: {name}
app: podinfo
channel: stable
namespace: web
"""


def configmap(world: World, ns: str, name: str) -> dict[str, object] | None:
    return world.client.get(ObjectRef("v1", "ConfigMap", world.ns(ns), name))


def test_a_cluster_with_per_namespace_inventories(world: World) -> None:
    world.commit("clusters/prod/cluster.yaml", CLUSTER.format(layout="perNamespace"), "shared")
    for name in ("web2", "web3"):
        world.commit(f"clusters/prod/instances/{name}.yaml", INSTANCE.format(name=name), name)
    outcomes = settle(world.daemon)
    report = outcomes[-1].report
    assert report is not None
    assert {s.instance: s.phase for s in report.statuses} == {
        "web": Phase.READY,
        "web2": Phase.READY,
        "web3": Phase.READY,
        "api": Phase.READY,
    }
    shared = configmap(world, "web", shared_name(world.cluster))
    assert shared is not None and sorted(shared["data"]) == ["web", "web2", "web3"]  # type: ignore[call-overload]
    team = configmap(world, "team-api", shared_name(world.cluster))
    assert team is not None and sorted(team["data"]) == ["api"]  # type: ignore[call-overload]
    for name in ("web", "web2", "web3"):
        assert configmap(world, "web", inventory_name(name)) is None
    found = read_inventories(world.client, world.cluster)
    assert sorted(found) == ["api", "web", "web2", "web3"]
    assert found["web2"].version == found["web"].version != ""

    # settled: a pass finding every object unchanged, then one that reuses every
    # instance's verdict (their inventories share a ConfigMap) and writes nothing
    unchanged = world.daemon.run_pass()
    assert unchanged.report is not None
    assert {e.action.value for e in unchanged.report.changes.entries} == {"unchanged"}
    if world.sandbox is not None:
        world.reset_request_log()
        again = world.daemon.run_pass()
        assert again.report is not None
        assert again.report.reused == frozenset({"web", "web2", "web3", "api"})
        assert world.writes() == 0

    # deleting an instance file uninstalls it: its key goes, the others stay
    remove_file(world.repo, world.path("clusters/prod/instances/web3.yaml"), "web3: gone")
    settle(world.daemon)
    shared = configmap(world, "web", shared_name(world.cluster))
    assert shared is not None and sorted(shared["data"]) == ["web", "web2"]  # type: ignore[call-overload]
    assert world.client.get(ObjectRef("apps/v1", "Deployment", world.ns("web"), "web3")) is None

    # back to the default: every inventory moves to a ConfigMap of its own
    world.commit("clusters/prod/cluster.yaml", CLUSTER.format(layout="perInstance"), "own")
    settle(world.daemon)
    assert configmap(world, "web", shared_name(world.cluster)) is None
    assert configmap(world, "team-api", shared_name(world.cluster)) is None
    for ns, name in (("web", "web"), ("web", "web2"), ("team-api", "api")):
        assert configmap(world, ns, inventory_name(name)) is not None
    assert sorted(read_inventories(world.client, world.cluster)) == ["api", "web", "web2"]


def test_a_neighbour_s_change_does_not_make_settled_instances_rendered_again(
    world: World, renders: list[str]
) -> None:
    """The shared ConfigMap's resourceVersion moves with every instance of its namespace;
    a settled instance's memo watches its own key's inventory instead (by identity)."""
    world.commit("clusters/prod/cluster.yaml", CLUSTER.format(layout="perNamespace"), "shared")
    for name in ("web2", "web3"):
        world.commit(f"clusters/prod/instances/{name}.yaml", INSTANCE.format(name=name), name)
    settle(world.daemon)
    assert world.daemon.run_pass().ok  # finds everything unchanged: the memo keeps it all
    rendered = renders
    rendered.clear()
    changed = INSTANCE.format(name="web2") + "parameters: {message: bonjour}\n"
    world.commit("clusters/prod/instances/web2.yaml", changed, "web2: bonjour")
    settle(world.daemon)
    assert rendered and set(rendered) == {"web2"}
    rendered.clear()
    # the pass after: web2 settled again, and its neighbours' inventories are the very
    # objects the memo holds, though their ConfigMap was written
    after = world.daemon.run_pass()
    assert after.report is not None
    assert {"web", "web3", "api"} <= after.report.reused
    assert "web" not in rendered and "web3" not in rendered
    # an inventory edited by hand is not the one the memo holds: checked again
    ref = ObjectRef("v1", "ConfigMap", world.ns("web"), shared_name(world.cluster))
    edit_like_kubectl(world.client, ref, {"data": {"web3": None}})
    rendered.clear()
    again = world.daemon.run_pass()
    assert again.report is not None and "web3" not in again.report.reused
    assert "web3" in rendered
    found = read_inventories(world.client, world.cluster)
    assert "web3" in found  # written back
