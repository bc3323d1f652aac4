"""``deploy/components/shards/``: the sharded variant, as its README says to use it.

``deploy/overlays/shards/`` (the base plus the component, which swaps the base's
Deployment for the StatefulSet and its headless Service) is built, checked against
the real command-line parser, and applied to the sandbox.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient

from reconciler.cli import build_parser
from reconciler.commands.daemon import settings_from_args
from tests.deploy.kustomize import build
from tests.deploy.test_deploy_manifests import BASE, DEPLOY, NAMESPACE, VAR, allowed, one

COMPONENT = DEPLOY / "components" / "shards"
OVERLAY = DEPLOY / "overlays" / "shards"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return build(OVERLAY)


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [c] = one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    return c


def expanded_args(objects: list[dict[str, Any]]) -> list[str]:
    settings = one(objects, "ConfigMap", "reconciler-settings")["data"]
    values: dict[str, str] = {}
    for e in container(objects)["env"]:
        source = e.get("valueFrom") or {}
        if "value" in e:
            values[e["name"]] = e["value"]
        elif "configMapKeyRef" in source:
            values[e["name"]] = settings[source["configMapKeyRef"]["key"]]
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            values[e["name"]] = {"metadata.namespace": NAMESPACE}.get(path, "reconciler-shards-1")
    return [VAR.sub(lambda m: values[m.group(1)], a) for a in container(objects)["args"]]


def test_the_variant_replaces_the_deployment_by_a_statefulset(
    objects: list[dict[str, Any]],
) -> None:
    assert not [o for o in objects if o["kind"] == "Deployment"]
    spec = one(objects, "StatefulSet")["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["template"]["spec"]["serviceAccountName"] == "reconciler"
    service = one(objects, "Service", "reconciler")["spec"]
    assert service["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    base = {(o["kind"], o["metadata"]["name"]) for o in build(BASE)}
    ours = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ours == base - {("Deployment", "reconciler")} | {
        ("StatefulSet", "reconciler-shards"),
        ("Service", "reconciler-shards"),
        ("Role", "reconciler-shards"),
        ("RoleBinding", "reconciler-shards"),
    }
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "reconciler"
        if obj["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"]["namespace"] == NAMESPACE


def test_the_statefulset_is_governed_by_a_headless_service(
    objects: list[dict[str, Any]],
) -> None:
    sts = one(objects, "StatefulSet")["spec"]
    governing = one(objects, "Service", sts["serviceName"])
    assert governing["metadata"]["name"] != "reconciler"  # the base's balances webhooks
    assert governing["spec"]["clusterIP"] == "None"
    labels = sts["template"]["metadata"]["labels"]
    assert governing["spec"]["selector"].items() <= labels.items()
    # the ServiceMonitor selects app.kubernetes.io/name: reconciler: the headless
    # Service must not match it, or every pod would be scraped twice
    monitor = yaml.safe_load((DEPLOY / "monitoring" / "servicemonitor.yaml").read_text())
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= governing["metadata"]["labels"].items()
    assert selector.items() <= one(objects, "Service", "reconciler")["metadata"]["labels"].items()


def test_the_component_composes_with_another_overlay(tmp_path: Path) -> None:
    """The tenant's RBAC with shards: an overlay of the operator's own lists both."""
    overlay = tmp_path / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [str(DEPLOY / "overlays" / "tenant")],
                "components": [str(COMPONENT)],
            }
        )
    )
    objects = build(overlay)
    assert one(objects, "StatefulSet")["metadata"]["name"] == "reconciler-shards"
    assert not [o for o in objects if o["kind"] == "Deployment"]
    assert one(objects, "Role", "reconciler-tenant")["metadata"]["namespace"] == "team-a"


def test_the_arguments_shard_by_pod_name_and_match_the_replicas(
    objects: list[dict[str, Any]],
) -> None:
    args = build_parser().parse_args(expanded_args(objects))
    assert args.command == "run" and not args.leader_elect and not args.once
    assert args.shards == one(objects, "StatefulSet")["spec"]["replicas"] == 3
    assert args.identity == "reconciler-shards-1"  # the pod's stable name
    assert args.leader_elect_namespace == NAMESPACE
    settings = settings_from_args(args)
    assert (settings.shards, settings.identity) == (3, "reconciler-shards-1")
    pod = one(objects, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= args.health_timeout + 20


def test_rbac_lets_shards_find_each_other(objects: list[dict[str, Any]]) -> None:
    rules = [rule for role in objects if role["kind"] == "Role" for rule in role["rules"]]
    assert allowed(rules, "coordination.k8s.io", "leases") == {
        "get",
        "create",
        "update",
        "list",
        "delete",  # delete: presence Leases of gone replicas
    }
    binding = one(objects, "RoleBinding", "reconciler-shards")
    assert binding["roleRef"]["name"] == "reconciler-shards"
    assert binding["subjects"][0]["name"] == "reconciler"


def test_the_variant_applies_to_a_cluster(objects: list[dict[str, Any]], sandbox: Any) -> None:
    api = k8s_config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    with api:
        dynamic = DynamicClient(api)
        for obj in objects:
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            dynamic.server_side_apply(
                resource,
                body=obj,
                namespace=obj["metadata"].get("namespace"),
                field_manager="deploy-test",
                force_conflicts=True,
            )
        sts = dynamic.get(
            dynamic.resources.get(api_version="apps/v1", kind="StatefulSet"),
            name="reconciler-shards",
            namespace=NAMESPACE,
        )
        assert sts.spec.replicas == 3


def test_the_readme_explains_the_variant() -> None:
    text = (DEPLOY / "README.md").read_text()
    for needle in (
        "components/shards",
        "overlays/shards",
        "--shards",
        "reconciler_shards_held",
        "delete deployment reconciler",
        "clusterIP: None",
    ):
        assert needle in text, needle


def test_the_variant_is_a_component_and_not_in_the_base() -> None:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    assert not [r for r in listed if "shards" in r]
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert set(component["resources"]) == {"statefulset-shards.yaml", "service-headless.yaml"}
    overlay = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert overlay["resources"] == ["../../base"]
    assert overlay["components"] == ["../../components/shards"]
