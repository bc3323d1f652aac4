"""``reconciler get INSTANCE``: the live tree of one instance, against the sandbox over HTTP.

A catalog on disk is applied with ``reconciler apply --wait``; ``get`` then reads the
instance's inventory and objects back, with what the sandbox's controllers made from
them (ReplicaSets, Pods), and its exit code says whether everything is Current.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main
from reconciler.kube import Health, KubeClient
from reconciler.kube.tree import match_labels_selector, pod_verdict
from reconciler.model.changeset import ObjectRef
from tests.factories import write_catalog
from tests.kube.conftest import edit_like_kubectl

WEB = ObjectRef("apps/v1", "Deployment", "web", "web")
API_CFG = ObjectRef("v1", "ConfigMap", "team-api", "api-config")
WAIT = 30.0  # seconds; generous, the sandbox's controllers act within a second


class Cli:
    def __init__(self, catalog: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]) -> None:
        self.catalog, self.sandbox, self.capsys = catalog, sandbox, capsys
        self.client = KubeClient.connect(sandbox.kubeconfig)

    def run(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(
            [
                *argv,
                "--repo",
                str(self.catalog),
                "--cluster",
                "prod",
                "--kubeconfig",
                str(self.sandbox.kubeconfig),
            ]
        )
        out, err = self.capsys.readouterr()
        return code, out, err

    def get_json(self, instance: str) -> tuple[int, dict[str, Any]]:
        code, out, _ = self.run("get", instance, "-o", "json")
        return code, json.loads(out)

    def wait_for(self, instance: str, ok: Any) -> tuple[int, dict[str, Any]]:
        """``get -o json`` until ``ok(tree)``; the last answer either way."""
        deadline = time.monotonic() + WAIT
        while True:
            code, tree = self.get_json(instance)
            if ok(tree) or time.monotonic() > deadline:
                return code, tree
            time.sleep(0.2)


@pytest.fixture
def cli(tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(write_catalog(tmp_path / "catalog"), sandbox, capsys)


def _installed(cli: Cli) -> None:
    code, _, err = cli.run("apply", "--wait", "--timeout", "60s")
    assert code == 0, err


def _node(objects: list[dict[str, Any]], kind: str, name: str = "") -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (not name or o["name"] == name)]
    assert found, f"no {kind}/{name} in {[(o['kind'], o['name']) for o in objects]}"
    return found[0]


def _pods(tree: dict[str, Any]) -> list[dict[str, Any]]:
    deployment = _node(tree["objects"], "Deployment", "web")
    return [p for rs in deployment.get("children", []) for p in rs.get("children", [])]


def test_a_healthy_instance_is_a_tree_of_current_objects(cli: Cli) -> None:
    _installed(cli)
    code, tree = cli.get_json("web")
    assert code == 0
    assert tree["instance"] == "web" and tree["cluster"] == "prod"
    assert tree["namespace"] == "web" and tree["app"] == "podinfo"
    assert tree["version"] == "6.5.0" and tree["health"] == "Current"
    deployment = _node(tree["objects"], "Deployment", "web")
    assert deployment["health"] == "Current"
    assert deployment["message"] == "Deployment is available. Replicas: 5"
    [replicaset] = deployment["children"]
    assert replicaset["kind"] == "ReplicaSet" and replicaset["name"].startswith("web-")
    assert replicaset["health"] == "Current" and replicaset["message"] == "5/5 ready"
    pods = replicaset["children"]
    assert len(pods) == 5
    assert {p["kind"] for p in pods} == {"Pod"}
    assert {(p["health"], p["message"]) for p in pods} == {("Current", "Running")}


def test_text_draws_the_tree_under_a_header(cli: Cli) -> None:
    _installed(cli)
    code, out, _ = cli.run("get", "web")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "web on cluster prod: podinfo 6.5.0, namespace web: Current"
    assert lines[1].split() == ["NAMESPACE", "NAME", "HEALTH", "MESSAGE"]
    names = [line.split()[1:3] for line in lines[2:]]
    assert ["Deployment/web", "Current"] in names
    assert any(n[0] == "└─" and n[1].startswith("ReplicaSet/web-") for n in names)
    pod_lines = [line for line in lines if "Pod/web-" in line]
    assert len(pod_lines) == 5
    assert all(("├─ Pod/" in line) or ("└─ Pod/" in line) for line in pod_lines)
    assert "\x1b[" not in out  # no colour off a terminal


def test_a_crashing_pod_is_named_with_its_reason_and_exits_1(cli: Cli) -> None:
    _installed(cli)
    annotation = {"sandbox.reconciler.dev/fail": "CrashLoopBackOff"}
    patch = {"spec": {"template": {"metadata": {"annotations": annotation}}}}
    edit_like_kubectl(cli.client, WEB, patch)

    def crashing(tree: dict[str, Any]) -> bool:
        return any(p["message"].startswith("CrashLoopBackOff") for p in _pods(tree))

    code, tree = cli.wait_for("web", crashing)
    assert crashing(tree), tree
    assert code == 1
    assert tree["health"] != "Current"
    deployment = _node(tree["objects"], "Deployment", "web")
    assert deployment["health"] == "InProgress" and deployment["message"]
    failed = [p for p in _pods(tree) if p["health"] == "Failed"]
    assert failed and all("container podinfo" in p["message"] for p in failed)
    code, out, _ = cli.run("get", "web")
    assert code == 1
    assert "objects not Current)" in out.splitlines()[0]
    assert "CrashLoopBackOff: container podinfo" in out


def test_an_object_missing_from_the_cluster_is_not_found(cli: Cli) -> None:
    _installed(cli)
    assert cli.client.delete(API_CFG)
    code, tree = cli.get_json("api")
    assert code == 1
    assert tree["health"] == "NotFound"
    config = _node(tree["objects"], "ConfigMap", "api-config")
    assert config["health"] == "NotFound"
    assert config["message"] == "not found (listed in the inventory)"
    assert _node(tree["objects"], "Deployment", "api")["health"] == "Current"


def test_yaml_is_the_same_document(cli: Cli) -> None:
    _installed(cli)
    code, out, _ = cli.run("get", "api", "-o", "yaml")
    assert code == 0
    as_yaml = yaml.safe_load(out)
    assert as_yaml == cli.get_json("api")[1]
    assert {(o["kind"], o["name"]) for o in as_yaml["objects"]} >= {
        ("ConfigMap", "api-config"),
        ("Deployment", "api"),
    }


def test_an_unknown_instance_is_usage_and_names_the_known_ones(cli: Cli) -> None:
    _installed(cli)
    code, out, err = cli.run("get", "wbe")
    assert code == 2 and out == ""
    assert "no instance named wbe on cluster prod; known: api, web" in err


def test_an_instance_not_applied_yet_exits_1_saying_so(cli: Cli) -> None:
    code, out, err = cli.run("get", "web")
    assert code == 1 and out == ""
    assert "web is not installed on cluster prod" in err
    assert "reconciler-inventory-web in namespace web" in err


def test_an_instance_deleted_from_git_is_still_shown_while_it_runs(cli: Cli) -> None:
    _installed(cli)
    (cli.catalog / "clusters/prod/instances/api.yaml").unlink()
    code, tree = cli.get_json("api")
    assert code == 0 and tree["namespace"] == "team-api"
    assert _node(tree["objects"], "Deployment", "api")["health"] == "Current"
    code, _, err = cli.run("get", "gone")
    assert code == 2 and "known: api, web" in err


def test_an_unknown_cluster_is_usage(cli: Cli) -> None:
    code = main(["get", "web", "--repo", str(cli.catalog), "--cluster", "stage"])
    _, err = cli.capsys.readouterr()
    assert code == 2 and 'cluster "stage" is not in the catalog (known: prod)' in err


def test_get_without_an_instance_is_usage(cli: Cli) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["get", "--repo", str(cli.catalog), "--cluster", "prod"])
    assert exit_.value.code == 2


def _pod(phase: str, **status: Any) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": phase, **status}}


def _waiting(reason: str, message: str = "") -> dict[str, Any]:
    state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    return {"containerStatuses": [{"name": "app", "state": state}]}


@pytest.mark.parametrize(
    ("pod", "verdict"),
    [
        (_pod("Succeeded"), (Health.CURRENT, "Succeeded")),
        (
            _pod("Running", conditions=[{"type": "Ready", "status": "True"}]),
            (Health.CURRENT, "Running"),
        ),
        (
            _pod("Running", conditions=[{"type": "Ready", "status": "False"}]),
            (Health.IN_PROGRESS, "Running, not ready"),
        ),
        (_pod("Pending"), (Health.IN_PROGRESS, "Pending")),
        (_pod("Pending", **_waiting("ContainerCreating")), (Health.IN_PROGRESS, "Pending")),
        (
            _pod("Pending", **_waiting("ImagePullBackOff", "Back-off pulling image")),
            (Health.FAILED, "ImagePullBackOff: container app: Back-off pulling image"),
        ),
        (
            _pod("Pending", **_waiting("SomethingNew")),
            (Health.IN_PROGRESS, "SomethingNew: container app"),
        ),
        (
            _pod(
                "Failed",
                containerStatuses=[
                    {"name": "app", "state": {"terminated": {"reason": "Error", "exitCode": 3}}}
                ],
            ),
            (Health.FAILED, "Error: container app"),
        ),
        (_pod("Failed", reason="Evicted"), (Health.FAILED, "Evicted")),
    ],
)
def test_pod_verdicts_say_what_kubectl_shows(pod: dict[str, Any], verdict: Any) -> None:
    assert pod_verdict(pod) == verdict


def test_the_children_list_narrows_by_match_labels_only() -> None:
    labels = {"spec": {"selector": {"matchLabels": {"b": "2", "a": "1"}}}}
    assert match_labels_selector(labels) == "a=1,b=2"
    expressions = {"selector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
    assert match_labels_selector({"spec": expressions}) == ""
    assert match_labels_selector({"spec": {"selector": "app=web"}}) == ""
    assert match_labels_selector({}) == ""
