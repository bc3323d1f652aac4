"""Apply against a live API: create, no-op, drift, conflicts, order, limits, errors."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import orjson
import pytest

from reconciler.kube import (
    ApplyOptions,
    InstanceTarget,
    Limits,
    LiveState,
    apply_instance,
    read_deployed_versions,
)
from reconciler.kube.apply import GATED, InstanceResult
from reconciler.kube.client import Response
from reconciler.kube.prune import UNDONE
from reconciler.model.changeset import Action, ObjectRef
from reconciler.model.errors import KubeError
from tests.kube.conftest import (
    WRITE_VERBS,
    Backend,
    configmap,
    deployment,
    edit_like_kubectl,
    string_ids,
)


def run(
    be: Backend, instance: str, namespace: str, objects: list[dict[str, Any]], **opts: Any
) -> InstanceResult:
    target = InstanceTarget(be.cluster, instance, namespace, tuple(objects), "demo", "1.0.0")
    return apply_instance(be.client, target, ApplyOptions(**opts), LiveState(be.client, be.cluster))


def actions(result: InstanceResult) -> dict[str, str]:
    return {str(e.ref): str(e.action) for e in result.changes.entries}


def test_first_apply_creates_then_noop_pass_writes_nothing(backend: Backend) -> None:
    ns = backend.namespace("web")
    objects = [deployment("podinfo", ns, "web"), configmap("cfg", ns, "web")]
    first = run(backend, "web", ns, objects)
    assert first.ok, first.message
    assert actions(first) == {
        f"Namespace/{ns}": "created",
        f"ConfigMap/{ns}/cfg": "created",
        f"Deployment/{ns}/podinfo": "created",
    }
    backend.reset_log()
    second = run(backend, "web", ns, objects)
    assert second.ok
    assert set(actions(second).values()) == {"unchanged"}
    assert backend.writes() in ([], None)
    log = backend.log()
    if log is not None:
        lists = [e.path for e in log if e.verb == "list"]
        assert len(lists) == len(set(lists)) <= 2  # one list per kind, no GET per object
        assert not [e for e in log if e.verb == "get"]


def test_the_inventory_names_its_objects_with_strings_of_its_own(backend: Backend) -> None:
    """The daemon keeps every instance's inventory across passes, so what it holds of
    each object's reference is allocated for it: the API version, kind and namespace
    are shared by every inventory that names them, and no string of the decoded
    objects an apply was given is kept (they are dropped with the apply)."""
    inventories = []
    for name in ("one", "two"):
        ns = backend.namespace(name)
        given = orjson.loads(orjson.dumps([configmap("cfg", ns, name)]))
        result = run(backend, name, ns, given)
        assert result.ok and result.inventory is not None, result.message
        refs = [r for r in result.inventory.objects if r.kind == "ConfigMap"]
        assert len(refs) == 1
        fields = (refs[0].api_version, refs[0].kind, refs[0].namespace, refs[0].name)
        assert not {id(f) for f in fields} & string_ids(given)
        inventories.append(refs[0])
    one, two = inventories
    assert one.kind is two.kind is sys.intern("ConfigMap")
    assert one.api_version is two.api_version


def test_changed_object_is_configured_alone(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [deployment("podinfo", ns, "web"), configmap("cfg", ns, "web")])
    backend.reset_log()
    changed = [deployment("podinfo", ns, "web"), configmap("cfg", ns, "web", a="2")]
    result = run(backend, "web", ns, changed)
    assert actions(result)[f"ConfigMap/{ns}/cfg"] == "configured"
    assert actions(result)[f"Deployment/{ns}/podinfo"] == "unchanged"
    writes = backend.writes()
    if writes is not None:
        assert writes == [
            f"patch /api/v1/namespaces/{ns}/configmaps/cfg",
            f"patch /api/v1/namespaces/{ns}/configmaps/reconciler-inventory-web",
        ]
    live = backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg"))
    assert live is not None and live["data"] == {"a": "2"}


def test_an_upgrade_of_one_object_sends_no_dry_run(backend: Backend) -> None:
    """The first object to be written is not dry-run: nothing is written before it, so its
    own apply tells as much. One changed object: one request, no dry run (issue 12)."""
    ns = backend.namespace("web")
    objects = [deployment("podinfo", ns, "web"), configmap("cfg", ns, "web")]
    assert run(backend, "web", ns, objects).ok
    backend.reset_log()
    result = run(backend, "web", ns, [objects[0], configmap("cfg", ns, "web", a="2")])
    assert result.ok, result.message
    assert actions(result)[f"ConfigMap/{ns}/cfg"] == "configured"
    log = backend.log()
    if log is not None:
        assert not [e for e in log if "dryRun=" in e.query]


def test_a_refused_first_object_stops_the_upgrade_before_anything_is_written(
    backend: Backend,
) -> None:
    """The dry run passes the Deployment; the ConfigMap, written first and not dry-run,
    is refused (a typo, ``fieldValidation=Strict``): the Deployment is then not applied,
    so the instance still runs as before, whole.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    ns = backend.namespace("web")
    objects = [deployment("podinfo", ns, "web"), configmap("cfg", ns, "web")]
    assert run(backend, "web", ns, objects).ok
    ref = ObjectRef("apps/v1", "Deployment", ns, "podinfo")
    before = backend.client.get(ref)
    typo = configmap("cfg", ns, "web", a="2")
    typo["datta"] = typo.pop("data")
    result = run(backend, "web", ns, [deployment("podinfo", ns, "web", replicas=3), typo])
    assert result.reason == "ApplyFailed" and ".datta" in result.message
    assert actions(result) == {
        f"ConfigMap/{ns}/cfg": "failed",
        f"Deployment/{ns}/podinfo": "skipped",
    }
    skipped = next(e for e in result.changes.entries if e.kind == "Deployment")
    assert skipped.message == GATED
    after = backend.client.get(ref)
    assert before is not None and after is not None
    # what the engine owns is as it was: the Deployment's controller may write its
    # status (a new resourceVersion) meanwhile, but never its spec or generation
    assert after["spec"] == before["spec"] and after["spec"]["replicas"] == 2
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert run(backend, "web", ns, objects).ok  # the next commit goes through


