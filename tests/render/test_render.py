"""Rendering (SPEC section 1): typed placeholders, labels, namespaces, parameter errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import plan_cluster
from reconciler.model.catalog import Catalog
from reconciler.render import render_instance
from tests.factories import write_catalog


def render(catalog: Catalog, instance: str, version: str, cluster: str = "prod") -> Any:
    inst = catalog.clusters[cluster].instances[instance]
    return render_instance(catalog, inst, catalog.apps[inst.app].versions[version])


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return load_catalog(write_catalog(tmp_path))


def test_placeholders_keep_types_and_interpolate(catalog: Catalog) -> None:
    result = render(catalog, "web", "6.5.0")
    assert result.ok
    (deploy,) = result.objects
    assert deploy["spec"]["replicas"] == 5  # an integer, not "5"
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/stefanprodan/podinfo:6.5.0"
    assert container["env"][0]["value"] == "hello from podinfo 6.5.0"
    assert deploy["metadata"]["name"] == "web"


def test_recommended_labels_and_namespace_default(catalog: Catalog) -> None:
    result = render(catalog, "api", "6.6.0")
    for obj in result.objects:
        assert obj["metadata"]["namespace"] == "team-api"
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "reconciler",
            "app.kubernetes.io/instance": "api",
            "app.kubernetes.io/name": "podinfo",
            "app.kubernetes.io/version": "6.6.0",
        }


def test_escape_and_apply_order(catalog: Catalog) -> None:
    result = render(catalog, "api", "6.6.0")
    kinds = [o["kind"] for o in result.objects]
    assert kinds == ["ConfigMap", "Deployment"]  # ConfigMap first: the Deployment may mount it
    assert result.objects[0]["data"] == {"message": "hello", "script": "echo ${HOME}"}


def test_render_does_not_mutate_templates(catalog: Catalog) -> None:
    version = catalog.apps["podinfo"].versions["6.5.0"]
    before = repr(version.templates)
    render(catalog, "web", "6.5.0")
    render(catalog, "api", "6.5.0")
    assert repr(version.templates) == before


def test_whole_value_placeholders_keep_structured_types(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/version.yaml": """\
            apiVersion: reconciler/v1
            kind: AppVersion
            app: podinfo
            version: 6.5.0
            images: {podinfo: "ghcr.io/stefanprodan/podinfo:6.5.0"}
            parameters:
              replicas: {default: 2}
              message: {default: hello}
              resources: {default: {limits: {cpu: 500m}}}
              debug: {default: false}
              ports: {default: [80, 443]}
            """,
            "apps/podinfo/versions/6.5.0/manifests/deployment.yaml": """\
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: "${instance.name}"}
            data:
              debug: "${params.debug}"
              ports: "ports=${params.ports}"
            extra:
              resources: ${params.resources}
              debug: ${params.debug}
            """,
        },
    )
    catalog = load_catalog(root)
    (obj,) = render(catalog, "web", "6.5.0").objects
    assert obj["extra"] == {"resources": {"limits": {"cpu": "500m"}}, "debug": False}
    # ConfigMap data is map[string]string in the API: typed values are written as text
    assert obj["data"] == {"debug": "false", "ports": "ports=[80, 443]"}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            "{replica: 3}",
            'clusters/prod/instances/web.yaml:7: unknown parameter "replica" for podinfo 6.5.0 (known: message, replicas)',
        ),
        (
            "{replicas: three}",
            'clusters/prod/instances/web.yaml:7: parameter "replicas" must be a number like its default 2, got "three"',
        ),
    ],
)
def test_bad_instance_parameters(tmp_path: Path, params: str, expected: str) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": f"""\
            apiVersion: reconciler/v1
            kind: Instance
            name: web
            app: podinfo
            channel: stable
            namespace: web
            parameters: {params}
            """
        },
    )
    catalog = load_catalog(root)
    result = render(catalog, "web", "6.5.0")
    assert not result.ok
    assert [str(p) for p in result.problems] == [expected]
    # the plan names the reason and the other instance still renders
    plans = {p.name: p for p in plan_cluster(catalog, "prod")}
    assert plans["web"].reason == "CatalogInvalid" and plans["web"].objects == ()
    assert plans["api"].ok and plans["api"].objects


def test_required_parameter_without_value(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    path = root / "apps/podinfo/versions/6.5.0/version.yaml"
    path.write_text(
        path.read_text().replace(
            "message: {default: hello}", 'message: {required: true, description: "banner text"}'
        )
    )
    catalog = load_catalog(root)
    problems = [str(p) for p in render(catalog, "web", "6.5.0").problems]
    assert problems == [
        'clusters/prod/instances/web.yaml:7: parameter "message" is required by podinfo 6.5.0 (banner text)'
    ]


def test_cluster_limits_refuse_namespaces_and_cluster_scoped(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": """\
            apiVersion: reconciler/v1
            kind: Instance
            name: web
            app: podinfo
            channel: stable
            namespace: ops
            """,
            "apps/podinfo/versions/6.5.0/manifests/ns.yaml": """\
            apiVersion: v1
            kind: Namespace
            metadata: {name: "${instance.namespace}"}
            """,
        },
    )
    catalog = load_catalog(root)
    problems = [str(p) for p in render(catalog, "web", "6.5.0").problems]
    assert problems == [
        "clusters/prod/instances/web.yaml:4: Namespace/ops: cluster-scoped objects are not allowed in cluster prod (allowClusterScoped: false)",
        'clusters/prod/instances/web.yaml:6: Deployment/ops/web: namespace "ops" is not allowed in cluster prod (allowedNamespaces: web, team-*)',
    ]


def test_crd_scope_decides_namespace_defaulting(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/cluster.yaml": None,
            "apps/podinfo/versions/6.5.0/manifests/crd.yaml": """\
            apiVersion: apiextensions.k8s.io/v1
            kind: CustomResourceDefinition
            metadata: {name: widgets.example.com}
            spec:
              group: example.com
              scope: Cluster
              names: {kind: Widget, plural: widgets}
              versions: [{name: v1, served: true, storage: true}]
            ---
            apiVersion: example.com/v1
            kind: Widget
            metadata: {name: global}
            ---
            apiVersion: example.com/v1
            kind: Gadget
            metadata: {name: local}
            """,
        },
    )
    catalog = load_catalog(root)
    objects = {o["kind"]: o for o in render(catalog, "web", "6.5.0").objects}
    assert next(iter(objects)) == "CustomResourceDefinition"
    assert "namespace" not in objects["Widget"]["metadata"]
    assert "namespace" not in objects["CustomResourceDefinition"]["metadata"]
    assert objects["Gadget"]["metadata"]["namespace"] == "web"


def test_duplicate_objects_are_refused(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/manifests/again.yaml": """\
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: "${instance.name}"}
            """
        },
    )
    catalog = load_catalog(root)
    problems = [str(p) for p in render(catalog, "web", "6.5.0").problems]
    assert problems == [
        "clusters/prod/instances/web.yaml: Deployment/web/web is rendered twice; object names must be unique"
    ]


def test_string_typed_api_fields_get_strings(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/manifests/deployment.yaml": """\
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: ${instance.name}
              annotations: {replicas: "${params.replicas}"}
            spec:
              replicas: ${params.replicas}
              template:
                metadata:
                  labels: {tier: "${params.replicas}"}
                spec:
                  containers:
                    - name: podinfo
                      image: ${images.podinfo}
                      args: ["--replicas", "${params.replicas}"]
                      env:
                        - {name: REPLICAS, value: "${params.replicas}"}
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: "${instance.name}-settings"}
            data: {replicas: "${params.replicas}"}
            """
        },
    )
    catalog = load_catalog(root)
    deploy, cm = sorted(render(catalog, "web", "6.5.0").objects, key=lambda o: o["kind"])[::-1]
    assert deploy["spec"]["replicas"] == 5  # an integer field stays an integer
    assert deploy["metadata"]["annotations"] == {"replicas": "5"}
    template = deploy["spec"]["template"]
    assert template["metadata"]["labels"] == {"tier": "5"}
    container = template["spec"]["containers"][0]
    assert container["args"] == ["--replicas", "5"]
    assert container["env"] == [{"name": "REPLICAS", "value": "5"}]
    assert cm["data"] == {"replicas": "5"}
