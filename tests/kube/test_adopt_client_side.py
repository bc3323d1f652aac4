"""Adopting objects that someone created with client-side ``kubectl apply``.

On a real cluster such an object is owned by ``kubectl-client-side-apply``
(operation Update) and carries the last-applied annotation
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#upgrading-from-client-side-apply-to-server-side-apply).
Applying it server-side as another manager shares the fields whose values match,
so a field later removed from Git would stay forever, still owned by client-side
apply. The engine therefore moves the client-side fields to its own apply entry
first (what ``kubectl apply --server-side`` does for its manager, through a JSON
patch of ``managedFields``), and Git becomes the whole truth.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.kube import ApplyOptions, InstanceTarget, LiveState, apply_instance, diff_instance
from reconciler.kube.apply import InstanceResult
from reconciler.kube.client import FIELD_MANAGER
from reconciler.model.changeset import Action, ObjectRef
from tests.kube.conftest import Backend, configmap, edit_like_kubectl

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def run(be: Backend, namespace: str, objects: list[dict[str, Any]]) -> InstanceResult:
    target = InstanceTarget(be.cluster, "web", namespace, tuple(objects), "demo", "1.0.0")
    return apply_instance(be.client, target, ApplyOptions(), LiveState(be.client, be.cluster))


def kubectl_client_side_create(be: Backend, namespace: str, **data: str) -> None:
    """The namespace and a ConfigMap, created as ``kubectl apply -f`` (client-side) does."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    be.client.request("POST", "/api/v1/namespaces", subject="ns", verb="create", body=ns)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": namespace, "annotations": {}},
        "data": data,
    }
    last = json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"
    body["metadata"]["annotations"] = {LAST_APPLIED: last}
    be.client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        subject="cfg",
        verb="create",
        query=[("fieldManager", "kubectl-client-side-apply")],
        body=body,
    )


def managers(live: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in live["metadata"].get("managedFields") or ()}


def test_adopted_object_follows_git_exactly(backend: Backend) -> None:
    """Fields only the old client-side config had are removed, the annotation too."""
    ns = backend.namespace("adopt")
    kubectl_client_side_create(backend, ns, a="1", b="2")
    result = run(backend, ns, [configmap("cfg", ns, "web", a="1")])
    assert result.ok, result.message
    ref = ObjectRef("v1", "ConfigMap", ns, "cfg")
    live = backend.client.get(ref)
    assert live is not None
    assert live["data"] == {"a": "1"}
    assert LAST_APPLIED not in (live["metadata"].get("annotations") or {})
    assert managers(live) == {(FIELD_MANAGER, "Apply")}
    backend.reset_log()
    again = run(backend, ns, [configmap("cfg", ns, "web", a="1")])
    assert again.ok and {e.action for e in again.changes.entries} == {Action.UNCHANGED}
    assert backend.writes() in ([], None)


def test_adopted_object_with_changed_values_needs_no_force(backend: Backend) -> None:
    """The client-side manager's values are replaced without --force-conflicts."""
    ns = backend.namespace("adopt")
    kubectl_client_side_create(backend, ns, a="1")
    result = run(backend, ns, [configmap("cfg", ns, "web", a="9")])
    assert result.ok, result.message
    entry = next(e for e in result.changes.entries if e.kind == "ConfigMap")
    assert entry.action is Action.CONFIGURED
    assert "took over the fields of client-side apply (kubectl-client-side-apply)" in entry.message
    live = backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg"))
    assert live is not None and live["data"] == {"a": "9"}
    assert managers(live) == {(FIELD_MANAGER, "Apply")}


def test_other_update_managers_keep_their_fields(backend: Backend) -> None:
    """Only client-side apply's fields move; an edit by someone else is drift as before."""
    ns = backend.namespace("adopt")
    kubectl_client_side_create(backend, ns, a="1")
    ref = ObjectRef("v1", "ConfigMap", ns, "cfg")
    edit_like_kubectl(backend.client, ref, {"metadata": {"labels": {"team": "x"}}})
    result = run(backend, ns, [configmap("cfg", ns, "web", a="1")])
    assert result.ok, result.message
    live = backend.client.get(ref)
    assert live is not None and live["metadata"]["labels"]["team"] == "x"
    assert ("kubectl-edit", "Update") in managers(live)
    assert ("kubectl-client-side-apply", "Update") not in managers(live)


