"""The no-op pass: a settled instance that nothing touched keeps last pass's verdict.

``reconciler.daemon.memo`` skips rendering and comparing an instance whose inputs
(catalog objects, deployed version, cluster settings) and live objects (their
``resourceVersion`` in the pass's list) are the same as when its last pass ended
settled. These tests count renders (``render_instance`` calls) and check that
drift made between passes (a ``kubectl edit`` of a field, a deleted object, a
label changed by someone else) and a catalog commit still reach the cluster in
the very next pass. The API server changes an object's ``resourceVersion`` on
every write to it (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions),
which is what makes such an edit visible.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from reconciler.daemon import plan as plan_module
from reconciler.daemon.loop import PassOutcome
from reconciler.kube.live import version_of
from reconciler.model.changeset import Action, ObjectRef
from reconciler.model.status import Phase
from reconciler.source import ledger as ledger_module
from tests.daemon.conftest import World, settle
from tests.daemon.test_pass import WEB
from tests.factories import BASE_FILES
from tests.kube.conftest import edit_like_kubectl

WEB_DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "web", "web")
API_DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "team-api", "api")
API_CONFIG = ObjectRef("v1", "ConfigMap", "team-api", "api-config")


def reused_pass(world: World) -> PassOutcome:
    """Settle, then the pass that finds every object unchanged (it remembers them)."""
    settle(world.daemon)
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    assert {e.action for e in outcome.report.changes.entries} == {Action.UNCHANGED}
    return outcome


def actions(outcome: PassOutcome, instance: str) -> set[Action]:
    assert outcome.report is not None
    return {e.action for e in outcome.report.changes.entries if e.instance == instance}


def replicas(world: World, ref: ObjectRef) -> int:
    obj = world.client.get(ref)
    assert obj is not None
    return int(obj["spec"]["replicas"])


def test_a_settled_instance_is_neither_rendered_nor_compared_again(
    world: World, renders: list[str]
) -> None:
    reused_pass(world)
    before = world.daemon.statuses.copy()
    renders.clear()
    assert world.sandbox is not None
    world.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None and outcome.commits == []
    assert outcome.report.reused == {"web", "api"}
    assert renders == []
    assert world.writes() == 0
    # the verdict is last pass's: the same records, and every object unchanged
    assert {s.instance: s for s in outcome.report.statuses} == before
    assert actions(outcome, "web") == {Action.UNCHANGED}
    assert all(s.phase is Phase.READY for s in outcome.report.statuses)


def test_what_the_memo_keeps_names_each_object_once(world: World) -> None:
    """A settled instance's entry is held for the life of the daemon: every object
    in it (its key, its health, its change-set entry, its inventory line) is named with
    the inventory's own reference, not a copy per step of the pass that made it."""
    outcome = reused_pass(world)
    assert outcome.report is not None
    entry = world.daemon.memo._entries["web"]
    # the entries made again are the ones the pass reported, in the same order
    said = [e for e in outcome.report.changes.entries if e.instance == "web"]
    assert list(entry.reused.result.changes.entries) == said
    inventory = entry.reused.result.inventory
    assert inventory is not None
    own = {id(ref) for ref in inventory.objects}
    names = {id(ref.name) for ref in inventory.objects}
    assert {id(o.ref) for o in entry.reused.health.objects} <= own
    assert {id(ref) for ref in entry.refs[:-1]} <= own  # the last: the inventory's own
    assert {id(ref) for ref in entry.reused.objects} <= own
    assert {id(key[3]) for key in entry.reused.keys} <= names
    # each object as last seen is the live view's packed object (shared, not a version
    # string per object), whose resourceVersion is what the next pass compares
    live = [world.client.get(ref) for ref in entry.refs]
    versions = [obj["metadata"]["resourceVersion"] for obj in live if obj is not None]
    assert [version_of(packed) for packed in entry.seen] == versions
    assert {id(e.name) for e in entry.reused.result.changes.entries} <= names
    # the result is made once and handed back by every pass that reuses the instance
    again = world.daemon.run_pass()
    assert again.report is not None and "web" in again.report.reused
    assert world.daemon.memo._entries["web"].reused.result is entry.reused.result
    # the record as built and as the pass returned it are one object when equal
    assert entry.reused.built is entry.final
    # the daemon's cache of inventories holds that same inventory, not an equal copy
    cached = [
        inv
        for held in world.daemon.memo.inventories.values()
        for inv in held
        if inv.instance == "web"
    ]
    assert cached == [inventory] and cached[0] is inventory


