"""PATCH flavours: https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/

JSON patch (RFC 6902), merge patch (RFC 7386) and the documented strategic-merge
subset (containers/env/ports/volumes merged by key, other lists replaced).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http

PATH = "/apis/apps/v1/namespaces/default/deployments/web"


def containers(apps: client.AppsV1Api) -> list[tuple[str, str]]:
    dep = apps.read_namespaced_deployment("web", "default")
    return [(c.name, c.image) for c in dep.spec.template.spec.containers]


@pytest.fixture
def web(apps: client.AppsV1Api) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    apps.create_namespaced_deployment("default", body)


@pytest.mark.usefixtures("web")
def test_strategic_merge_merges_containers_by_name(apps: client.AppsV1Api) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}}
    apps.patch_namespaced_deployment("web", "default", patch)  # client sends strategic merge
    assert containers(apps) == [("app", "nginx:2"), ("side", "busybox")]


@pytest.mark.usefixtures("web")
def test_strategic_merge_delete_directive(sandbox: SandboxHandle, apps: client.AppsV1Api) -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "side", "$patch": "delete"}],
                    "$setElementOrder/containers": [{"name": "app"}],
                }
            }
        }
    }
    status, _ = http(sandbox, "PATCH", PATH, patch, "application/strategic-merge-patch+json")
    assert status == 200
    assert containers(apps) == [("app", "nginx:1.25")]


@pytest.mark.usefixtures("web")
def test_merge_patch_replaces_lists(sandbox: SandboxHandle, apps: client.AppsV1Api) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}}}
    status, _ = http(sandbox, "PATCH", PATH, patch, "application/merge-patch+json")
    assert status == 200 and containers(apps) == [("only", "x")]
    status, _ = http(
        sandbox, "PATCH", PATH, {"metadata": {"labels": {"a": "1"}}}, "application/merge-patch+json"
    )
    status, body = http(
        sandbox,
        "PATCH",
        PATH,
        {"metadata": {"labels": {"a": None}}},
        "application/merge-patch+json",
    )
    assert status == 200 and "a" not in (body["metadata"].get("labels") or {})


@pytest.mark.usefixtures("web")
def test_json_patch(apps: client.AppsV1Api) -> None:
    ops = [
        {"op": "replace", "path": "/spec/replicas", "value": 7},
        {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}},
        {"op": "test", "path": "/spec/replicas", "value": 7},
        {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
        {"op": "remove", "path": "/spec/template/spec/containers/1"},
    ]
    apps.patch_namespaced_deployment("web", "default", ops)  # a list: client sends JSON patch
    dep = apps.read_namespaced_deployment("web", "default")
    # the Deployment controller may put its revision annotation back after the copy
    copied = dict(dep.metadata.annotations)
    copied.pop("deployment.kubernetes.io/revision", None)
    assert dep.spec.replicas == 7 and copied == {"x": "y"}
    assert containers(apps) == [("app", "nginx:1.25")]


@pytest.mark.usefixtures("web")
@pytest.mark.parametrize(
    ("ops", "code"),
    [
        ([{"op": "test", "path": "/spec/replicas", "value": 99}], 422),
        ([{"op": "remove", "path": "/spec/nope"}], 422),
        ([{"op": "explode", "path": "/spec"}], 422),
        ([{"path": "/spec"}], 422),
        ({"op": "add"}, 400),
    ],
)
def test_bad_json_patches(sandbox: SandboxHandle, ops: Any, code: int) -> None:
    status, body = http(sandbox, "PATCH", PATH, ops, "application/json-patch+json")
    assert status == code and body["kind"] == "Status"


@pytest.mark.usefixtures("web")
def test_unsupported_patch_type_and_missing_object(sandbox: SandboxHandle) -> None:
    assert http(sandbox, "PATCH", PATH, {}, "text/plain")[0] == 415
    status, _ = http(
        sandbox, "PATCH", PATH.replace("web", "ghost"), {}, "application/merge-patch+json"
    )
    assert status == 404


@pytest.mark.usefixtures("web")
def test_patch_with_stale_resource_version_conflicts(apps: client.AppsV1Api) -> None:
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_deployment("web", "default", {"metadata": {"resourceVersion": "1"}})
    assert e.value.status == 409
