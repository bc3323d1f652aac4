"""``reconciler diff`` and ``reconciler apply`` end to end: catalog on disk, sandbox over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.kube import KubeClient
from reconciler.kube.inventory import inventory_name, shared_name
from reconciler.model.changeset import ObjectRef
from tests.factories import write_catalog
from tests.kube.conftest import edit_like_kubectl

WEB = ObjectRef("apps/v1", "Deployment", "web", "web")
API_CFG = ObjectRef("v1", "ConfigMap", "team-api", "api-config")


class Cli:
    def __init__(self, catalog: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]) -> None:
        self.catalog, self.sandbox, self.capsys = catalog, sandbox, capsys
        self.client = KubeClient.connect(sandbox.kubeconfig)

    def run(self, command: str, *extra: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        argv = [
            command,
            str(self.catalog),
            "--cluster",
            "prod",
            "--kubeconfig",
            str(self.sandbox.kubeconfig),
            *extra,
        ]
        code = main(argv)
        out, err = self.capsys.readouterr()
        return code, out, err

    def apply_json(self, *extra: str) -> tuple[int, dict[str, str]]:
        code, out, _ = self.run("apply", "--output", "json", *extra)
        entries = json.loads(out)
        return code, {f"{e['kind']}/{e['namespace']}/{e['name']}": e["action"] for e in entries}

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.catalog / rel
        path.write_text(path.read_text().replace(old, new))


@pytest.fixture
def cli(tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(write_catalog(tmp_path / "catalog"), sandbox, capsys)


def test_apply_then_noop_then_clean_diff(cli: Cli) -> None:
    code, first = cli.apply_json()
    assert code == 0
    assert first == {
        "Namespace//team-api": "created",
        "ConfigMap/team-api/api-config": "created",
        "Deployment/team-api/api": "created",
        "Namespace//web": "created",
        "Deployment/web/web": "created",
    }
    cli.sandbox.reset_request_log()
    code, second = cli.apply_json()
    assert code == 0 and set(second.values()) == {"unchanged"}
    assert not [e for e in cli.sandbox.request_log() if e.verb in ("patch", "create", "delete")]
    code, out, _ = cli.run("diff")
    assert code == 0 and "0 object(s) differ" in out


def test_text_output_groups_by_instance(cli: Cli) -> None:
    code, out, _ = cli.run("apply")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "api:"
    assert "  Deployment/web/web created" in lines
    assert lines[-1] == "apply: 2 instances; objects: 5 created"


def test_drift_shows_in_diff_and_is_reverted(cli: Cli) -> None:
    cli.run("apply")
    edit_like_kubectl(cli.client, WEB, {"spec": {"replicas": 1}})
    code, out, _ = cli.run("diff")
    assert code == 1
    assert "--- live/Deployment/web/web" in out and "+++ desired/Deployment/web/web" in out
    assert "-  replicas: 1" in out and "+  replicas: 5" in out
    code, actions = cli.apply_json()
    assert code == 0 and actions["Deployment/web/web"] == "configured"
    live = cli.client.get(WEB)
    assert live is not None and live["spec"]["replicas"] == 5
    assert cli.run("diff")[0] == 0


def test_broken_instance_keeps_its_objects(cli: Cli) -> None:
    cli.run("apply")
    cli.edit("clusters/prod/instances/api.yaml", "namespace: team-api", "namespace: [")
    cli.edit("clusters/prod/instances/web.yaml", "replicas: 5", "replicas: 3")
    code, actions = cli.apply_json()
    assert code == 1
    assert actions["Deployment/web/web"] == "configured"  # the others still apply
    assert actions["Instance//api"] == "failed"
    assert actions["ConfigMap/team-api/api-config"] == "skipped"
    assert cli.client.get(API_CFG) is not None


def test_removed_manifest_is_pruned(cli: Cli) -> None:
    cli.run("apply")
    cli.edit("clusters/prod/instances/api.yaml", '">=6.0.0 <7.0.0"', "6.6.0")
    version_file = "apps/podinfo/versions/6.6.0/manifests/deployment.yaml"
    text = (cli.catalog / version_file).read_text()
    (cli.catalog / version_file).write_text(text.split("---")[0])
    code, actions = cli.apply_json()
    assert code == 0 and actions["ConfigMap/team-api/api-config"] == "deleted"
    assert cli.client.get(API_CFG) is None


def test_instance_deleted_from_git_is_uninstalled_within_the_mass_prune_guard(cli: Cli) -> None:
    cli.run("apply")
    (cli.catalog / "clusters/prod/instances/api.yaml").unlink()
    # api is one of the cluster's two instances: half may go without a flag
    code, actions = cli.apply_json()
    assert code == 0 and actions["ConfigMap/team-api/api-config"] == "deleted"
    assert cli.client.get(API_CFG) is None


def test_removing_every_instance_needs_allow_mass_prune(cli: Cli) -> None:
    cli.run("apply")
    (cli.catalog / "clusters/prod/instances/api.yaml").unlink()
    (cli.catalog / "clusters/prod/instances/web.yaml").unlink()
    code, actions = cli.apply_json()
    assert code == 1 and actions["ConfigMap/team-api/api-config"] == "skipped"
    assert cli.client.get(API_CFG) is not None
    code, actions = cli.apply_json("--allow-mass-prune")
    assert code == 0 and actions["ConfigMap/team-api/api-config"] == "deleted"
    assert cli.client.get(API_CFG) is None


def test_namespace_outside_cluster_limits(cli: Cli) -> None:
    cli.edit("clusters/prod/instances/api.yaml", "namespace: team-api", "namespace: kube-system")
    code, out, err = cli.run("apply")
    assert code == 1
    assert 'namespace "kube-system" is not allowed' in out + err
    assert cli.client.get(ObjectRef("v1", "ConfigMap", "kube-system", "api-config")) is None
    assert cli.client.get(WEB) is not None


def test_usage_errors_exit_2(cli: Cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = ["apply", str(cli.catalog), "--cluster", "prod", "--kubeconfig", str(tmp_path / "no")]
    assert main(missing) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.run("diff", "--context", "nope")[0] == 2
    unknown = ["diff", str(cli.catalog), "--cluster", "nope", "--kubeconfig", str(tmp_path / "no")]
    assert main(unknown) == 2


def test_the_request_budget_is_an_option_of_apply(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-requests-in-flight 1`` applies one request at a time; 0 is refused."""
    code, _, _ = cli.run("apply", "--max-requests-in-flight", "1")
    assert code == 0
    assert {e.in_flight for e in cli.sandbox.request_log()} <= {0, 1}
    with pytest.raises(SystemExit) as info:
        cli.run("apply", "--max-requests-in-flight", "0")
    assert info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_apply_writes_per_namespace_inventories_when_cluster_yaml_says_so(cli: Cli) -> None:
    cli.edit(
        "clusters/prod/cluster.yaml",
        "allowClusterScoped: false\n",
        "allowClusterScoped: false\ninventory: perNamespace\n",
    )
    code, first = cli.apply_json()
    assert code == 0 and set(first.values()) == {"created"}
    for ns, instance in (("web", "web"), ("team-api", "api")):
        shared = cli.client.get(ObjectRef("v1", "ConfigMap", ns, shared_name("prod")))
        assert shared is not None and list(shared["data"]) == [instance]
        assert cli.client.get(ObjectRef("v1", "ConfigMap", ns, inventory_name(instance))) is None
    # prune reads the shared inventory: a manifest removed from Git is deleted
    cli.edit("clusters/prod/instances/api.yaml", '">=6.0.0 <7.0.0"', "6.6.0")
    version_file = cli.catalog / "apps/podinfo/versions/6.6.0/manifests/deployment.yaml"
    version_file.write_text(version_file.read_text().split("---")[0])
    code, second = cli.apply_json()
    assert code == 0, second
    assert second["ConfigMap/team-api/api-config"] == "deleted"
    assert cli.client.get(API_CFG) is None
    # and `get` reads it
    cli.capsys.readouterr()
    argv = ["get", "api", "--repo", str(cli.catalog), "--cluster", "prod"]
    argv += ["--kubeconfig", str(cli.sandbox.kubeconfig)]
    code = main(argv)
    out = cli.capsys.readouterr().out
    assert code in (0, 1), out  # 1: not every object Current yet
    assert "Deployment/api" in out and "api-config" not in out
