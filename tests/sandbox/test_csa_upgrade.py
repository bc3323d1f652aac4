"""Objects made by client-side ``kubectl apply``, then applied server-side.

https://kubernetes.io/docs/reference/using-api/server-side-apply/#upgrading-from-client-side-apply-to-server-side-apply:
field management transfers from client-side apply (manager
``kubectl-client-side-apply``, operation Update, with the
``kubectl.kubernetes.io/last-applied-configuration`` annotation) to ``kubectl``
without conflicts, for fields still as last applied; fields changed since by
someone else (``kubectl scale``) conflict; another field manager opts out and gets
ordinary conflicts. Same values never conflict, whoever applies them
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts).
Writes may set ``managedFields`` directly
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management),
which kubectl uses to move the client-side fields to its own entry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import http

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
KUBECTL = shutil.which("kubectl")


def config(**data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default"},
        "data": data,
    }


def client_side_create(sandbox: SandboxHandle, **data: str) -> dict[str, Any]:
    """What ``kubectl apply`` (client-side) sends for a new object."""
    body = config(**data)
    annotated = {**body, "metadata": {**body["metadata"], "annotations": {}}}
    last = json.dumps(annotated, sort_keys=True, separators=(",", ":")) + "\n"
    body["metadata"]["annotations"] = {LAST_APPLIED: last}
    status, created = http(
        sandbox, "POST", CONFIGMAPS + "?fieldManager=kubectl-client-side-apply", body
    )
    assert status == 201, created
    return created


def server_side_apply(
    sandbox: SandboxHandle, manager: str, body: dict[str, Any]
) -> tuple[int, Any]:
    return http(
        sandbox,
        "PATCH",
        f"{CONFIGMAPS}/cfg?fieldManager={manager}&force=false",
        body,
        "application/apply-patch+yaml",
    )


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_same_values_applied_by_another_manager_do_not_conflict(sandbox: SandboxHandle) -> None:
    """Both managers then share the fields; the annotation stays with client-side apply."""
    client_side_create(sandbox, greeting="hello", other="x")
    status, obj = server_side_apply(sandbox, "deployer", config(greeting="hello", other="x"))
    assert status == 200, obj
    fields = owners(obj)
    assert fields["deployer"] == {"f:data": {"f:greeting": {}, "f:other": {}}}
    assert fields["kubectl-client-side-apply"]["f:data"] == {"f:greeting": {}, "f:other": {}}
    assert LAST_APPLIED in obj["metadata"]["annotations"]
    # dropping a shared field from the applied config does not delete it
    status, obj = server_side_apply(sandbox, "deployer", config(greeting="hello"))
    assert status == 200 and obj["data"] == {"greeting": "hello", "other": "x"}


def test_changed_values_from_another_manager_conflict(sandbox: SandboxHandle) -> None:
    """Only ``kubectl`` gets the upgrade; any other manager sees a normal conflict."""
    client_side_create(sandbox, greeting="hello")
    status, answer = server_side_apply(sandbox, "deployer", config(greeting="hi"))
    assert status == 409
    assert answer["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: '
        ".data.greeting"
    )


def test_kubectl_takes_over_fields_still_as_last_applied(sandbox: SandboxHandle) -> None:
    """``kubectl apply --server-side`` with new values: forced for client-side fields."""
    client_side_create(sandbox, greeting="hello", other="x")
    applied = config(greeting="hi", other="x")
    status, obj = server_side_apply(sandbox, "kubectl", applied)
    assert status == 200, obj
    assert obj["data"] == {"greeting": "hi", "other": "x"}
    fields = owners(obj)
    assert fields["kubectl"] == {"f:data": {"f:greeting": {}, "f:other": {}}}
    assert "f:greeting" not in fields["kubectl-client-side-apply"]["f:data"]
    # the annotation now records what kubectl applied (for a later client-side apply)
    assert obj["metadata"]["annotations"][LAST_APPLIED] == (
        '{"apiVersion":"v1","data":{"greeting":"hi","other":"x"},"kind":"ConfigMap",'
        '"metadata":{"name":"cfg","namespace":"default"}}\n'
    )


def test_kubectl_conflicts_on_fields_changed_since_the_last_client_side_apply(
    sandbox: SandboxHandle,
) -> None:
    """A field another manager changed after the client-side apply is not upgraded."""
    client_side_create(sandbox, greeting="hello", other="x")
    status, _ = http(
        sandbox,
        "PATCH",
        CONFIGMAPS + "/cfg?fieldManager=kubectl-edit",
        {"data": {"other": "edited"}},
        "application/merge-patch+json",
    )
    assert status == 200
    status, answer = server_side_apply(sandbox, "kubectl", config(greeting="hi", other="y"))
    assert status == 409
    assert answer["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-edit" using v1',
            "field": ".data.other",
        }
    ]


def test_kubectl_without_the_annotation_gets_ordinary_conflicts(sandbox: SandboxHandle) -> None:
    """No last-applied annotation (``kubectl create``): nothing to upgrade from."""
    status, _ = http(
        sandbox, "POST", CONFIGMAPS + "?fieldManager=kubectl-create", config(greeting="hello")
    )
    assert status == 201
    status, answer = server_side_apply(sandbox, "kubectl", config(greeting="hi"))
    assert status == 409 and "kubectl-create" in answer["message"]


def test_an_annotation_for_another_api_version_is_not_used(sandbox: SandboxHandle) -> None:
    created = client_side_create(sandbox, greeting="hello")
    annotations = created["metadata"]["annotations"]
    annotations[LAST_APPLIED] = annotations[LAST_APPLIED].replace('"v1"', '"v2"')
    assert (
        http(sandbox, "PUT", CONFIGMAPS + "/cfg?fieldManager=kubectl-client-side-apply", created)[0]
        == 200
    )
    status, _ = server_side_apply(sandbox, "kubectl", config(greeting="hi"))
    assert status == 409


def test_a_write_may_set_managed_fields(sandbox: SandboxHandle) -> None:
    """kubectl's upgrade: one JSON patch moves the client-side fields to ``kubectl`` (Apply).

    Afterwards ``kubectl`` alone owns them, so dropping one from its config deletes it.
    """
    created = client_side_create(sandbox, greeting="hello", other="x")
    entry = created["metadata"]["managedFields"][0]
    upgraded = {**entry, "manager": "kubectl", "operation": "Apply"}
    patch = [
        {"op": "replace", "path": "/metadata/managedFields", "value": [upgraded]},
        {
            "op": "replace",
            "path": "/metadata/resourceVersion",
            "value": created["metadata"]["resourceVersion"],
        },
    ]
    status, obj = http(
        sandbox,
        "PATCH",
        CONFIGMAPS + "/cfg?fieldManager=kubectl",
        patch,
        "application/json-patch+json",
    )
    assert status == 200, obj
    assert [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]] == [
        ("kubectl", "Apply")
    ]
    status, obj = server_side_apply(sandbox, "kubectl", config(greeting="hello"))
    assert status == 200 and obj["data"] == {"greeting": "hello"}
    assert LAST_APPLIED not in (obj["metadata"].get("annotations") or {})
    # the resourceVersion in the patch guards against a lost update: 409 when stale
    status, _ = http(
        sandbox,
        "PATCH",
        CONFIGMAPS + "/cfg",
        patch,
        "application/json-patch+json",
    )
    assert status == 409


@pytest.mark.parametrize(
    "managed",
    [
        [],
        [{"manager": "x", "operation": "Delete", "apiVersion": "v1", "fieldsType": "FieldsV1"}],
        [{"manager": "x", "operation": "Update", "apiVersion": "v1"}],
    ],
)
def test_empty_or_invalid_managed_fields_in_a_write_are_ignored(
    sandbox: SandboxHandle, managed: list[dict[str, Any]]
) -> None:
    """Clients unaware of managedFields cannot wipe them by accident."""
    created = client_side_create(sandbox, greeting="hello")
    created["metadata"]["managedFields"] = managed
    created["data"]["greeting"] = "hi"
    status, obj = http(sandbox, "PUT", CONFIGMAPS + "/cfg?fieldManager=editor", created)
    assert status == 200, obj
    assert set(owners(obj)) == {"kubectl-client-side-apply", "editor"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_apply_then_apply_server_side(sandbox: SandboxHandle, tmp_path: Path) -> None:
    """The whole upgrade with a real kubectl: no conflict, kubectl owns the fields after."""
    assert KUBECTL is not None

    def kubectl(*args: str, manifest: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "cm.yaml"
        path.write_text(manifest)
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(sandbox.kubeconfig), *args, "-f", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    first = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\n"
    created = kubectl("apply", "--validate=false", manifest=first + "data: {a: '1', b: '2'}\n")
    assert created.returncode == 0, created.stderr
    upgraded = kubectl(
        "apply", "--server-side", "--validate=false", manifest=first + "data: {a: '3'}\n"
    )
    assert upgraded.returncode == 0, upgraded.stderr
    status, obj = http(sandbox, "GET", CONFIGMAPS + "/cfg")
    assert status == 200 and obj["data"] == {"a": "3"}
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl-client-side-apply", "Update") not in managers
    assert ("kubectl", "Apply") in managers