def test_a_kubectl_edit_after_a_reused_pass_is_reverted_in_the_next(
    world: World, renders: list[str]
) -> None:
    reused_pass(world)
    world.daemon.run_pass()  # reuses both
    renders.clear()
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"spec": {"replicas": 1}})
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    assert outcome.report.reused == {"api"}
    assert renders == ["web"]
    assert actions(outcome, "web") >= {Action.CONFIGURED}
    assert replicas(world, WEB_DEPLOYMENT) == 5


def test_a_deleted_object_after_a_reused_pass_is_created_again(
    world: World, renders: list[str]
) -> None:
    reused_pass(world)
    world.daemon.run_pass()
    assert world.client.delete(API_CONFIG)
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    assert outcome.report.reused == {"web"}
    assert renders == ["api"]
    assert Action.CREATED in actions(outcome, "api")
    assert world.client.get(API_CONFIG) is not None


def test_a_label_changed_by_someone_else_is_put_back(world: World, renders: list[str]) -> None:
    reused_pass(world)
    world.daemon.run_pass()
    version = "app.kubernetes.io/version"
    edit_like_kubectl(world.client, API_DEPLOYMENT, {"metadata": {"labels": {version: "x"}}})
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    assert "api" not in outcome.report.reused
    assert Action.CONFIGURED in actions(outcome, "api")
    live = world.client.get(API_DEPLOYMENT)
    assert live is not None and live["metadata"]["labels"][version] == "6.6.0"
    # settled again: the pass after that reuses it
    world.daemon.run_pass()
    assert world.daemon.run_pass().report.reused == {"web", "api"}  # type: ignore[union-attr]


def test_our_label_taken_off_an_object_is_put_back(world: World) -> None:
    """Without our managed-by label the object leaves the pass's labelled list: missing."""
    reused_pass(world)
    world.daemon.run_pass()
    managed_by = "app.kubernetes.io/managed-by"
    edit_like_kubectl(world.client, WEB_DEPLOYMENT, {"metadata": {"labels": {managed_by: None}}})
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    assert "web" not in outcome.report.reused
    live = world.client.get(WEB_DEPLOYMENT)
    assert live is not None and managed_by in live["metadata"]["labels"]


def test_a_catalog_commit_reaches_an_instance_that_was_reused(
    world: World, renders: list[str]
) -> None:
    reused_pass(world)
    world.daemon.run_pass()
    world.commit("clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    assert outcome.report.reused == {"api"}  # the other instance's files did not change
    assert renders == ["web"]
    assert replicas(world, WEB_DEPLOYMENT) == 3


def test_a_cluster_settings_change_plans_every_instance_again(
    world: World, renders: list[str]
) -> None:
    reused_pass(world)
    world.daemon.run_pass()
    cluster = (
        "apiVersion: reconciler/v1\nkind: Cluster\nname: prod\n"
        "allowedNamespaces: [web]\nallowClusterScoped: false\n"
    )
    world.commit("clusters/prod/cluster.yaml", cluster, "prod: only namespace web")
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.report.reused == frozenset()
    statuses = {s.instance: s for s in outcome.report.statuses}
    assert statuses["web"].phase is Phase.READY
    assert statuses["api"].phase is not Phase.READY  # team-api is no longer allowed


CHANNELS = """\
apiVersion: reconciler/v1
kind: Channels
app: podinfo
channels:
  stable: {stable}
  fast: {fast}
"""


def test_a_commit_to_the_app_that_selects_the_same_versions_renders_nothing(
    world: World, renders: list[str]
) -> None:
    """Every instance of the app gets new catalog objects, yet none selects another version."""
    reused_pass(world)
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.5.0", fast="6.5.0"))
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None and outcome.commits == []
    assert outcome.report.reused == {"web", "api"}
    assert renders == []


def test_a_channel_move_reaches_the_instances_it_moves_and_only_those(
    world: World, renders: list[str]
) -> None:
    reused_pass(world)
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0", fast="6.6.0"))
    renders.clear()
    outcome = world.daemon.run_pass()  # web's rollout starts: not Ready yet
    assert outcome.report is not None and outcome.error is None
    assert outcome.report.reused == {"api"}  # its range still selects 6.6.0
    assert "web" in renders and "api" not in renders
    settle(world.daemon)
    obj = world.client.get(WEB_DEPLOYMENT)
    assert obj is not None
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":6.6.0")


