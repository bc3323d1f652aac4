"""Per-namespace behaviour a cluster's controllers and admission give every namespace.

https://kubernetes.io/docs/concepts/security/service-accounts/#default-service-accounts
(a ``default`` ServiceAccount in every namespace, recreated when deleted) and
https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#namespacelifecycle
(``default``, ``kube-system`` and ``kube-public`` cannot be deleted: 403 Forbidden).
"""

from __future__ import annotations

import pytest
from kubernetes import client

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import http


def sa_names(core: client.CoreV1Api, namespace: str) -> list[str]:
    return [sa.metadata.name for sa in core.list_namespaced_service_account(namespace).items]


@pytest.mark.parametrize("namespace", ["default", "kube-system", "kube-public"])
def test_system_namespaces_have_default_service_account(
    core: client.CoreV1Api, namespace: str
) -> None:
    assert sa_names(core, namespace) == ["default"]


def test_new_namespace_gets_default_service_account(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-a"}})
    sa = core.read_namespaced_service_account("default", "team-a")
    assert sa.metadata.uid and sa.metadata.namespace == "team-a"


def test_deleted_default_service_account_comes_back(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-b"}})
    old_uid = core.read_namespaced_service_account("default", "team-b").metadata.uid
    core.delete_namespaced_service_account("default", "team-b")
    new = core.read_namespaced_service_account("default", "team-b")
    assert new.metadata.uid != old_uid


def test_other_service_accounts_are_not_recreated(core: client.CoreV1Api) -> None:
    core.create_namespaced_service_account("default", {"metadata": {"name": "app"}})
    core.delete_namespaced_service_account("app", "default")
    assert sa_names(core, "default") == ["default"]


def test_deleting_a_namespace_removes_its_default_service_account(
    core: client.CoreV1Api,
) -> None:
    core.create_namespace({"metadata": {"name": "team-c"}})
    core.delete_namespace("team-c")
    names = [ns.metadata.name for ns in core.list_namespace().items]
    assert "team-c" not in names
    assert sa_names(core, "team-c") == []


@pytest.mark.parametrize("namespace", ["default", "kube-system", "kube-public"])
def test_system_namespaces_cannot_be_deleted(sandbox: SandboxHandle, namespace: str) -> None:
    status, body = http(sandbox, "DELETE", f"/api/v1/namespaces/{namespace}")
    assert status == 403
    assert body["reason"] == "Forbidden" and body["code"] == 403
    assert body["message"] == (
        f'namespaces "{namespace}" is forbidden: this namespace may not be deleted'
    )
    assert body["details"] == {"name": namespace, "kind": "namespaces"}
    status, ns = http(sandbox, "GET", f"/api/v1/namespaces/{namespace}")
    assert status == 200 and "deletionTimestamp" not in ns["metadata"]


def test_kube_node_lease_is_an_ordinary_namespace(sandbox: SandboxHandle) -> None:
    status, _ = http(sandbox, "DELETE", "/api/v1/namespaces/kube-node-lease")
    assert status in (200, 202)
    status, _ = http(sandbox, "GET", "/api/v1/namespaces/kube-node-lease")
    assert status == 404
