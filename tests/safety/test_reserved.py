"""Issue 8: one instance cannot forge another's inventory or use reconciler's labels.

A manifest carrying the inventory labels and ``data.instance: partner-api,
version: 99.0.0`` froze partner-api in ``DowngradeBlocked``. Now the names
``reconciler-inventory-*``/``reconciler-migrations-*`` and labels
``reconciler.dev/*`` are validation errors, and an inventory is trusted only at
its own name in the instance's namespace (a forged one created by other means,
e.g. kubectl, is ignored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import plan_cluster
from reconciler.kube import KubeClient
from reconciler.kube.inventory import (
    CLUSTER_LABEL,
    INSTANCE_LABEL,
    INVENTORY_LABEL,
    MANAGED_BY,
    read_deployed_versions,
)
from tests.daemon.conftest import World
from tests.factories import write_catalog


def forged_inventory(name: str, namespace: str, instance: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                MANAGED_BY: "reconciler",
                INSTANCE_LABEL: instance,
                INVENTORY_LABEL: "true",
                CLUSTER_LABEL: "prod",
            },
        },
        "data": {
            "cluster": "prod",
            "instance": instance,
            "app": "podinfo",
            "version": "99.0.0",
            "objects": "[]",
        },
    }


@pytest.mark.parametrize(
    ("name", "labels", "needle"),
    [
        ("reconciler-inventory-web", {}, 'names starting with "reconciler-inventory-"'),
        # the perNamespace layout's shared inventory of cluster prod
        ("reconciler-inventory-prod.shared", {}, 'names starting with "reconciler-inventory-"'),
        ("reconciler-migrations-web", {}, 'names starting with "reconciler-migrations-"'),
        ("innocent", {"reconciler.dev/inventory": "true"}, 'label "reconciler.dev/inventory"'),
    ],
)
def test_reserved_names_and_labels_are_validation_errors(
    tmp_path: Path, name: str, labels: dict[str, str], needle: str
) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"instance": "web", "version": "99.0.0"},
    }
    root = write_catalog(
        tmp_path, {"apps/podinfo/versions/6.6.0/manifests/forge.yaml": json.dumps(manifest)}
    )
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["api"].reason == "CatalogInvalid"
    assert needle in plans["api"].message
    assert "apps/podinfo/versions/6.6.0/manifests/forge.yaml" in plans["api"].message


@pytest.mark.parametrize(
    ("kind", "api_version", "name", "who"),
    [
        ("ClusterRole", "rbac.authorization.k8s.io/v1", "view", "default RBAC policy"),
        ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "system:basic-user", "RBAC"),
        ("ConfigMap", "v1", "kube-root-ca.crt", "root CA publisher"),
        ("Namespace", "v1", "kube-system", "the API server"),
        ("Endpoints", "v1", "kubernetes", "the API server"),
        ("EndpointSlice", "discovery.k8s.io/v1", "kubernetes", "the API server"),
        ("PriorityClass", "scheduling.k8s.io/v1", "system-node-critical", "the API server"),
    ],
)
def test_objects_the_cluster_keeps_are_validation_errors(
    tmp_path: Path, kind: str, api_version: str, name: str, who: str
) -> None:
    """An instance that rendered ClusterRole ``view`` (or ``kube-root-ca.crt``) would own
    it and delete it on uninstall; on a real cluster ``view`` then stays gone until the
    API server restarts.
    https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings,
    https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/ (the API
    server's own), https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
    (``system-`` classes are the cluster's).
    """
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
    root = write_catalog(
        tmp_path, {"apps/podinfo/versions/6.6.0/manifests/system.yaml": json.dumps(manifest)}
    )
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["api"].reason == "CatalogInvalid"
    assert who in plans["api"].message and "must not render it" in plans["api"].message
    assert "apps/podinfo/versions/6.6.0/manifests/system.yaml" in plans["api"].message
    assert plans["web"].reason != "CatalogInvalid"  # web runs 6.5.0: untouched


def test_an_inventory_counts_only_under_its_name_in_its_namespace(sandbox: Any) -> None:
    with KubeClient.connect(sandbox.kubeconfig) as client:
        for ns in ("web", "zz-evil"):
            client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        client.apply(forged_inventory("lookalike", "web"))  # wrong name
        client.apply(forged_inventory("reconciler-inventory-web", "zz-evil"))  # wrong ns
        catalog = load_catalog(write_catalog(Path(sandbox.kubeconfig).parent / "cat"))
        instances = list(catalog.clusters["prod"].instances.values())
        assert read_deployed_versions(client, "prod", instances) == {}


def test_forged_inventory_does_not_freeze_another_instance(world: World) -> None:
    assert world.daemon.run_pass().ok
    world.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "zz-evil"}})
    world.client.apply(forged_inventory("reconciler-inventory-web", "zz-evil"))
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    web = next(s for s in outcome.report.statuses if s.instance == "web")
    assert str(web.phase) == "Ready", web.message
    assert web.version == "6.5.0"


def test_a_slice_the_endpointslice_controller_keeps_is_a_validation_error(
    tmp_path: Path,
) -> None:
    """The controller rewrites (and deletes) the slices labelled as its own
    (https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#management):
    a manifest must leave them to it."""
    manifest = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abcde",
            "labels": {"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
        },
        "addressType": "IPv4",
        "endpoints": [],
    }
    root = write_catalog(
        tmp_path, {"apps/podinfo/versions/6.6.0/manifests/slice.yaml": json.dumps(manifest)}
    )
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["api"].reason == "CatalogInvalid"
    assert "the EndpointSlice controller keeps this object" in plans["api"].message