def test_a_new_build_pinned_for_a_reused_instance_reaches_it(
    world: World, renders: list[str]
) -> None:
    """builds.yaml is part of the app's files but not of its versions: a new pin of the
    same version is a new render (SPEC section 8)."""
    from tests.rollout.test_build_rollout import B6, D5, D6, V650, builds

    world.commit("apps/podinfo/versions/6.5.0/version.yaml", V650, "6.5.0: intermediate tag")
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b5.1", D5), "pin b5.1")
    reused_pass(world)
    assert world.daemon.run_pass().report.reused == {"web", "api"}  # type: ignore[union-attr]
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b6.1", D6), "rebuild b6.1")
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.error is None
    assert "web" not in outcome.report.reused and "web" in renders
    settle(world.daemon)
    obj = world.client.get(WEB_DEPLOYMENT)
    assert obj is not None and obj["spec"]["template"]["spec"]["containers"][0]["image"] == B6


# an app whose only object is a Deployment named ``web`` in its instance's namespace:
# an instance of it in namespace ``web`` renders the very object instance web owns
CLASHING = {
    "apps/clash/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: clash\n",
    "apps/clash/channels.yaml": (
        "apiVersion: reconciler/v1\nkind: Channels\napp: clash\nchannels:\n  stable: 1.0.0\n"
    ),
    "apps/clash/versions/1.0.0/version.yaml": (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: clash\nversion: 1.0.0\n"
    ),
    "apps/clash/versions/1.0.0/manifests/deployment.yaml": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n"
    ),
    "clusters/prod/instances/copy.yaml": (
        "apiVersion: reconciler/v1\nkind: Instance\nname: copy\napp: clash\n"
        "channel: stable\nnamespace: web\n"
    ),
}


def test_a_new_instance_rendering_a_reused_instances_object_is_refused(
    world: World, renders: list[str]
) -> None:
    """A no-op pass skips the check that no two instances render the same object (its
    reused plans passed it together); a new instance is checked against the reused
    ones, and the reused owner of the object it clashes with is refused as well."""
    reused_pass(world)
    assert world.daemon.run_pass().report.reused == {"web", "api"}  # type: ignore[union-attr]
    for rel, text in CLASHING.items():
        world.commit(rel, text, f"add {rel}")
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    statuses = {s.instance: s for s in outcome.report.statuses}
    assert outcome.report.reused == {"api"}
    assert statuses["web"].reason == statuses["copy"].reason == "CatalogInvalid"
    assert "Deployment/web/web is also rendered by instance copy" in statuses["web"].message
    assert "Deployment/web/web is also rendered by instance web" in statuses["copy"].message
    assert replicas(world, WEB_DEPLOYMENT) == 5  # left as it was: nothing fought over it