def test_removed_field_is_applied(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("cfg", ns, "web", a="1", b="2")])
    result = run(backend, "web", ns, [configmap("cfg", ns, "web", a="1")])
    assert actions(result)[f"ConfigMap/{ns}/cfg"] == "configured"
    live = backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg"))
    assert live is not None and live["data"] == {"a": "1"}


def test_imperative_drift_is_reverted(backend: Backend) -> None:
    ns = backend.namespace("web")
    objects = [deployment("podinfo", ns, "web", replicas=2)]
    run(backend, "web", ns, objects)
    ref = ObjectRef("apps/v1", "Deployment", ns, "podinfo")
    edit_like_kubectl(backend.client, ref, {"spec": {"replicas": 5}})
    result = run(backend, "web", ns, objects)
    assert result.ok, result.message
    entry = result.changes.entries[0]
    assert entry.action is Action.CONFIGURED
    assert "kubectl-edit" in entry.message
    live = backend.client.get(ref)
    assert live is not None and live["spec"]["replicas"] == 2


def test_conflict_with_other_applier_needs_force(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("cfg", ns, "web", a="1")])
    other = configmap("cfg", ns, "web", a="theirs")
    backend.client.request(
        "PATCH",
        backend.client.object_path(ObjectRef.of(other)),
        subject="cfg",
        verb="apply",
        query=[("fieldManager", "other-tool"), ("force", "true")],
        body=other,
        content_type="application/apply-patch+yaml",
    )
    refused = run(backend, "web", ns, [configmap("cfg", ns, "web", a="1")])
    assert not refused.ok
    entry = refused.changes.entries[0]
    assert entry.action is Action.FAILED
    assert "other-tool" in entry.message and ".data.a" in entry.message
    assert f"ConfigMap/{ns}/cfg" in entry.message
    forced = run(backend, "web", ns, [configmap("cfg", ns, "web", a="1")], force_conflicts=True)
    assert forced.ok and forced.changes.entries[0].action is Action.CONFIGURED
    live = backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg"))
    assert live is not None and live["data"]["a"] == "1"


