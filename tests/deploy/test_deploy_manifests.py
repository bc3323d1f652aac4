"""``deploy/`` installs reconciler the way its README says, safely and with enough RBAC.

The Kustomize base is built without kubectl (``tests/deploy/kustomize.py``),
applied to the sandbox with server-side apply through the official
DynamicClient, and read back. Its security settings, probes and arguments are
checked from the YAML, the arguments against the real command-line parser, and
its RBAC against every kind the example catalog renders, as found by discovery.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient

from reconciler.catalog import load_catalog
from reconciler.cli import build_parser
from reconciler.daemon.plan import plan_cluster
from reconciler.kube import KubeClient
from tests.conftest import REPO_ROOT, TEMPLATE
from tests.deploy.kustomize import build

DEPLOY = REPO_ROOT / "deploy"
BASE = DEPLOY / "base"  # `kubectl apply -k deploy/` applies exactly this
NAMESPACE = "reconciler-system"
ALL_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return build(BASE)


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [c] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


# -- the base builds and installs ------------------------------------------------------


def test_every_object_is_in_the_namespace_and_labelled(objects: list[dict[str, Any]]) -> None:
    kinds = [o["kind"] for o in objects]
    assert kinds[0] == "Namespace"  # applied first, like kubectl apply -k
    assert set(kinds) >= {
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Service",
        "Deployment",
    }
    assert "Secret" not in kinds  # secret-example.yaml is not a resource
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "reconciler"
        if obj["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]


KUSTOMIZATIONS = (".", "overlays/tenant", "overlays/platform", "overlays/shards")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_the_reader_agrees_with_kubectl_kustomize(path: str) -> None:
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / path)], capture_output=True, text=True, check=True
    ).stdout
    theirs = [doc for doc in yaml.safe_load_all(out) if doc]

    def key(o: dict[str, Any]) -> tuple[str, str, str]:
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    assert sorted(theirs, key=key) == sorted(build(DEPLOY / path), key=key)


def test_every_kustomization_is_checked_against_kubectl() -> None:
    found = {
        p.parent.relative_to(DEPLOY).as_posix()
        for p in DEPLOY.rglob("kustomization.yaml")
        if yaml.safe_load(p.read_text()).get("kind", "Kustomization") == "Kustomization"
    }
    # base/ and monitoring/ are built on their own by the tests of their objects
    assert found - {"base", "monitoring"} == set(KUSTOMIZATIONS)


@pytest.fixture
def dynamic(sandbox: Any) -> Iterator[DynamicClient]:
    api = k8s_config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    with api:
        yield DynamicClient(api)


def test_the_base_applies_to_a_cluster(
    objects: list[dict[str, Any]], dynamic: DynamicClient
) -> None:
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        dynamic.server_side_apply(
            resource,
            body=obj,
            namespace=obj["metadata"].get("namespace"),
            field_manager="deploy-test",
            force_conflicts=True,
        )
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        meta = obj["metadata"]
        live = dynamic.get(resource, name=meta["name"], namespace=meta.get("namespace"))
        assert live.metadata.name == meta["name"]
        assert dict(live.metadata.labels)["app.kubernetes.io/part-of"] == "reconciler"
    deployment = dynamic.get(
        dynamic.resources.get(api_version="apps/v1", kind="Deployment"),
        name="reconciler",
        namespace=NAMESPACE,
    )
    assert deployment.spec.replicas == 2


# -- the Deployment ------------------------------------------------------------------


def test_two_replicas_roll_without_losing_availability(objects: list[dict[str, Any]]) -> None:
    spec = one(objects, "Deployment")["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert spec["template"]["spec"]["serviceAccountName"] == "reconciler"


def test_the_pod_is_locked_down(objects: list[dict[str, Any]]) -> None:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objects)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert sc["runAsNonRoot"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc


def test_probes_and_resources(objects: list[dict[str, Any]]) -> None:
    c = container(objects)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 8080, "webhook": 8081, "probes": 8082}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    for bound in ("requests", "limits"):
        assert set(c["resources"][bound]) == {"cpu", "memory"}


def test_writable_paths_are_empty_dirs(objects: list[dict[str, Any]]) -> None:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    c = container(objects)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["RECONCILER_CACHE_DIR"] == "/var/cache/reconciler"
    for variable in ("RECONCILER_CACHE_DIR", "HOME", "TMPDIR"):
        assert "emptyDir" in mounts[env[variable]], variable
    for mount in c["volumeMounts"]:
        if "emptyDir" not in volumes[mount["name"]]:
            assert mount["readOnly"] is True, mount["mountPath"]


def expanded_args(objects: list[dict[str, Any]]) -> list[str]:
    """The container's arguments as the kubelet expands them from its environment."""
    settings = one(objects, "ConfigMap", "reconciler-settings")["data"]
    values: dict[str, str] = {}
    for e in container(objects)["env"]:
        source = e.get("valueFrom") or {}
        if "value" in e:
            values[e["name"]] = e["value"]
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            assert ref["name"] == "reconciler-settings"
            values[e["name"]] = settings[ref["key"]]
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            values[e["name"]] = {"metadata.namespace": NAMESPACE}.get(path, "reconciler-0")

    def expand(arg: str) -> str:
        for name in VAR.findall(arg):
            assert name in values, f"$({name}) is not defined in the container's env"
        return VAR.sub(lambda m: values[m.group(1)], arg)

    return [expand(a) for a in container(objects)["args"]]


