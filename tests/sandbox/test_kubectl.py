"""kubectl against the sandbox: get, apply --server-side, delete.

https://kubernetes.io/docs/reference/using-api/server-side-apply/ (kubectl's
``--server-side``/``--force-conflicts``) and kubectl's discovery fallback to
unaggregated discovery. Skipped when kubectl is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.sandbox.testing import SandboxHandle

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.25"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: web}
data: {greeting: hello}
"""


def kubectl(sandbox: SandboxHandle, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(sandbox.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kubectl_get_apply_delete(sandbox: SandboxHandle, tmp_path: Path) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST)
    got = kubectl(sandbox, "get", "ns")
    assert got.returncode == 0 and "kube-system" in got.stdout
    applied = kubectl(sandbox, "apply", "--server-side", "--validate=false", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    assert "deployment.apps/web serverside-applied" in applied.stdout
    rollout = kubectl(sandbox, "rollout", "status", "-n", "web", "deploy/web", "--timeout=20s")
    assert rollout.returncode == 0, rollout.stderr
    cfg = kubectl(sandbox, "get", "cm", "cfg", "-n", "web", "-o", "jsonpath={.data.greeting}")
    assert cfg.stdout == "hello"
    scaled = kubectl(sandbox, "scale", "-n", "web", "deploy/web", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    conflict = kubectl(sandbox, "apply", "--server-side", "--validate=false", "-f", str(manifest))
    assert conflict.returncode != 0 and "conflict" in conflict.stderr
    forced = kubectl(
        sandbox,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--validate=false",
        "-f",
        str(manifest),
    )
    assert forced.returncode == 0, forced.stderr
    deleted = kubectl(sandbox, "delete", "namespace", "web", "--timeout=20s")
    assert deleted.returncode == 0, deleted.stderr
    gone = kubectl(sandbox, "get", "deploy", "-A", "-o", "name")
    assert gone.returncode == 0 and gone.stdout.strip() == ""
    agents = {e.user_agent.split("/")[0] for e in sandbox.request_log()}
    assert "kubectl" in agents


def test_kubectl_server_side_apply_of_a_typo_names_the_field(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    """Server-side apply refuses a field the kind does not declare, whatever kubectl's
    ``--validate``; client-side create with ``--validate=false`` drops it silently.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\n"
        "data: {a: b}\ndataa: {c: d}\n"
    )
    applied = kubectl(sandbox, "apply", "--server-side", "--validate=false", "-f", str(manifest))
    assert applied.returncode != 0
    assert ".dataa: field not declared in schema" in applied.stderr, applied.stderr
    created = kubectl(sandbox, "create", "--validate=false", "-f", str(manifest))
    assert created.returncode == 0, created.stderr
    got = kubectl(sandbox, "get", "cm", "cfg", "-o", "json")
    assert '"dataa"' not in got.stdout and '"a": "b"' in got.stdout
