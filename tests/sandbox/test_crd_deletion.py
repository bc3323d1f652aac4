"""Deleting a CRD waits for its custom resources, finalizers and all.

https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#delete-a-customresourcedefinition:
"When you delete a CustomResourceDefinition, the server will uninstall the RESTful API
endpoint and delete all custom objects stored in it"; the CRD holds the
``customresourcecleanup.apiextensions.k8s.io`` finalizer and says ``Terminating`` until
they are gone (a custom resource's own finalizers hold it, and so the CRD:
https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/).
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http
from tests.sandbox.test_discovery import WIDGET_CRD

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, **meta}}


def create_crd(sandbox: SandboxHandle) -> None:
    status, body = http(sandbox, "POST", CRDS, WIDGET_CRD)
    assert status == 201, body


def create_held_widget(sandbox: SandboxHandle) -> None:
    """The CRD and a custom resource a finalizer holds."""
    create_crd(sandbox)
    assert http(sandbox, "POST", WIDGETS, widget("held", finalizers=["example.com/hold"]))[0] == 201


def terminating(sandbox: SandboxHandle) -> dict[str, Any]:
    status, crd = http(sandbox, "GET", CRD)
    assert status == 200, crd
    (condition,) = [c for c in crd["status"]["conditions"] if c["type"] == "Terminating"]
    return dict(condition)


def test_a_crd_stays_terminating_until_its_last_custom_resource_is_finalized(
    sandbox: SandboxHandle,
) -> None:
    create_crd(sandbox)
    assert http(sandbox, "POST", WIDGETS, widget("free"))[0] == 201
    assert http(sandbox, "POST", WIDGETS, widget("held", finalizers=["example.com/hold"]))[0] == 201

    status, body = http(sandbox, "DELETE", CRD)
    assert status == 200, body
    assert body["metadata"]["deletionTimestamp"]
    assert "customresourcecleanup.apiextensions.k8s.io" in body["metadata"]["finalizers"]

    # the free one goes; the held one is marked and keeps the CRD (and its API) alive
    eventually(lambda: http(sandbox, "GET", f"{WIDGETS}/free")[0] == 404)
    held = http(sandbox, "GET", f"{WIDGETS}/held")[1]
    assert held["metadata"]["deletionTimestamp"]
    condition = terminating(sandbox)
    assert condition["status"] == "True"
    assert condition["reason"] == "InstanceDeletionInProgress"

    # no new custom resources while it terminates
    status, refused = http(sandbox, "POST", WIDGETS, widget("late"))
    assert status == 405
    assert refused["reason"] == "MethodNotAllowed"
    assert (
        refused["message"] == "create not allowed while custom resource definition is terminating"
    )

    # the last finalizer gone: the custom resource, then the CRD and its API
    patch = {"metadata": {"finalizers": None}}
    status, _ = http(
        sandbox, "PATCH", f"{WIDGETS}/held", patch, content_type="application/merge-patch+json"
    )
    assert status == 200
    eventually(lambda: http(sandbox, "GET", CRD)[0] == 404)
    assert http(sandbox, "GET", WIDGETS)[0] == 404


def test_a_crd_without_custom_resources_is_gone_at_once(sandbox: SandboxHandle) -> None:
    create_crd(sandbox)
    assert http(sandbox, "DELETE", CRD)[0] == 200
    eventually(lambda: http(sandbox, "GET", CRD)[0] == 404)


def test_a_write_to_a_terminating_crd_keeps_its_terminating_condition(
    sandbox: SandboxHandle,
) -> None:
    create_held_widget(sandbox)
    assert http(sandbox, "DELETE", CRD)[0] == 200
    patch = {"metadata": {"labels": {"touched": "yes"}}}
    status, body = http(sandbox, "PATCH", CRD, patch, content_type="application/merge-patch+json")
    assert status == 200, body
    assert terminating(sandbox)["status"] == "True"