def test_crd_and_custom_resource_in_one_pass(backend: Backend) -> None:
    ns = backend.namespace("web")
    group = backend.name("demo") + ".example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"widgets.{group}",
            "labels": {
                "app.kubernetes.io/managed-by": "reconciler",
                "app.kubernetes.io/instance": "web",
            },
        },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    widget = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "labels": {
                "app.kubernetes.io/managed-by": "reconciler",
                "app.kubernetes.io/instance": "web",
            },
        },
        "spec": {"size": 3},
    }
    result = run(backend, "web", ns, [widget, crd])
    assert result.ok, result.message
    kinds = [e.kind for e in result.changes.entries]
    assert kinds.index("CustomResourceDefinition") < kinds.index("Widget")
    assert backend.client.get(ObjectRef(f"{group}/v1", "Widget", ns, "w")) is not None
    again = run(backend, "web", ns, [widget, crd])
    assert set(actions(again).values()) == {"unchanged"}
    if backend.sandbox is None:
        run(backend, "web", ns, [], allow_empty_prune=True)


def test_namespace_outside_limits_refused_whole(backend: Backend) -> None:
    limits = Limits(allowed_namespaces=("team-*",))
    ns = backend.namespace("team-a")
    objects = [configmap("ok", ns, "web"), configmap("bad", "kube-system", "web")]
    result = run(backend, "web", ns, objects, limits=limits)
    assert not result.ok and result.reason == "PolicyViolation"
    assert actions(result) == {
        "ConfigMap/kube-system/bad": "failed",
        f"ConfigMap/{ns}/ok": "skipped",
    }
    assert 'namespace "kube-system" is not allowed' in result.message
    assert backend.client.get(ObjectRef("v1", "ConfigMap", ns, "ok")) is None


def test_cluster_scoped_refused_when_not_allowed(backend: Backend) -> None:
    ns = backend.namespace("web")
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": backend.name("reader"), "namespace": ns},
        "rules": [],
    }
    result = run(backend, "web", ns, [role], limits=Limits(allow_cluster_scoped=False))
    assert not result.ok
    entry = result.changes.entries[0]
    assert entry.action is Action.FAILED and entry.namespace == ""
    assert "cluster-scoped objects are not allowed" in entry.message


def test_unknown_kind_and_invalid_object_fail_with_names(backend: Backend) -> None:
    """A first install is not dry-run first (issue 12); what it created is deleted again
    when another object is refused, so nothing of the instance runs."""
    ns = backend.namespace("web")
    unknown = {
        "apiVersion": "nope.example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": ns},
    }
    bad = configmap("Bad_Name", ns, "web")  # not a DNS subdomain: 422 Invalid
    good = configmap("good", ns, "web")
    result = run(backend, "web", ns, [unknown, bad, good])
    got = {str(e.ref): e for e in result.changes.entries}
    assert got[f"ConfigMap/{ns}/good"].action is Action.SKIPPED
    assert got[f"ConfigMap/{ns}/good"].message == UNDONE
    assert backend.client.get(ObjectRef.of(good)) is None
    assert result.inventory is None
    assert got[f"Gadget/{ns}/g"].action is Action.FAILED
    assert "does not serve this kind" in got[f"Gadget/{ns}/g"].message
    assert got[f"ConfigMap/{ns}/Bad_Name"].action is Action.FAILED
    message = got[f"ConfigMap/{ns}/Bad_Name"].message
    assert message.startswith(f"ConfigMap/{ns}/Bad_Name: apply failed (Invalid): ")
    assert result.reason == "ApplyFailed"


