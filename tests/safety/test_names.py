"""Issue 8: names and namespaces are DNS names before any pattern match; paths are escaped.

``namespace: "team-x/../kube-system"`` used to match ``team-*`` (fnmatch's ``*``
matches ``/``) and reach the API server unescaped, so ``diff`` read
kube-system's Secret. Names are checked at render time (a validation error
naming the manifest), the limits refuse non-DNS namespaces whatever the
pattern, and every path segment sent to the API server is escaped.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.daemon.plan import plan_cluster
from reconciler.kube import KubeClient, Limits
from reconciler.kube.discovery import ResourceInfo, group_version_path
from reconciler.model.changeset import ObjectRef
from tests.factories import write_catalog

ESCAPING_SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: admin-token
  namespace: "team-x/../kube-system"
stringData: {token: x}
"""


def _with_manifest(tmp_path: Path, text: str) -> Path:
    return write_catalog(
        tmp_path / "catalog",
        {"apps/podinfo/versions/6.6.0/manifests/secret.yaml": text},
    )


def test_namespace_with_a_path_is_a_render_error_naming_the_manifest(tmp_path: Path) -> None:
    catalog = load_catalog(_with_manifest(tmp_path, ESCAPING_SECRET))
    plans = {p.name: p for p in plan_cluster(catalog, "prod")}
    api = plans["api"]  # api runs 6.6.0, which ships the manifest
    assert api.reason == "CatalogInvalid" and api.objects == ()
    assert "apps/podinfo/versions/6.6.0/manifests/secret.yaml" in api.message
    assert '"team-x/../kube-system" is not a valid namespace name' in api.message
    assert plans["web"].ok  # web runs 6.5.0: not affected


@pytest.mark.parametrize(
    ("kind", "name", "ok"),
    [
        ("ConfigMap", "web.config-1", True),
        ("ConfigMap", "Web", False),
        ("ConfigMap", "a/b", False),
        ("ConfigMap", "x" * 254, False),
        ("Namespace", "team.a", False),
        ("ClusterRole", "example.com:aggregate-to-view", True),
        ("ClusterRole", "../secrets", False),
    ],
)
def test_object_names_follow_kubernetes_rules(
    tmp_path: Path, kind: str, name: str, ok: bool
) -> None:
    api_version = "rbac.authorization.k8s.io/v1" if kind == "ClusterRole" else "v1"
    manifest = f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {json.dumps(name)}\n"
    root = write_catalog(
        tmp_path / "catalog",
        {
            "apps/podinfo/versions/6.6.0/manifests/extra.yaml": manifest,
            "clusters/prod/cluster.yaml": None,
        },
    )
    api = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}["api"]
    assert api.ok is ok, api.message


def test_limits_refuse_a_namespace_that_is_not_a_dns_label() -> None:
    limits = Limits(allowed_namespaces=("team-*",))
    assert limits.namespace_allowed("team-x")
    assert not limits.namespace_allowed("team-x/../kube-system")
    assert not limits.namespace_allowed("team-X")


def test_every_path_segment_is_escaped() -> None:
    info = ResourceInfo("v1", "Secret", "secrets", namespaced=True)
    assert info.path("team-x/../kube-system", "a/b") == (
        "/api/v1/namespaces/team-x%2F..%2Fkube-system/secrets/a%2Fb"
    )
    assert group_version_path("apps/../v1") == "/apis/apps/..%2Fv1"


def test_a_crafted_namespace_cannot_read_another_namespace(sandbox: Any) -> None:
    with KubeClient.connect(sandbox.kubeconfig) as client:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "admin-token", "namespace": "kube-system"},
                "data": {"token": base64.b64encode(b"root").decode()},
            }
        )
        crafted = ObjectRef("v1", "Secret", "team-x/../kube-system", "admin-token")
        assert client.get(crafted) is None


def test_diff_does_not_read_across_namespaces(
    tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _with_manifest(tmp_path, ESCAPING_SECRET)
    code = main(["diff", str(root), "--cluster", "prod", "--kubeconfig", str(sandbox.kubeconfig)])
    out, _ = capsys.readouterr()
    assert code == 1
    assert "kube-system" not in out.replace('"team-x/../kube-system"', "")
    gets = [e.path for e in sandbox.request_log() if "secrets" in e.path]
    assert all("kube-system/secrets" not in path for path in gets)
