"""Server-side apply: https://kubernetes.io/docs/reference/using-api/server-side-apply/

Field ownership in managedFields (FieldsV1), conflicts with other managers (409
with causes), ``force``, removal of fields a manager stopped applying, and
create-on-apply.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http

APPLY = "application/apply-patch+yaml"
CM = "/api/v1/namespaces/default/configmaps/cfg"


def apply(
    sandbox: SandboxHandle, body: Any, manager: str = "alice", force: bool = False, path: str = CM
) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return http(sandbox, "PATCH", path + query, body, APPLY)


def cfg(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data}


def managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


def test_apply_creates_and_records_managed_fields(sandbox: SandboxHandle) -> None:
    status, obj = apply(sandbox, cfg(a="1", b="2"))
    assert status == 201 and obj["data"] == {"a": "1", "b": "2"}
    entry = managers(obj)["alice"]
    assert entry["operation"] == "Apply" and entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    status, again = apply(sandbox, cfg(a="1", b="2"))
    assert status == 200
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_apply_yaml_body(sandbox: SandboxHandle) -> None:
    yaml_body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  k: v\n"
    status, obj = http(sandbox, "PATCH", CM + "?fieldManager=y", yaml_body, APPLY)
    assert status == 201 and obj["data"] == {"k": "v"}


def test_fields_dropped_from_apply_are_removed(sandbox: SandboxHandle) -> None:
    apply(sandbox, cfg(a="1", b="2"))
    _, obj = apply(sandbox, cfg(a="1"))
    assert obj["data"] == {"a": "1"}
    assert managers(obj)["alice"]["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_shared_fields_survive_when_one_owner_drops_them(sandbox: SandboxHandle) -> None:
    apply(sandbox, cfg(a="1", b="2"))
    apply(sandbox, cfg(b="2"), manager="bob")  # same value: shared ownership, no conflict
    _, obj = apply(sandbox, cfg(a="1"))
    assert obj["data"] == {"a": "1", "b": "2"}
    assert managers(obj)["bob"]["fieldsV1"] == {"f:data": {"f:b": {}}}


def test_conflict_names_manager_and_field(sandbox: SandboxHandle) -> None:
    apply(sandbox, cfg(a="1"))
    status, body = apply(sandbox, cfg(a="2"), manager="bob")
    assert status == 409 and body["reason"] == "Conflict"
    cause = body["details"]["causes"][0]
    assert cause["reason"] == "FieldManagerConflict" and cause["field"] == ".data.a"
    assert '"alice"' in cause["message"] and '"alice"' in body["message"]


def test_force_takes_ownership(sandbox: SandboxHandle) -> None:
    apply(sandbox, cfg(a="1", b="1"))
    status, obj = apply(sandbox, cfg(a="2"), manager="bob", force=True)
    assert status == 200 and obj["data"] == {"a": "2", "b": "1"}
    owners = managers(obj)
    assert owners["alice"]["fieldsV1"] == {"f:data": {"f:b": {}}}
    assert owners["bob"]["fieldsV1"] == {"f:data": {"f:a": {}}}
    _, obj = apply(sandbox, cfg(b="1"))  # alice no longer owns a: it stays
    assert obj["data"] == {"a": "2", "b": "1"}


def test_update_managers_conflict_with_apply(
    sandbox: SandboxHandle, apps: client.AppsV1Api, dyn: DynamicClient
) -> None:
    """A field changed by an Update (kubectl scale, a PUT) belongs to that manager."""
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    status, _ = apply(sandbox, deployment("web", replicas=2), manager="reconciler", path=path)
    assert status == 201
    apps.patch_namespaced_deployment_scale(
        "web", "default", {"spec": {"replicas": 5}}, field_manager="hpa"
    )
    status, body = apply(sandbox, deployment("web", replicas=3), manager="reconciler", path=path)
    assert status == 409 and body["details"]["causes"][0]["field"] == ".spec.replicas"
    assert "hpa" in body["message"]
    status, obj = apply(
        sandbox, deployment("web", replicas=3), manager="reconciler", path=path, force=True
    )
    assert status == 200 and obj["spec"]["replicas"] == 3
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    live = deployments.get(name="web", namespace="default")
    assert live.spec.replicas == 3


def test_list_items_merge_by_key_and_dropped_items_go(sandbox: SandboxHandle) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    two = deployment("web")
    two["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    _, obj = apply(sandbox, two, path=path)
    fields = managers(obj)["alice"]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert set(fields) == {'k:{"name":"app"}', 'k:{"name":"side"}'}
    assert fields['k:{"name":"app"}'] == {".": {}, "f:name": {}, "f:image": {}}
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "side", "env": [{"name": "X", "value": "1"}]}]}
            }
        },
    }
    status, obj = apply(sandbox, sidecar, manager="bob", path=path)
    assert status == 200
    # alice drops "side"; bob keeps its env, which would leave a container without an
    # image: a real server refuses that merged object (422), so nothing changes
    status, error = apply(sandbox, deployment("web"), path=path)
    assert status == 422
    fields = [c["field"] for c in error["details"]["causes"]]
    assert fields == ["spec.template.spec.containers[1].image"]
    _, obj = apply(sandbox, {**sidecar, "spec": {}}, manager="bob", path=path)
    names = [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]]
    assert names == ["app", "side"]  # alice still applies "side"
    _, obj = apply(sandbox, deployment("web"), path=path)
    names = [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]]
    assert names == ["app"]


def test_apply_ignores_status_on_main_resource(sandbox: SandboxHandle) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    body = {**deployment("web"), "status": {"replicas": 99}}
    _, obj = apply(sandbox, body, path=path)
    assert obj.get("status", {}).get("replicas") != 99
    assert "f:status" not in managers(obj)["alice"]["fieldsV1"]


@pytest.mark.parametrize(
    ("query", "body", "code"),
    [
        # fieldManager is required: a 422 of PatchOptions, as ValidatePatchOptions answers
        # (https://kubernetes.io/docs/reference/using-api/server-side-apply/#managers)
        ("", cfg(a="1"), 422),
        ("?fieldManager=x", {**cfg(a="1"), "metadata": {"name": "other"}}, 400),
        ("?fieldManager=x", {**cfg(a="1"), "kind": "Secret"}, 400),
        ("?fieldManager=x", "a: [unclosed", 400),
    ],
)
def test_bad_apply_requests(sandbox: SandboxHandle, query: str, body: Any, code: int) -> None:
    status, reply = http(sandbox, "PATCH", CM + query, body, APPLY)
    assert status == code and reply["kind"] == "Status"


def test_typed_client_apply(api_client: client.ApiClient, core: client.CoreV1Api) -> None:
    """The official client applies with ``_content_type`` and ``field_manager``."""
    core.patch_namespaced_config_map(
        "cfg", "default", cfg(z="1"), field_manager="typed", _content_type=APPLY
    )
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map(
            "cfg", "default", cfg(z="2"), field_manager="other", _content_type=APPLY
        )
    assert e.value.status == 409
    core.patch_namespaced_config_map(
        "cfg", "default", cfg(z="2"), field_manager="other", force=True, _content_type=APPLY
    )
    assert core.read_namespaced_config_map("cfg", "default").data == {"z": "2"}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (cfg(), cfg(k="v")),
        (
            {**cfg(), "metadata": {"name": "cfg", "labels": {}}},
            {**cfg(), "metadata": {"name": "cfg", "labels": {"app": "web"}}},
        ),
    ],
)
def test_empty_map_then_filled_map_keeps_the_map(
    sandbox: SandboxHandle, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """An applied ``{}`` that later gains keys keeps them (the map is still applied).

    https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management:
    only fields the manager stopped applying are removed.
    """
    apply(sandbox, before)
    _, obj = apply(sandbox, after)
    assert obj.get("data", {}) == after.get("data", {})
    assert obj["metadata"].get("labels", {}) == after["metadata"].get("labels", {})
    _, again = apply(sandbox, before)
    assert again.get("data", {}) == {} and not again["metadata"].get("labels")


def test_empty_resources_then_limits_keeps_limits(sandbox: SandboxHandle) -> None:
    """``resources: {}`` changed to limits in a template is applied in the same pass.

    https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management
    """
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    apply(sandbox, body, path=path)
    limits = {"limits": {"memory": "64Mi"}}
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = limits
    status, obj = apply(sandbox, body, path=path)
    assert status == 200
    assert obj["spec"]["template"]["spec"]["containers"][0]["resources"] == limits