def test_first_install_is_not_dry_run_and_is_undone_when_an_object_is_refused(
    backend: Backend,
) -> None:
    """A first install (no inventory, none of its objects live) skips the dry run, which
    cost three requests of seven per new instance (issue 12). It stays whole or nothing:
    a refused object (a typo: ``fieldValidation=Strict``) deletes what the apply created,
    with the uid it was created with, and writes no inventory. The fixed commit installs.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    ns = backend.namespace("web")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    backend.reset_log()
    assert run(backend, "web", ns, [configmap("cfg", ns, "web")]).ok
    log = backend.log()
    if log is not None:
        assert not [e for e in log if "dryRun=" in e.query]
    typo = deployment("api", ns, "api")
    typo["spec"]["replicass"] = typo["spec"].pop("replicas")
    backend.reset_log()
    result = run(backend, "api", ns, [configmap("api-cfg", ns, "api"), typo])
    assert result.reason == "ApplyFailed" and ".spec.replicass" in result.message
    assert result.inventory is None
    assert actions(result) == {
        f"ConfigMap/{ns}/api-cfg": "skipped",
        f"Deployment/{ns}/api": "failed",
    }
    assert backend.client.get(ObjectRef("v1", "ConfigMap", ns, "api-cfg")) is None
    assert backend.client.get(ObjectRef("v1", "ConfigMap", ns, "reconciler-inventory-api")) is None
    log = backend.log()
    if log is not None:
        assert [e.verb for e in log if e.verb in WRITE_VERBS] == ["patch", "patch", "delete"]
    fixed = run(backend, "api", ns, [configmap("api-cfg", ns, "api"), deployment("api", ns, "api")])
    assert fixed.ok, fixed.message
    assert set(actions(fixed).values()) == {"created"}
    assert backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg")) is not None  # untouched


def test_a_created_object_that_cannot_be_deleted_again_stays_in_the_inventory(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When undoing a failed first install fails too, the object is reported created (with
    why it is still there) and the inventory lists it, so the next pass owns it."""
    ns = backend.namespace("web")

    def refuse(ref: ObjectRef, **_: Any) -> bool:
        raise KubeError(f"{ref}: delete failed (Forbidden)")

    monkeypatch.setattr(backend.client, "delete", refuse)
    bad = configmap("Bad_Name", ns, "web")
    result = run(backend, "web", ns, [configmap("cfg", ns, "web"), bad])
    entry = next(e for e in result.changes.entries if e.name == "cfg")
    assert entry.action is Action.CREATED
    assert entry.message == f"created, and could not be deleted again: ConfigMap/{ns}/cfg: " + (
        "delete failed (Forbidden)"
    )
    assert result.reason == "ApplyFailed" and "Bad_Name" in result.message
    assert result.inventory is not None
    assert list(result.inventory.objects) == [ObjectRef("v1", "ConfigMap", ns, "cfg")]
    assert backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg")) is not None


def test_a_failed_first_install_keeps_the_unlabelled_object_it_adopted(backend: Backend) -> None:
    """An object someone created by hand, with the name the instance renders, is not in the
    view (it lacks our labels), so the install counts as a first one and adopts it. When
    another object is then refused, the adopted one existed before and is not deleted:
    the inventory lists it, so the next pass owns it."""
    ns = backend.namespace("web")
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    backend.client.request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        subject="cfg",
        verb="create",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}},
    )
    result = run(
        backend, "web", ns, [configmap("cfg", ns, "web"), configmap("Bad_Name", ns, "web")]
    )
    assert result.reason == "ApplyFailed" and "Bad_Name" in result.message
    assert actions(result)[f"ConfigMap/{ns}/cfg"] == "configured"
    assert result.inventory is not None
    assert list(result.inventory.objects) == [ObjectRef("v1", "ConfigMap", ns, "cfg")]
    live = backend.client.get(ObjectRef("v1", "ConfigMap", ns, "cfg"))
    assert live is not None and live["metadata"]["labels"]["app.kubernetes.io/instance"] == "web"


def test_object_of_another_instance_is_not_taken(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("shared", ns, "web")])
    result = run(backend, "api", ns, [configmap("shared", ns, "api")])
    assert not result.ok
    assert "already owned by instance web" in result.changes.entries[0].message


def test_inventory_records_deployed_version(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("cfg", ns, "web")])
    versions = read_deployed_versions(backend.client, backend.cluster, ["web", "other"])
    assert versions == {"web": "1.0.0"}
    assert read_deployed_versions(backend.client, "elsewhere", ["web"]) == {}


