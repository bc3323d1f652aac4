"""``kubectl apply -k`` of ``deploy/`` and of each overlay, against the sandbox.

kubectl itself builds the kustomizations and applies them client-side, as an operator
would (the default ``kubectl apply``: create, then three-way strategic merge patches
on the next apply). The overlays' RBAC, the NetworkPolicy and the
PodDisruptionBudget are checked against the Deployment and the engine's needs.
Skipped where kubectl is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.daemon.migration_steps import DEFAULT_LEDGER_NAMESPACE
from reconciler.sandbox.testing import SandboxHandle
from tests.deploy.kustomize import build
from tests.deploy.test_deploy_manifests import BASE, DEPLOY, NAMESPACE, allowed, one
from tests.deploy.test_deploy_shards import objects as sharded  # noqa: F401 (fixture)
from tests.sandbox.test_kubectl import kubectl

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
OVERLAYS = DEPLOY / "overlays"
WRITE = {"create", "update", "patch", "delete"}


def kustomize(path: str) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    out = subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def apply(sandbox: SandboxHandle, path: str) -> str:
    done = kubectl(sandbox, "apply", "-k", str(DEPLOY / path))
    assert done.returncode == 0, done.stderr
    return done.stdout


def live_rules(sandbox: SandboxHandle) -> list[dict[str, Any]]:
    got = kubectl(sandbox, "get", "clusterrole", "reconciler", "-o", "json")
    assert got.returncode == 0, got.stderr
    rules: list[dict[str, Any]] = json.loads(got.stdout)["rules"]
    return rules


@pytest.mark.slow
@needs_kubectl
def test_kubectl_applies_the_base_and_each_overlay(sandbox: SandboxHandle) -> None:
    out = apply(sandbox, ".")
    assert "deployment.apps/reconciler created" in out
    assert "networkpolicy.networking.k8s.io/reconciler created" in out
    assert "poddisruptionbudget.policy/reconciler created" in out
    base_rules = live_rules(sandbox)
    assert base_rules == one(build(BASE), "ClusterRole")["rules"]
    # an upgrade is the same command again: nothing changes when nothing changed
    assert "deployment.apps/reconciler unchanged" in apply(sandbox, ".")

    # the tenant's namespaces exist before its Roles (the tenant cannot create them)
    # (kubectl applies the other objects before it meets the missing namespace)
    missing = kubectl(sandbox, "apply", "-k", str(OVERLAYS / "tenant"))
    assert missing.returncode != 0 and 'namespaces "team-a" not found' in missing.stderr
    assert "clusterrole.rbac.authorization.k8s.io/reconciler configured" in missing.stdout
    assert kubectl(sandbox, "create", "namespace", "team-a").returncode == 0
    out = apply(sandbox, "overlays/tenant")
    assert "role.rbac.authorization.k8s.io/reconciler-tenant created" in out
    assert live_rules(sandbox) == one(kustomize("overlays/tenant"), "ClusterRole")["rules"]

    out = apply(sandbox, "overlays/platform")
    assert "clusterrolebinding.rbac.authorization.k8s.io/reconciler-cluster-admin created" in out
    assert live_rules(sandbox) == base_rules  # the three-way merge put the base's back

    # shards instead of the leader, as the README says: the Deployment goes first
    gone = kubectl(sandbox, "-n", NAMESPACE, "delete", "deployment", "reconciler")
    assert gone.returncode == 0, gone.stderr
    out = apply(sandbox, "overlays/shards")
    assert "statefulset.apps/reconciler-shards created" in out
    assert "service/reconciler-shards created" in out
    assert "deployment.apps/reconciler" not in out
    got = kubectl(sandbox, "-n", NAMESPACE, "get", "service", "reconciler-shards", "-o", "json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["spec"]["clusterIP"] == "None"


@needs_kubectl
def test_deploy_is_the_base() -> None:
    assert yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"] == ["base"]
    for overlay in ("tenant", "platform", "shards"):
        spec = yaml.safe_load((OVERLAYS / overlay / "kustomization.yaml").read_text())
        assert spec["resources"][0] == "../../base", overlay


def test_the_tenant_reads_and_writes_only_in_its_namespaces() -> None:
    objects = build(OVERLAYS / "tenant")
    # cluster-wide, only which Namespaces exist (names; an instance's missing one is
    # reported): with plain allowedNamespaces the daemon lists every kind per namespace
    cluster_rules = one(objects, "ClusterRole")["rules"]
    assert cluster_rules == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}
    ]
    # every namespaced kind the base may read or write, the tenant may in team-a
    role = one(objects, "Role", "reconciler-tenant")
    assert role["metadata"]["namespace"] == "team-a"
    assert allowed(role["rules"], "", "secrets") == set()
    base_rules = one(build(BASE), "ClusterRole")["rules"]
    for rule in base_rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                if resource == "namespaces":
                    continue
                assert set(rule["verbs"]) <= allowed(role["rules"], group, resource), (
                    group,
                    resource,
                )
    # the global migration ledger lives in the reconciler's own namespace
    # (migration_steps.DEFAULT_LEDGER_NAMESPACE): the base Role lets it be written there
    own = one(objects, "Role", "reconciler-leader-election")
    assert own["metadata"]["namespace"] == NAMESPACE == DEFAULT_LEDGER_NAMESPACE
    assert allowed(own["rules"], "", "configmaps") >= WRITE
    binding = one(objects, "RoleBinding", "reconciler-tenant")
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "reconciler", "namespace": NAMESPACE}
    ]


def test_the_tenant_with_patterns_patches_in_cluster_wide_reads(tmp_path: Path) -> None:
    """``allowedNamespaces: ["team-*"]`` lists across namespaces: the documented swap."""
    tenant = OVERLAYS / "tenant"
    for path in tenant.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    spec = yaml.safe_load((tenant / "kustomization.yaml").read_text())
    assert spec["patches"] == [{"path": "clusterrole-namespaces.yaml"}]
    spec["resources"] = [str(tenant / r) for r in spec["resources"]]
    spec["patches"] = [{"path": "clusterrole-read-cluster-wide.yaml"}]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(spec))
    cluster_rules = one(build(tmp_path), "ClusterRole")["rules"]
    for rule in cluster_rules:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
    assert allowed(cluster_rules, "", "secrets") == set()
    for rule in one(build(BASE), "ClusterRole")["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                reads = set(rule["verbs"]) & {"list", "watch"}
                assert reads <= allowed(cluster_rules, group, resource), (group, resource)


@needs_kubectl
def test_the_platform_overlay_binds_cluster_admin() -> None:
    objects = kustomize("overlays/platform")
    binding = one(objects, "ClusterRoleBinding", "reconciler-cluster-admin")
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "reconciler", "namespace": NAMESPACE}
    ]
    assert one(objects, "ClusterRole")["rules"] == one(build(BASE), "ClusterRole")["rules"]


def test_the_network_policy_opens_the_webhook_port_and_no_probe_port() -> None:
    objects = build(BASE)
    policy = one(objects, "NetworkPolicy")["spec"]
    pod = one(objects, "Deployment")["spec"]["template"]
    assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    named = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    opened = {p["port"] for rule in policy["ingress"] for p in rule["ports"]}
    assert opened == {"webhook", "metrics"} and opened <= named
    # the kubelet's probes come from the node, which NetworkPolicy always allows
    # (https://kubernetes.io/docs/concepts/services-networking/network-policies/)
    assert "probes" not in opened
    for rule in policy["ingress"]:
        if any(p["port"] == "metrics" for p in rule["ports"]):
            assert rule["from"], "metrics must not be open to every namespace"
    egress = {(p["port"], p["protocol"]) for rule in policy["egress"] for p in rule["ports"]}
    assert {(53, "UDP"), (53, "TCP"), (443, "TCP"), (22, "TCP")} <= egress
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}


def test_the_disruption_budget_keeps_a_daemon_pod(
    sharded: list[dict[str, Any]],  # noqa: F811
) -> None:
    for objects, workload in ((build(BASE), "Deployment"), (sharded, "StatefulSet")):
        budget = one(objects, "PodDisruptionBudget")["spec"]
        spec = one(objects, workload)["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert budget["selector"]["matchLabels"].items() <= labels.items()
        assert budget["maxUnavailable"] == 1 < spec["replicas"]


def test_the_readme_walks_through_install_upgrade_overlays_and_alerting() -> None:
    text = (DEPLOY / "README.md").read_text()
    for needle in (
        "## Install",
        "## Upgrade",
        "## Alerting",
        "deploy/monitoring/",
        "overlays/tenant",
        "overlays/platform",
        "--webhook-address",
        "make lock",
        "kubectl -n reconciler-system port-forward deployment/reconciler 8080:8080",
        "http://localhost:8080/ui/",
        "--metrics-address",
        "clusterrole-read-cluster-wide.yaml",
    ):
        assert needle in text, needle
