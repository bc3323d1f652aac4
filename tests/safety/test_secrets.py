"""Issue 8: Secret values are never printed by ``diff`` or ``render`` unless asked.

SPEC section 3: "diff and render mask data/stringData values of Secrets
(``*** (changed)``), unless --show-secrets". Keys stay visible so a reviewer
sees which value moved.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.model.secrets import CHANGED, MASK, mask_secret, mask_secret_pair
from tests.factories import write_catalog

SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: ${instance.name}-creds
stringData:
  password: hunter2-${app.version}
  user: admin
"""
CATALOG = {"apps/podinfo/versions/6.6.0/manifests/secret.yaml": SECRET}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_mask_keeps_keys_and_hides_values() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "data": {"a": "eA=="}, "stringData": {"b": "y"}}
    assert mask_secret(secret)["data"] == {"a": MASK}
    assert mask_secret(secret)["stringData"] == {"b": MASK}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "x"}}
    assert mask_secret(config) == config


def test_pair_marks_only_changed_values() -> None:
    before = {"apiVersion": "v1", "kind": "Secret", "data": {"a": "eA==", "b": "eQ=="}}
    after = {"apiVersion": "v1", "kind": "Secret", "data": {"a": "eA==", "b": "eg==", "c": "dw=="}}
    masked_before, masked_after = mask_secret_pair(before, after)
    assert masked_before is not None and masked_after is not None
    assert masked_before["data"] == {"a": MASK, "b": MASK}
    assert masked_after["data"] == {"a": MASK, "b": CHANGED, "c": CHANGED}


def test_render_masks_secrets_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path / "catalog", CATALOG)
    code, out = run(capsys, "render", str(root), "--cluster", "prod", "--instance", "api")
    assert code == 0
    assert "hunter2" not in out
    assert "password: '***'" in out
    code, out = run(capsys, "render", str(root), "--cluster", "prod", "-o", "json")
    assert "hunter2" not in out
    items = json.loads(out)["items"]
    assert next(i for i in items if i["kind"] == "Secret")["stringData"] == {
        "password": MASK,
        "user": MASK,
    }
    code, out = run(
        capsys, "render", str(root), "--cluster", "prod", "--instance", "api", "--show-secrets"
    )
    assert "hunter2-6.6.0" in out


def test_diff_masks_secret_values_and_says_which_changed(
    tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path / "catalog", CATALOG)
    cluster = ("--cluster", "prod", "--kubeconfig", str(sandbox.kubeconfig))
    code, out = run(capsys, "diff", str(root), *cluster)
    assert code == 1
    encoded = base64.b64encode(b"hunter2-6.6.0").decode()
    assert "hunter2" not in out and encoded not in out
    assert run(capsys, "apply", str(root), *cluster)[0] == 0

    path = root / "apps/podinfo/versions/6.6.0/manifests/secret.yaml"
    path.write_text(path.read_text().replace("hunter2", "correct-horse"))
    code, out = run(capsys, "diff", str(root), *cluster)
    assert code == 1
    assert "correct-horse" not in out and "hunter2" not in out
    assert base64.b64encode(b"correct-horse-6.6.0").decode() not in out
    assert "-  password: '***'" in out
    assert "+  password: '*** (changed)'" in out
    assert "user: '***'" in out  # unchanged: no diff line, but keys stay readable in context
    code, out = run(capsys, "diff", str(root), *cluster, "-o", "json")
    assert "correct-horse" not in out
    code, out = run(capsys, "diff", str(root), *cluster, "--show-secrets")
    # a real API server folds stringData into base64 data, so that is the value shown
    assert base64.b64encode(b"correct-horse-6.6.0").decode() in out