def test_a_typo_in_a_manifest_fails_naming_the_object_and_the_field(backend: Backend) -> None:
    """Apply is strict about fields: ``spec.replicass`` is an error naming the Deployment and
    the field, found by the dry run, so nothing of the instance is written (a lenient
    decoder would have dropped it and run one replica).

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    ns = backend.namespace("web")
    assert run(backend, "web", ns, [configmap("cfg", ns, "web")]).ok
    typo = deployment("podinfo", ns, "web", replicas=3)
    typo["spec"]["replicass"] = typo["spec"].pop("replicas")
    backend.reset_log()
    result = run(backend, "web", ns, [configmap("cfg", ns, "web", a="2"), typo])
    assert not result.ok and result.reason == "ApplyFailed"
    entries = {str(e.ref): e for e in result.changes.entries}
    failed = entries[f"Deployment/{ns}/podinfo"]
    assert failed.action is Action.FAILED
    assert failed.message.startswith(f"Deployment/{ns}/podinfo: dry-run apply failed")
    assert failed.message.endswith(".spec.replicass: field not declared in schema")
    assert ".spec.replicass" in result.message
    assert entries[f"ConfigMap/{ns}/cfg"].action is Action.SKIPPED
    assert backend.writes() in ([], None)
    assert backend.client.get(ObjectRef("apps/v1", "Deployment", ns, "podinfo")) is None
    log = backend.log()
    if log is not None:
        applies = [e for e in log if e.method == "PATCH"]
        # the dry run of the Deployment, once (no retry); the ConfigMap, the first object
        # to be written, is not dry-run: its own apply would have been its dry run
        assert [e.path.rsplit("/", 1)[1] for e in applies] == ["podinfo"]
        assert all("fieldValidation=Strict" in e.query for e in applies)


def test_api_server_warnings_reach_the_change_set(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warning the API server sends with a successful apply (a deprecated API, a
    duplicate port) is kept in the object's entry, after the entry's own note.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    ns = backend.namespace("web")
    objects = [configmap("cfg", ns, "web"), deployment("podinfo", ns, "web")]
    assert run(backend, "web", ns, objects).ok
    apply = backend.client.apply

    def warned(obj: Any, **kwargs: Any) -> Response:
        response = apply(obj, **kwargs)
        if obj["kind"] != "ConfigMap" or kwargs.get("dry_run"):
            return response
        return dataclasses.replace(response, warnings=("one", "two"))

    monkeypatch.setattr(backend.client, "apply", warned)
    result = run(backend, "web", ns, [configmap("cfg", ns, "web", a="2"), objects[1]])
    assert result.ok, result.message
    entry = next(e for e in result.changes.entries if e.kind == "ConfigMap")
    assert entry.action is Action.CONFIGURED
    assert entry.message == "API server warning: one; API server warning: two"
    edit_like_kubectl(backend.client, ObjectRef.of(objects[0]), {"data": {"a": "3"}})
    reverted = run(backend, "web", ns, objects)
    entry = next(e for e in reverted.changes.entries if e.kind == "ConfigMap")
    assert entry.message == (
        "reverted changes made by kubectl-edit; API server warning: one; API server warning: two"
    )


def test_inventory_source_commit_moves_only_when_the_inventory_changes(backend: Backend) -> None:
    """A commit that renders the same objects writes nothing, not even the inventory.

    ``sourceCommit`` names the commit that last changed what the inventory records;
    the status branch (not the cluster) records which commit each pass saw.
    """
    ns = backend.namespace("web")

    def at(commit: str, **data: str) -> InstanceResult:
        objects = (configmap("cfg", ns, "web", **data),)
        target = InstanceTarget(backend.cluster, "web", ns, objects, "demo", "1.0.0", commit)
        return apply_instance(
            backend.client, target, None, LiveState(backend.client, backend.cluster)
        )

    def recorded() -> str:
        inventory = LiveState(backend.client, backend.cluster).inventory("web")
        assert inventory is not None
        return inventory.source_commit

    at("c1", a="1")
    assert recorded() == "c1"
    backend.reset_log()
    same = at("c2", a="1")  # e.g. a commit that only edited a README
    assert same.ok and backend.writes() in ([], None)
    assert recorded() == "c1"
    changed = at("c3", a="2")
    assert actions(changed)[f"ConfigMap/{ns}/cfg"] == "configured"
    assert recorded() == "c3"
