"""Deletion semantics.

https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/ (deletionTimestamp,
removing the last finalizer deletes), https://kubernetes.io/docs/concepts/architecture/garbage-collection/
(owner references, propagation policies) and namespace termination
(https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/).
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.namespaces import ROOT_CA
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http


def owned_cm(name: str, *owners: client.V1ObjectMeta) -> dict:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o.name, "uid": o.uid} for o in owners]
    return {"metadata": {"name": name, "ownerReferences": refs}}


def names(core: client.CoreV1Api, namespace: str = "default") -> list[str]:
    """The test's ConfigMaps: all but the root CA every namespace holds."""
    listed = core.list_namespaced_config_map(namespace).items
    return [i.metadata.name for i in listed if i.metadata.name != ROOT_CA]


def test_finalizers_hold_deletion(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a", "finalizers": ["example.com/x", "example.com/y"]}}
    )
    status, body = http(sandbox, "DELETE", "/api/v1/namespaces/default/configmaps/a")
    # 200, not 202: the API server only says Accepted for orphanDependents=false
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    held = core.read_namespaced_config_map("a", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map(
        "a", "default", [{"op": "remove", "path": "/metadata/finalizers/0"}]
    )
    assert names(core) == ["a"]
    core.patch_namespaced_config_map("a", "default", {"metadata": {"finalizers": None}})
    assert names(core) == []


def test_owner_deletion_collects_dependents(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}}).metadata
    other = core.create_namespaced_config_map("default", {"metadata": {"name": "other"}}).metadata
    core.create_namespaced_config_map("default", owned_cm("child", owner))
    core.create_namespaced_config_map("default", owned_cm("shared", owner, other))
    grandchild_owner = core.read_namespaced_config_map("child", "default").metadata
    core.create_namespaced_config_map("default", owned_cm("grandchild", grandchild_owner))
    core.delete_namespaced_config_map("owner", "default")
    assert names(core) == ["other", "shared"]
    refs = core.read_namespaced_config_map("shared", "default").metadata.owner_references
    assert [r.name for r in refs] == ["other"]


def test_orphan_propagation_keeps_dependents(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}}).metadata
    core.create_namespaced_config_map("default", owned_cm("child", owner))
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    assert names(core) == ["child"]
    assert not core.read_namespaced_config_map("child", "default").metadata.owner_references


def test_namespace_deletion_cascades(core: client.CoreV1Api, apps: client.AppsV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "a"}})
    apps.create_namespaced_deployment("team", deployment("web"))
    core.create_namespaced_config_map("default", {"metadata": {"name": "keep"}})
    core.delete_namespace("team")
    with pytest.raises(ApiException) as e:
        core.read_namespace("team")
    assert e.value.status == 404
    assert apps.list_deployment_for_all_namespaces().items == []
    assert names(core) == ["keep"]


def test_namespace_terminates_until_finalized_content_is_gone(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map(
        "team", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    )
    core.delete_namespace("team")
    ns = core.read_namespace("team")
    assert ns.status.phase == "Terminating" and ns.metadata.deletion_timestamp
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("team", {"metadata": {"name": "new"}})
    assert e.value.status == 403
    core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException):
        core.read_namespace("team")


def test_delete_preconditions(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    status, body = http(
        sandbox,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/a",
        {"preconditions": {"resourceVersion": "1"}},
    )
    assert status == 409 and body["message"].startswith(
        'Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the '
        "precondition (1) does not match the ResourceVersion in record"
    )
    assert http(sandbox, "DELETE", "/api/v1/namespaces/default/configmaps/a", [1])[0] == 400
    assert http(sandbox, "DELETE", "/api/v1/namespaces/default/configmaps/zz")[0] == 404


def test_new_namespaces_start_active(core: client.CoreV1Api) -> None:
    ns = core.create_namespace({"metadata": {"name": "fresh"}})
    assert ns.status.phase == "Active"
    with pytest.raises(ApiException) as e:
        core.create_namespace({"metadata": {"name": "has.dots"}})
    assert e.value.status == 422