def kubectl_client_side_update(be: Backend, ref: ObjectRef, **data: str) -> None:
    """What ``kubectl apply`` (client-side) sends for an existing object: a patch by that
    manager that also rewrites the last-applied annotation."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "data": data}
    config["metadata"] = {"name": ref.name, "namespace": ref.namespace}
    last = json.dumps(config, sort_keys=True, separators=(",", ":")) + "\n"
    be.client.request(
        "PATCH",
        be.client.object_path(ref),
        subject=str(ref),
        verb="patch",
        query=[("fieldManager", "kubectl-client-side-apply")],
        body={"data": data, "metadata": {"annotations": {LAST_APPLIED: last}}},
        content_type="application/merge-patch+json",
    )


def test_client_side_apply_over_our_object_is_taken_back(backend: Backend) -> None:
    """Someone ``kubectl apply``-s over an object of ours: the next pass restores Git."""
    ns = backend.namespace("adopt")
    objects = [configmap("cfg", ns, "web", a="1")]
    assert run(backend, ns, objects).ok
    ref = ObjectRef("v1", "ConfigMap", ns, "cfg")
    kubectl_client_side_update(backend, ref, a="2", extra="x")
    backend.reset_log()
    result = run(backend, ns, objects)
    assert result.ok, result.message
    live = backend.client.get(ref)
    assert live is not None and live["data"] == {"a": "1"}
    assert LAST_APPLIED not in (live["metadata"].get("annotations") or {})
    writes = backend.writes()
    if writes is not None:
        path = f"/api/v1/namespaces/{ns}/configmaps/cfg"
        assert writes == [f"patch {path}", f"patch {path}"]  # managedFields, then apply


def test_a_concurrent_change_fails_the_take_over_until_the_next_pass(backend: Backend) -> None:
    """The patch carries the listed resourceVersion: a write in between is a 409, not lost."""
    ns = backend.namespace("adopt")
    objects = [configmap("cfg", ns, "web", a="1")]
    assert run(backend, ns, objects).ok
    ref = ObjectRef("v1", "ConfigMap", ns, "cfg")
    kubectl_client_side_update(backend, ref, a="2")
    live = LiveState(backend.client, backend.cluster)
    live.get(ref)  # listed now, changed below before the apply
    edit_like_kubectl(backend.client, ref, {"metadata": {"labels": {"team": "x"}}})
    target = InstanceTarget(backend.cluster, "web", ns, tuple(objects), "demo", "1.0.0")
    failed = apply_instance(backend.client, target, ApplyOptions(), live)
    entry = next(e for e in failed.changes.entries if e.kind == "ConfigMap")
    assert entry.action is Action.FAILED
    assert "take over client-side apply fields failed (Conflict)" in entry.message
    again = run(backend, ns, objects)
    assert again.ok, again.message
    current = backend.client.get(ref)
    assert current is not None and current["data"] == {"a": "1"}


def test_diff_shows_what_adoption_removes(backend: Backend) -> None:
    """``diff`` predicts the take-over: fields only client-side apply had are deleted."""
    ns = backend.namespace("adopt")
    kubectl_client_side_create(backend, ns, a="1", b="2")
    target = InstanceTarget(backend.cluster, "web", ns, (configmap("cfg", ns, "web", a="1"),))
    live = LiveState(backend.client, backend.cluster)
    (changed,) = diff_instance(backend.client, target, ApplyOptions(), live)
    assert changed.change == "update"
    assert "-  b: '2'" in changed.diff and "+  b: '2'" not in changed.diff
    assert "-  a:" not in changed.diff
    current = backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg"))
    assert current is not None and current["data"] == {"a": "1", "b": "2"}
