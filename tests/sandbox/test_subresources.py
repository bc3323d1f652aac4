"""/status and /scale subresources.

https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#subresources
(status writes change only status, main writes never change status) and
https://kubernetes.io/docs/reference/kubernetes-api/autoscaling/scale-v1/.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http

BASE = "/apis/apps/v1/namespaces/default/deployments/web"


def test_status_write_does_not_change_spec(sandbox: SandboxHandle) -> None:
    http(
        sandbox,
        "POST",
        "/api/v1/namespaces/default/pods",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    status, pod = http(
        sandbox,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        {"spec": {"containers": [{"name": "c", "image": "changed"}]}, "status": {"message": "hi"}},
        "application/merge-patch+json",
    )
    assert status == 200 and pod["status"]["message"] == "hi"
    assert pod["spec"]["containers"][0]["image"] == "x"
    assert pod["metadata"]["generation"] == 1


def test_main_write_does_not_change_status(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment("default", deployment("web"))
    apps.patch_namespaced_deployment_status("web", "default", {"status": {"replicas": 42}})
    before = apps.read_namespaced_deployment("web", "default")
    apps.patch_namespaced_deployment(
        "web", "default", {"status": {"replicas": 7}, "spec": {"replicas": 3}}
    )
    after = apps.read_namespaced_deployment("web", "default")
    assert after.spec.replicas == 3
    assert after.status.observed_generation != 7
    assert after.status.replicas != 7  # 42 until the simulated controller writes its own count
    assert before.metadata.generation == 1 and after.metadata.generation == 2


def test_status_write_keeps_generation(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment("default", deployment("web"))
    dep = apps.patch_namespaced_deployment_status(
        "web", "default", {"status": {"observedGeneration": 1}}
    )
    assert dep.metadata.generation == 1


def test_scale_subresource(sandbox: SandboxHandle, apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment("default", deployment("web", replicas=2))
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert scale.spec.replicas == 2 and scale.status.selector == "app=web"
    apps.replace_namespaced_deployment_scale(
        "web", "default", {"metadata": {"name": "web"}, "spec": {"replicas": 4}}
    )
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 4
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 1}})
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 1
    status, _ = http(sandbox, "PUT", BASE + "/scale", {"spec": {"replicas": -1}})
    assert status == 422
    status, _ = http(
        sandbox,
        "PATCH",
        BASE + "/scale?fieldManager=x",
        {"spec": {}},
        "application/apply-patch+yaml",
    )
    assert status == 415


def test_subresources_of_missing_objects_and_kinds(sandbox: SandboxHandle) -> None:
    assert http(sandbox, "GET", BASE + "/scale")[0] == 404
    assert http(sandbox, "GET", "/apis/apps/v1/namespaces/default/daemonsets/x/scale")[0] == 404
    assert http(sandbox, "GET", "/api/v1/namespaces/default/configmaps/x/status")[0] == 404


def test_crd_scale_paths(api_client: client.ApiClient, sandbox: SandboxHandle) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "pools", "kind": "Pool"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    # apiextensions.k8s.io/v1 requires a schema per version
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {
                                        "size": {"type": "integer"},
                                        "selector": {"type": "string"},
                                    },
                                },
                            },
                        }
                    },
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.size",
                            "statusReplicasPath": ".status.size",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                }
            ],
        },
    }
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
    custom = client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "pools",
        {
            "apiVersion": "example.com/v1",
            "kind": "Pool",
            "metadata": {"name": "p"},
            "spec": {"size": 2},
        },
    )
    path = "/apis/example.com/v1/namespaces/default/pools/p"
    status, scale = http(sandbox, "GET", path + "/scale")
    assert status == 200 and scale["spec"]["replicas"] == 2
    http(sandbox, "PUT", path + "/scale", {"spec": {"replicas": 5}})
    assert (
        custom.get_namespaced_custom_object("example.com", "v1", "default", "pools", "p")["spec"][
            "size"
        ]
        == 5
    )
    custom.patch_namespaced_custom_object_status(
        "example.com", "v1", "default", "pools", "p", {"status": {"size": 5}}
    )
    with pytest.raises(ApiException):
        custom.get_namespaced_custom_object_status("example.com", "v1", "default", "pools", "x")