def test_the_arguments_parse_with_the_real_command_line(objects: list[dict[str, Any]]) -> None:
    args = build_parser().parse_args(expanded_args(objects))
    assert args.command == "run"
    assert (args.repo, args.cluster) == ("https://github.com/example/catalog.git", "prod")
    assert args.status_branch == "status/prod"
    assert args.interval == 60.0
    assert args.log_format == "json"
    assert args.leader_elect is True
    assert args.leader_elect_namespace == NAMESPACE
    assert args.log_level == "info"  # per-instance change lines show (issue 14)
    # each route group on its own port, matching the container's named ports
    ports = {p["name"]: p["containerPort"] for p in container(objects)["ports"]}
    assert args.metrics_address == f":{ports['metrics']}"
    assert args.webhook_address == f":{ports['webhook']}"
    assert args.probe_address == f":{ports['probes']}"
    assert not args.once


def test_grace_period_outlasts_the_in_flight_pass(objects: list[dict[str, Any]]) -> None:
    """issue 8: the pass finishes and pushes status before the Lease goes.

    ``reconciler.daemon.service``: a pass waits at most ``--health-timeout`` (health
    after post-migrations), then the HTTP servers stop and the elector thread, which
    releases the Lease, is joined for up to 10 s; the rest is for the status push.
    """
    from reconciler.daemon.http import SHUTDOWN_TIMEOUT

    args = build_parser().parse_args(expanded_args(objects))
    grace = one(objects, "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= args.health_timeout + (SHUTDOWN_TIMEOUT + 5.0) + 10.0 + 10.0


def test_the_service_reaches_the_pods(objects: list[dict[str, Any]]) -> None:
    service = one(objects, "Service")["spec"]
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= labels.items()
    targets = {p["name"]: p["targetPort"] for p in service["ports"]}
    # the webhook port (what an Ingress publishes) leads to the webhook server only
    assert targets == {"http-metrics": "metrics", "webhook": "webhook"}
    named = {p["name"] for p in container(objects)["ports"]}
    assert set(targets.values()) <= named


def test_secrets_are_optional_and_the_example_matches(objects: list[dict[str, Any]]) -> None:
    c = container(objects)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    wanted: dict[str, set[str]] = {}
    for e in c["env"]:
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            assert ref["optional"] is True, e["name"]
            wanted.setdefault(ref["name"], set()).add(ref["key"])
    for v in pod["volumes"]:
        if "secret" in v:
            assert v["secret"]["optional"] is True
            wanted.setdefault(v["secret"]["secretName"], set())
    text = (BASE / "secret-example.yaml").read_text()
    assert "EXAMPLE" in text.splitlines()[0]
    examples = {d["metadata"]["name"]: d for d in yaml.safe_load_all(text) if d}
    assert set(examples) == set(wanted)
    for name, keys in wanted.items():
        assert examples[name]["metadata"]["namespace"] == NAMESPACE
        assert keys <= set(examples[name]["stringData"]), name
    git = examples["reconciler-git"]["stringData"]
    assert {"identity", "known_hosts"} <= set(git)  # the files RECONCILER_SSH_* point at


# -- RBAC -----------------------------------------------------------------------------


def allowed(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in rules:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            verbs |= set(rule["verbs"])
    return verbs


def test_no_wildcards(objects: list[dict[str, Any]]) -> None:
    for kind in ("Role", "ClusterRole"):
        for rule in one(objects, kind)["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (kind, rule)


def test_the_role_covers_leases_and_events(objects: list[dict[str, Any]]) -> None:
    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert allowed(role["rules"], "coordination.k8s.io", "leases") == {"get", "create", "update"}
    assert {"create", "patch"} <= allowed(role["rules"], "", "events")
    assert_bound(objects, "RoleBinding", role)


def assert_bound(objects: list[dict[str, Any]], kind: str, role: dict[str, Any]) -> None:
    binding = one(objects, kind)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role["kind"],
        "name": role["metadata"]["name"],
    }
    sa = one(objects, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    ]


def managed_kinds() -> set[tuple[str, str]]:
    """(apiVersion, kind) of everything the example catalog makes reconciler touch."""
    catalog = load_catalog(TEMPLATE)
    kinds = {("v1", "ConfigMap"), ("v1", "Namespace"), ("batch/v1", "Job")}  # inventory, hooks
    for cluster in sorted(catalog.clusters):
        for plan in plan_cluster(catalog, cluster):
            assert plan.ok, (cluster, plan.name, plan.reason)
            kinds |= {(o["apiVersion"], o["kind"]) for o in plan.objects}
    for path in TEMPLATE.glob("apps/*/versions/*/migrations/*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            kinds.add((doc["apiVersion"], doc["kind"]))
    return kinds


def test_the_cluster_role_covers_every_kind_the_catalog_renders(
    objects: list[dict[str, Any]], sandbox: Any
) -> None:
    role = one(objects, "ClusterRole")
    kinds = managed_kinds()
    assert ("apps/v1", "Deployment") in kinds and ("apps/v1", "StatefulSet") in kinds
    with KubeClient.connect(sandbox.kubeconfig) as client:
        for api_version, kind in sorted(kinds - {("v1", "Namespace")}):
            info = client.resource(api_version, kind)
            group = api_version.rpartition("/")[0]
            verbs = allowed(role["rules"], group, info.plural)
            assert verbs >= ALL_VERBS, f"{kind} ({api_version}): missing {ALL_VERBS - verbs}"
    assert {"create", "patch"} <= allowed(role["rules"], "", "events")
    assert_bound(objects, "ClusterRoleBinding", role)


def test_the_cluster_role_is_least_privilege(objects: list[dict[str, Any]]) -> None:
    """Issue 14: no cluster-wide Secrets, no deleting Namespaces, nothing cluster-admin-like.

    Namespaces are listed (``LiveState.namespaces``) and created by server-side apply
    when an instance needs one (``apply._ensure_namespaces``): create + patch.
    """
    rules = one(objects, "ClusterRole")["rules"]
    assert allowed(rules, "", "secrets") == set()
    assert allowed(rules, "", "namespaces") == {"get", "list", "watch", "create", "patch"}
    for group, resource in (
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ):
        assert allowed(rules, group, resource) == set(), resource


def test_the_cluster_role_lets_rollouts_read_and_replace_what_they_watch(
    objects: list[dict[str, Any]],
) -> None:
    """What ``kube/rollout_driver.py`` and ``rollout_daemonset.py`` request.

    A Deployment rollout lists its ReplicaSets and their pods; a DaemonSet rollout
    lists ControllerRevisions and deletes old pods one at a time.
    """
    rules = one(objects, "ClusterRole")["rules"]
    assert {"get", "list"} <= allowed(rules, "apps", "replicasets")
    assert {"get", "list"} <= allowed(rules, "apps", "controllerrevisions")
    assert {"get", "list", "delete"} <= allowed(rules, "", "pods")
    assert allowed(rules, "apps", "replicasets") <= {"get", "list", "watch"}


def test_the_cluster_role_reads_the_pods_and_logs_of_failed_migration_jobs(
    objects: list[dict[str, Any]],
) -> None:
    """``KubeJobRunner`` lists a failed Job's pods and reads the tail of one's log."""
    rules = one(objects, "ClusterRole")["rules"]
    assert {"get", "list"} <= allowed(rules, "", "pods")
    assert "get" in allowed(rules, "", "pods/log")


def test_the_cluster_role_tells_operators_to_narrow_it() -> None:
    text = (BASE / "clusterrole.yaml").read_text()
    assert "narrow" in text.lower()


# -- the README -----------------------------------------------------------------------


def test_the_readme_explains_install_and_webhooks() -> None:
    text = (DEPLOY / "README.md").read_text()
    for needle in ("kubectl apply -k deploy/", "secret-example.yaml", "/hooks/github", "Lease"):
        assert needle in text, needle


def test_every_manifest_is_listed_or_the_example(objects: list[dict[str, Any]]) -> None:
    listed = set(yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"])
    on_disk = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    # the example Secrets (the sharded variant is components/shards/, test_deploy_shards)
    assert on_disk - listed == {"secret-example.yaml"}
    assert listed <= on_disk
    assert Path(DEPLOY / "README.md").is_file()