def test_the_no_op_pass_does_not_check_its_reused_plans_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs when a plan is new (the pass that settles them) and not in a pass
    in which every instance is reused: no key of their objects is made again."""
    checks: list[list[str]] = []
    real = plan_module._one_owner_per_object

    def counting(plans: Any, reuse: Any = None) -> Any:
        checks.append([p.name for p in plans])
        return real(plans, reuse)

    monkeypatch.setattr(plan_module, "_one_owner_per_object", counting)
    reused_pass(world)
    checks.clear()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.report.reused == {"web", "api"}
    assert checks == []
    world.commit("clusters/prod/instances/web.yaml", WEB.replace("3", "4"), "web: 4 replicas")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.report.reused == {"api"}
    assert checks == [["api", "web"]]


def test_a_commit_no_instance_reads_renders_and_records_nothing(
    world: World, renders: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A README edit is a new catalog commit that no instance reads: every instance keeps
    its verdict, and its record stays as it was, naming the commit at which its state was
    established (a pass that changed nothing makes no status commit, and ``sourceCommit``
    alone is no change). The ledger does not even prepare the records again: each
    reused instance hands it back the very record it settled last time."""
    prepared: list[str] = []
    real = ledger_module.prepare_record

    def counting(status: Any, previous: Any, now: Any = None) -> Any:
        prepared.append(status.instance)
        return real(status, previous, now=now)

    monkeypatch.setattr(ledger_module, "prepare_record", counting)
    reused_pass(world)
    world.daemon.run_pass()
    before = world.daemon.ledger.read()
    head = world.commit("README.md", "# the catalog\n\nEdited.\n", "docs only")
    renders.clear()
    prepared.clear()
    world.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None and outcome.commits == []
    assert outcome.report.commit == head  # the pass is at the new commit
    assert outcome.report.reused == {"web", "api"}
    assert renders == [] and prepared == [] and world.writes() == 0
    assert world.daemon.ledger.read() == before
    # a later commit that an instance reads still reaches it, and its record names it
    edited = world.commit("clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.report.reused == {"api"}
    assert renders == ["web"] and [c.instance for c in outcome.commits] == ["web"]
    assert replicas(world, WEB_DEPLOYMENT) == 3
    after = world.daemon.ledger.read()
    assert after["web"].source_commit == edited
    assert after["api"] == before["api"]


def _edited(rel: str, old: str, new: str) -> tuple[str, str]:
    text = textwrap.dedent(BASE_FILES[rel])
    assert old in text
    return rel, text.replace(old, new)


EXTRA_CONFIG = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${instance.name}-extra\n"


@pytest.mark.parametrize(
    ("rel", "text", "affected"),
    [
        # the template of the version web runs (6.5.0), and of the one api runs (6.6.0)
        (
            *_edited(
                "apps/podinfo/versions/6.5.0/manifests/deployment.yaml",
                "name: podinfo\n",
                "name: podinfo\n          args: [--level=debug]\n",
            ),
            {"web"},
        ),
        (
            *_edited("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", "$${HOME}", "hi"),
            {"api"},
        ),
        # a new manifest file the renderer opens
        ("apps/podinfo/versions/6.5.0/manifests/extra.yaml", EXTRA_CONFIG, {"web"}),
        # a version's parameters (a default an instance does not override)
        (
            *_edited("apps/podinfo/versions/6.6.0/version.yaml", "default: hello", "default: hi"),
            {"api"},
        ),
        # an instance file
        (
            *_edited(
                "clusters/prod/instances/api.yaml",
                "team-api\n",
                "team-api\nparameters: {replicas: 1}\n",
            ),
            {"api"},
        ),
        # a channel pointer that moves web's channel
        (*_edited("apps/podinfo/channels.yaml", "stable: 6.5.0", "stable: 6.6.0"), {"web"}),
        # cluster.yaml: every instance is planned again under the new settings
        (
            *_edited(
                "clusters/prod/cluster.yaml", "name: prod\n", "name: prod\nlabels: {tier: gold}\n"
            ),
            {"web", "api"},
        ),
        # prose in the app's directory: the app's files changed, but nothing it renders
        ("apps/podinfo/README.md", "# podinfo\n", set()),
        ("apps/podinfo/versions/6.6.0/NOTES.md", "# notes\n", set()),
    ],
)
def test_each_input_change_reaches_the_instances_that_read_it_and_only_those(
    world: World, renders: list[str], rel: str, text: str, affected: set[str]
) -> None:
    reused_pass(world)
    assert world.daemon.run_pass().report.reused == {"web", "api"}  # type: ignore[union-attr]
    world.commit(rel, text, f"edit {rel}")
    renders.clear()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.error is None
    assert set(renders) == affected
    assert outcome.report.reused == {"web", "api"} - affected
    changed = {e.instance for e in outcome.report.changes.entries if e.changed}
    assert changed <= affected
