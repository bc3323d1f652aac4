"""Discovery contract: https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import http

REQUIRED = {
    ("v1", "Namespace", False),
    ("v1", "ConfigMap", True),
    ("v1", "Secret", True),
    ("v1", "Service", True),
    ("v1", "ServiceAccount", True),
    ("v1", "Pod", True),
    ("v1", "Event", True),
    ("v1", "PersistentVolumeClaim", True),
    ("apps/v1", "Deployment", True),
    ("apps/v1", "StatefulSet", True),
    ("apps/v1", "DaemonSet", True),
    ("apps/v1", "ReplicaSet", True),
    ("batch/v1", "Job", True),
    ("batch/v1", "CronJob", True),
    ("networking.k8s.io/v1", "Ingress", True),
    ("networking.k8s.io/v1", "NetworkPolicy", True),
    ("rbac.authorization.k8s.io/v1", "Role", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", False),
    ("coordination.k8s.io/v1", "Lease", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", False),
    ("policy/v1", "PodDisruptionBudget", True),
    ("autoscaling/v2", "HorizontalPodAutoscaler", True),
    ("v1", "ReplicationController", True),
    ("v1", "Endpoints", True),
    ("discovery.k8s.io/v1", "EndpointSlice", True),
    ("v1", "ResourceQuota", True),
    ("v1", "LimitRange", True),
    ("scheduling.k8s.io/v1", "PriorityClass", False),
    ("apiregistration.k8s.io/v1", "APIService", False),
}

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wd"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
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


def test_version_and_core_discovery(sandbox: SandboxHandle) -> None:
    """/version and /api (APIVersions) as kubectl reads them first."""
    status, version = http(sandbox, "GET", "/version")
    assert status == 200 and version["major"] == "1" and version["gitVersion"].startswith("v1.")
    status, api = http(sandbox, "GET", "/api")
    assert status == 200 and api["kind"] == "APIVersions" and api["versions"] == ["v1"]


def test_every_required_kind_is_discoverable(sandbox: SandboxHandle) -> None:
    """Every built-in kind appears in its group/version APIResourceList with verbs and scope."""
    _, groups = http(sandbox, "GET", "/apis")
    assert groups["kind"] == "APIGroupList"
    group_versions = ["v1"] + [v["groupVersion"] for g in groups["groups"] for v in g["versions"]]
    found = set()
    for gv in group_versions:
        prefix = "/api/" if gv == "v1" else "/apis/"
        status, listing = http(sandbox, "GET", prefix + gv)
        assert status == 200 and listing["kind"] == "APIResourceList"
        for res in listing["resources"]:
            if res["name"].endswith("reviews"):
                # answered, never stored: create only, as on a real server
                assert res["verbs"] == ["create"]
            elif gv == "metrics.k8s.io/v1beta1":  # metrics-server's API is read-only
                assert res["verbs"] == ["get", "list"]
            elif "/" not in res["name"]:
                assert "watch" in res["verbs"] and "patch" in res["verbs"]
                found.add((gv, res["kind"], res["namespaced"]))
    assert found >= REQUIRED


def test_subresources_and_short_names_are_listed(sandbox: SandboxHandle) -> None:
    _, listing = http(sandbox, "GET", "/apis/apps/v1")
    by_name = {r["name"]: r for r in listing["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert by_name["deployments/status"]["kind"] == "Deployment"
    assert by_name["deployments/scale"]["kind"] == "Scale"
    assert "daemonsets/scale" not in by_name


def test_preferred_version_and_group(sandbox: SandboxHandle) -> None:
    status, group = http(sandbox, "GET", "/apis/autoscaling")
    assert status == 200 and group["preferredVersion"]["version"] == "v2"
    assert http(sandbox, "GET", "/apis/nope.example.com")[0] == 404
    assert http(sandbox, "GET", "/apis/apps/v9")[0] == 404


def test_crd_registers_kind_in_discovery_and_serves_crud(
    sandbox: SandboxHandle, api_client: client.ApiClient
) -> None:
    """A CRD's kind is served at once (custom-resource-definitions task page)."""
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(WIDGET_CRD)
    _, listing = http(sandbox, "GET", "/apis/example.com/v1")
    assert {r["name"] for r in listing["resources"]} == {"widgets", "widgets/status"}
    dyn = DynamicClient(api_client)
    widgets = dyn.resources.get(api_version="example.com/v1", kind="Widget")
    assert widgets.namespaced
    widgets.create(
        body={
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w1"},
            "spec": {"size": 3},
        },
        namespace="default",
    )
    assert widgets.get(name="w1", namespace="default").spec.size == 3
    widgets.patch(
        name="w1",
        namespace="default",
        body={"spec": {"size": 4}},
        content_type="application/merge-patch+json",
    )
    assert [w.spec.size for w in widgets.get(namespace="default").items] == [4]
    widgets.delete(name="w1", namespace="default")
    assert widgets.get(namespace="default").items == []


def test_cluster_scoped_crd_and_deletion_unregisters(
    sandbox: SandboxHandle, api_client: client.ApiClient
) -> None:
    crd = {
        **WIDGET_CRD,
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            **WIDGET_CRD["spec"],
            "scope": "Cluster",
            "names": {"plural": "gadgets", "kind": "Gadget"},
        },
    }
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(crd)
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(
        "example.com",
        "v1",
        "gadgets",
        {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}},
    )
    _, listing = http(sandbox, "GET", "/apis/example.com/v1")
    assert listing["resources"][0]["namespaced"] is False
    ext.delete_custom_resource_definition("gadgets.example.com")
    assert http(sandbox, "GET", "/apis/example.com/v1")[0] == 404
    assert http(sandbox, "GET", "/apis/example.com/v1/gadgets")[0] == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metadata": {"name": "wrong.example.com"}}, "metadata.name"),
        ({"spec": {**WIDGET_CRD["spec"], "scope": "Galaxy"}}, "spec.scope"),
        ({"spec": {**WIDGET_CRD["spec"], "versions": []}}, "spec.versions"),
        ({"spec": {**WIDGET_CRD["spec"], "group": ""}}, "spec.group"),
    ],
)
def test_invalid_crd_is_rejected(sandbox: SandboxHandle, change: dict, field: str) -> None:
    status, body = http(
        sandbox,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        {**WIDGET_CRD, **change},
    )
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == field
