"""Prune: only inventory objects with our labels, reverse order, no accidental wipe-out."""

from __future__ import annotations

from reconciler.kube import LiveState, remove_instance
from reconciler.kube.inventory import read_inventories
from reconciler.model.changeset import Action, ObjectRef
from tests.kube.conftest import Backend, configmap, deployment, labels
from tests.kube.test_apply import actions, run


def cm_ref(ns: str, name: str) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", ns, name)


def test_object_removed_from_git_is_deleted(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(
        backend,
        "web",
        ns,
        [
            configmap("keep", ns, "web"),
            configmap("old", ns, "web"),
            deployment("podinfo", ns, "web"),
        ],
    )
    result = run(backend, "web", ns, [configmap("keep", ns, "web")])
    assert result.ok, result.message
    assert actions(result) == {
        f"ConfigMap/{ns}/keep": "unchanged",
        f"Deployment/{ns}/podinfo": "deleted",
        f"ConfigMap/{ns}/old": "deleted",
    }
    kinds = [e.kind for e in result.changes.entries if e.action is Action.DELETED]
    assert kinds == ["Deployment", "ConfigMap"]  # reverse kind order
    assert backend.client.get(cm_ref(ns, "old")) is None
    inv = read_inventories(backend.client, backend.cluster)["web"]
    assert set(inv.objects) == {cm_ref(ns, "keep")}


def test_object_without_our_labels_is_never_deleted(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("keep", ns, "web"), configmap("old", ns, "web")])
    # someone takes the object over and strips our labels
    ref = cm_ref(ns, "old")
    current = backend.client.get(ref)
    assert current is not None
    current["metadata"]["labels"] = {"team": "theirs"}
    del current["metadata"]["managedFields"]
    backend.client.request(
        "PUT", backend.client.object_path(ref), subject=str(ref), verb="update", body=current
    )
    result = run(backend, "web", ns, [configmap("keep", ns, "web")])
    entry = next(e for e in result.changes.entries if e.name == "old")
    assert entry.action is Action.SKIPPED and "lacks the labels" in entry.message
    assert backend.client.get(ref) is not None


def test_labelled_object_outside_inventory_is_left_alone(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("keep", ns, "web")])
    stray = configmap("stray", ns, "web")
    backend.client.apply(stray)  # ours by label, but never applied by the instance
    result = run(backend, "web", ns, [configmap("keep", ns, "web")])
    assert actions(result) == {f"ConfigMap/{ns}/keep": "unchanged"}
    assert backend.client.get(cm_ref(ns, "stray")) is not None


def test_empty_render_is_refused_unless_allowed(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("a", ns, "web"), configmap("b", ns, "web")])
    backend.reset_log()
    refused = run(backend, "web", ns, [])
    assert not refused.ok and refused.reason == "EmptyRender"
    assert set(actions(refused).values()) == {"skipped"}
    assert "renders no objects; keeping its 2 objects" in refused.message
    assert backend.writes() in ([], None)
    assert backend.client.get(cm_ref(ns, "a")) is not None
    allowed = run(backend, "web", ns, [], allow_empty_prune=True)
    assert allowed.ok
    assert set(actions(allowed).values()) == {"deleted"}
    assert backend.client.get(cm_ref(ns, "a")) is None


def test_no_prune_after_a_failed_apply(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("a", ns, "web"), configmap("b", ns, "web")])
    result = run(backend, "web", ns, [configmap("a", ns, "web"), configmap("Bad_Name", ns, "web")])
    assert not result.ok
    assert backend.client.get(cm_ref(ns, "b")) is not None
    inv = read_inventories(backend.client, backend.cluster)["web"]
    assert cm_ref(ns, "b") in inv.objects


def test_instance_removed_from_git(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("a", ns, "web")])
    live = LiveState(backend.client, backend.cluster)
    inv = live.inventory("web")
    assert inv is not None
    # deleting the instance file is the request: no flag (SPEC section 3)
    changes, reason, _ = remove_instance(backend.client, live, inv)
    assert reason is None and changes.entries[0].action is Action.DELETED
    assert "web" not in read_inventories(backend.client, backend.cluster)


def test_a_partial_uninstall_keeps_the_inventory_writer(backend: Backend) -> None:
    """An uninstall that fails to delete an object rewrites the inventory with what is
    left; who wrote it stays recorded (a second reconciler is still told apart)."""
    ns = backend.namespace("web")
    objects = [configmap("gone", ns, "web"), configmap("replaced", ns, "web")]
    assert run(backend, "web", ns, objects, writer="repo (main)").ok
    live = LiveState(backend.client, backend.cluster)
    inv = live.inventory("web")
    assert inv is not None and inv.writer == "repo (main)"
    ref = cm_ref(ns, "replaced")
    assert live.get(ref) is not None  # the pass's view, with the object's uid
    # replaced meanwhile (a new uid): the delete's uid precondition refuses it
    # (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/)
    backend.client.delete(ref)
    backend.client.apply(configmap("replaced", ns, "web"))
    _, reason, _ = remove_instance(backend.client, live, inv)
    assert reason == "PruneFailed"
    left = read_inventories(backend.client, backend.cluster)["web"]
    assert set(left.objects) == {ref} and left.writer == "repo (main)"


def _job(name: str, ns: str, instance: str, extra: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {**labels(instance), **extra}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox:1.36", "command": ["false"]}],
                }
            }
        },
    }


def test_uninstall_deletes_the_instance_s_kept_migration_and_analysis_jobs(
    backend: Backend,
) -> None:
    """A failed migration or analysis Job is kept while its instance lives (for
    ``kubectl describe``); once the instance is uninstalled nothing would ever report
    or replace it, so it goes too. Jobs of other instances, and Jobs without the
    reconciler's labels, stay."""
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("a", ns, "web")])
    mine = [
        _job("web-add-index", ns, "web", {"reconciler.dev/migration": "add-index"}),
        _job("web-analysis-1", ns, "web", {"reconciler.dev/rollout-analysis": "k1"}),
    ]
    theirs = [
        _job("api-add-index", ns, "api", {"reconciler.dev/migration": "add-index"}),
        _job("web-nightly", ns, "web", {}),  # the instance's own CronJob-style Job
    ]
    for job in mine + theirs:
        backend.client.apply(job)
    live = LiveState(backend.client, backend.cluster)
    inv = live.inventory("web")
    assert inv is not None
    changes, reason, _ = remove_instance(backend.client, live, inv)
    assert reason is None
    deleted = {e.name for e in changes.entries if e.action is Action.DELETED}
    assert {"web-add-index", "web-analysis-1", "a"} <= deleted
    for job in mine:
        ref = ObjectRef.of(job)
        gone = backend.client.get(ref)
        # background deletion: gone, or at least being deleted
        assert gone is None or gone["metadata"].get("deletionTimestamp"), ref
    for job in theirs:
        assert backend.client.get(ObjectRef.of(job)) is not None
