"""Semantic validation: what a real API server rejects with 422 Invalid and field paths.

https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation,
https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set,
https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#label-selector-updates,
https://kubernetes.io/docs/concepts/services-networking/service/#multi-port-services,
https://kubernetes.io/docs/concepts/configuration/secret/#restriction-names-data,
https://kubernetes.io/docs/concepts/configuration/configmap/#configmap-immutable.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.sandbox.rules import label_key_errors
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http

NS = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"


def causes(body: Any) -> list[str]:
    return [c["field"] for c in body["details"]["causes"]]


def service(ports: list[dict[str, Any]], cluster_ip: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"app": "web"}, "ports": ports}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}, "spec": spec}


def test_deployment_selector_must_match_template_labels(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    status, error = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 422 and error["reason"] == "Invalid"
    assert causes(error) == ["spec.template.metadata.labels"]
    assert error["message"].startswith('Deployment.apps "web" is invalid: ')


def test_every_violation_is_listed(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    container = body["spec"]["template"]["spec"]["containers"][0]
    del container["image"]
    container["ports"] = [{"containerPort": 70000}]
    status, error = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 422
    assert causes(error) == [
        "spec.template.spec.containers[0].image",
        "spec.template.spec.containers[0].ports[0].containerPort",
    ]
    assert [c["reason"] for c in error["details"]["causes"]] == [
        "FieldValueRequired",
        "FieldValueInvalid",
    ]


@pytest.mark.parametrize(
    ("ports", "fields"),
    [
        # targetPort defaults to port, so a real server reports both
        ([{"port": 0}], ["spec.ports[0].port", "spec.ports[0].targetPort"]),
        ([{"port": 80}, {"port": 81}], ["spec.ports[0].name", "spec.ports[1].name"]),
        ([{"name": "a", "port": 80}, {"name": "a", "port": 81}], ["spec.ports[1].name"]),
        ([{"name": "a", "port": 80}, {"name": "b", "port": 80}], ["spec.ports[1]"]),
        ([{"port": 80, "targetPort": 99999}], ["spec.ports[0].targetPort"]),
    ],
)
def test_service_ports(sandbox: SandboxHandle, ports: list[Any], fields: list[str]) -> None:
    status, error = http(sandbox, "POST", f"{NS}/services", service(ports))
    assert status == 422 and causes(error) == fields


def test_a_service_needs_ports_unless_headless_or_external_name(sandbox: SandboxHandle) -> None:
    """https://kubernetes.io/docs/concepts/services-networking/service/#headless-services:
    a Service that proxies (a cluster IP, a node port, a load balancer) needs a port."""
    for spec in (None, {}, {"type": "NodePort"}, {"ports": []}):
        body = {"metadata": {"name": "noports"}, "spec": spec}
        status, error = http(sandbox, "POST", f"{NS}/services", body)
        assert status == 422 and causes(error) == ["spec.ports"], (spec, error)
    for name, spec in (
        ("headless", {"clusterIP": "None", "selector": {"app": "db"}}),
        ("alias", {"type": "ExternalName", "externalName": "db.example.com"}),
    ):
        body = {"metadata": {"name": name}, "spec": spec}
        assert http(sandbox, "POST", f"{NS}/services", body)[0] == 201, spec


def test_valid_multi_port_service_is_accepted(sandbox: SandboxHandle) -> None:
    ports = [{"name": "a", "port": 80}, {"name": "b", "port": 80, "protocol": "UDP"}]
    status, _ = http(sandbox, "POST", f"{NS}/services", service(ports))
    assert status == 201


@pytest.mark.parametrize(
    "labels", [{"bad key": "v"}, {"-x": "v"}, {"UPPER.example/x": "v"}, {"k": "bad value"}]
)
def test_invalid_labels(sandbox: SandboxHandle, labels: dict[str, str]) -> None:
    body = {"metadata": {"name": "cfg", "labels": labels}}
    status, error = http(sandbox, "POST", f"{NS}/configmaps", body)
    assert status == 422 and causes(error) == ["metadata.labels"]


@pytest.mark.parametrize("key", ["app", "example.com/app", "a.b-c_d", "x" * 63])
def test_valid_label_keys(key: str) -> None:
    assert label_key_errors(key) == []


def test_secret_data_must_be_base64(sandbox: SandboxHandle) -> None:
    body = {"metadata": {"name": "s"}, "data": {"ok": "dmFsdWU=", "bad": "not base64!"}}
    status, error = http(sandbox, "POST", f"{NS}/secrets", body)
    assert status == 422 and causes(error) == ["data[bad]"]


def test_deployment_selector_is_immutable(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    _, created = http(sandbox, "POST", f"{APPS}/deployments", body)
    changed = copy.deepcopy(created)
    changed["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    # unconditional: the Deployment controller may have written status since, and a real
    # API server checks the resourceVersion before validating (a 409 then, seen at load 20)
    del changed["metadata"]["resourceVersion"]
    status, error = http(sandbox, "PUT", f"{APPS}/deployments/web", changed)
    assert status == 422 and causes(error) == ["spec.selector"]


def test_service_cluster_ip_is_immutable(sandbox: SandboxHandle) -> None:
    _, created = http(sandbox, "POST", f"{NS}/services", service([{"port": 80}], "10.96.0.9"))
    changed = copy.deepcopy(created)
    changed["spec"]["clusterIP"] = "10.96.0.10"
    status, error = http(sandbox, "PUT", f"{NS}/services/svc", changed)
    assert status == 422 and causes(error) == ["spec.clusterIP"]


def test_job_template_is_immutable(sandbox: SandboxHandle) -> None:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "j", "image": "a"}]}}
    job = {"metadata": {"name": "j"}, "spec": {"template": template}}
    status, created = http(sandbox, "POST", "/apis/batch/v1/namespaces/default/jobs", job)
    assert status == 201
    changed = copy.deepcopy(created)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "b"
    # unconditional: the Job controller may have written status since (a 409 then)
    del changed["metadata"]["resourceVersion"]
    status, error = http(sandbox, "PUT", "/apis/batch/v1/namespaces/default/jobs/j", changed)
    assert status == 422 and causes(error) == ["spec.template"]


@pytest.mark.parametrize("plural", ["configmaps", "secrets"])
def test_immutable_data_cannot_change(sandbox: SandboxHandle, plural: str) -> None:
    body = {"metadata": {"name": "c"}, "immutable": True, "data": {"k": "dg=="}}
    http(sandbox, "POST", f"{NS}/{plural}", body)
    status, error = http(
        sandbox,
        "PATCH",
        f"{NS}/{plural}/c",
        {"data": {"k": "dw=="}},
        "application/merge-patch+json",
    )
    assert status == 422 and causes(error) == ["data"]
    status, error = http(
        sandbox, "PATCH", f"{NS}/{plural}/c", {"immutable": False}, "application/merge-patch+json"
    )
    assert status == 422 and causes(error) == ["immutable"]


def test_no_new_finalizers_while_deleting(sandbox: SandboxHandle) -> None:
    """https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/"""
    merge = "application/merge-patch+json"
    body = {"metadata": {"name": "c", "finalizers": ["example.com/a"]}}
    http(sandbox, "POST", f"{NS}/configmaps", body)
    status, _ = http(sandbox, "DELETE", f"{NS}/configmaps/c")
    assert status in (200, 202)
    more = {"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}
    status, error = http(sandbox, "PATCH", f"{NS}/configmaps/c", more, merge)
    assert status == 422 and causes(error) == ["metadata.finalizers"]
    status, _ = http(
        sandbox, "PATCH", f"{NS}/configmaps/c", {"metadata": {"finalizers": []}}, merge
    )
    assert status == 200
    status, _ = http(sandbox, "GET", f"{NS}/configmaps/c")
    assert status == 404


MIB = 1024 * 1024


def configmap(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def test_a_configmap_s_values_hold_at_most_one_mebibyte(sandbox: SandboxHandle) -> None:
    """``ValidateConfigMap``: the values of ``data`` and ``binaryData`` together (keys do
    not count), https://kubernetes.io/docs/concepts/configuration/configmap/#motivation.
    The error names the whole object: ``ConfigMap "big" is invalid: []: Too long: ...``."""
    at_most = configmap("fits", data={"a": "x" * (MIB - 1), "long-key-" * 20: "y"})
    assert http(sandbox, "POST", f"{NS}/configmaps", at_most)[0] == 201
    over = configmap("big", data={"a": "x" * (MIB - 1), "b": "yy"})
    status, error = http(sandbox, "POST", f"{NS}/configmaps", over)
    assert status == 422 and error["reason"] == "Invalid"
    assert error["message"] == (
        'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes'
    )
    assert error["details"]["causes"] == [
        {
            "reason": "FieldValueTooLong",
            "message": "Too long: must have at most 1048576 bytes",
            "field": "[]",
        }
    ]
    # binaryData counts its decoded bytes: 3 bytes of base64 "eHl6" are "xyz"
    binary = configmap("binary", data={"a": "x" * (MIB - 3)}, binaryData={"b": "eHl6"})
    assert http(sandbox, "POST", f"{NS}/configmaps", binary)[0] == 201
    # an update past the bound is refused as well, and the object stays as it was
    grown = {**at_most, "data": {**at_most["data"], "c": "zz"}}
    status, _ = http(sandbox, "PUT", f"{NS}/configmaps/fits", grown)
    assert status == 422
    status, stored = http(sandbox, "GET", f"{NS}/configmaps/fits")
    assert status == 200 and "c" not in stored["data"]


def test_a_secret_s_data_holds_at_most_one_mebibyte(sandbox: SandboxHandle) -> None:
    """``ValidateSecret``: the decoded values of ``data``
    (https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/)."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"}}
    over = {**secret, "stringData": {"a": "x" * MIB, "b": "y"}}
    status, error = http(sandbox, "POST", f"{NS}/secrets", over)
    assert status == 422
    assert causes(error) == ["data"]
    assert error["message"].endswith("data: Too long: must have at most 1048576 bytes")
    fits = {**secret, "stringData": {"a": "x" * MIB}}
    assert http(sandbox, "POST", f"{NS}/secrets", fits)[0] == 201
