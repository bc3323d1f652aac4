"""OpenAPI v3 as kubectl reads it before ``kubectl apply``.

https://kubernetes.io/docs/concepts/overview/kubernetes-api/#openapi-v3: ``/openapi/v3``
lists each group/version's document by ``serverRelativeURL``; a PATCH operation that
declares the ``fieldValidation`` query parameter tells kubectl the server validates
fields itself (https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).
Custom resources accept no strategic merge patch, so their documents do not offer it.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import http
from tests.sandbox.test_discovery import WIDGET_CRD


def patch_of(document: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    found = [
        (path, ops["patch"])
        for path, ops in document["paths"].items()
        if ops["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind
    ]
    assert len(found) == 1, kind
    return found[0]


def test_the_index_points_at_each_group_versions_document(sandbox: SandboxHandle) -> None:
    status, index = http(sandbox, "GET", "/openapi/v3")
    assert status == 200
    assert {"api/v1", "apis/apps/v1", "apis/policy/v1"} <= set(index["paths"])
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    status, document = http(sandbox, "GET", url)
    assert status == 200 and document["openapi"].startswith("3.")
    path, patch = patch_of(document, "Deployment")
    assert path == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    params = {(p["name"], p["in"]) for p in patch["parameters"]}
    assert ("fieldValidation", "query") in params
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]


def test_core_and_cluster_scoped_paths(sandbox: SandboxHandle) -> None:
    _, document = http(sandbox, "GET", "/openapi/v3/api/v1")
    assert patch_of(document, "Namespace")[0] == "/api/v1/namespaces/{name}"
    assert patch_of(document, "ConfigMap")[0] == "/api/v1/namespaces/{namespace}/configmaps/{name}"
    assert http(sandbox, "GET", "/openapi/v3/apis/nothing.example.com/v1")[0] == 404


def test_custom_resources_appear_without_strategic_merge(sandbox: SandboxHandle) -> None:
    assert http(sandbox, "GET", "/openapi/v3/apis/example.com/v1")[0] == 404
    assert (
        http(
            sandbox, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGET_CRD
        )[0]
        == 201
    )
    _, index = http(sandbox, "GET", "/openapi/v3")
    status, document = http(
        sandbox, "GET", index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    )
    assert status == 200
    content = patch_of(document, "Widget")[1]["requestBody"]["content"]
    assert "application/merge-patch+json" in content
    assert "application/strategic-merge-patch+json" not in content
