"""The catalog commands as users run them: output formats and exit codes (SPEC section 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reconciler.cli import main
from tests.factories import write_catalog


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_json_shape_and_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path)
    code, out, _ = run(capsys, "validate", str(root), "--output", "json")
    assert code == 0 and json.loads(out) == {"problems": []}
    (root / "clusters/prod/instances/web.yaml").write_text(
        "apiVersion: reconciler/v1\nkind: Instance\n"
    )
    code, out, _ = run(capsys, "validate", str(root), "--output", "json")
    assert code == 1
    problems = json.loads(out)["problems"]
    assert problems and set(problems[0]) == {"file", "line", "severity", "message"}
    assert problems[0]["file"] == "clusters/prod/instances/web.yaml"
    assert problems[0]["severity"] == "error"


def test_validate_text_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(
        tmp_path,
        {"apps/podinfo/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: podinfo\nname: x\n"},
    )
    code, out, _ = run(capsys, "validate", str(root))
    assert code == 1
    assert 'apps/podinfo/app.yaml:4: duplicate key "name"' in out
    assert "catalog is invalid: " in out


def test_validate_warnings_do_not_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_catalog(tmp_path)
    path = root / "apps/podinfo/versions/6.5.0/version.yaml"
    path.write_text(path.read_text().replace("podinfo:6.5.0", "podinfo:latest"))
    code, out, _ = run(capsys, "validate", str(root))
    assert code == 0
    assert "warning: image" in out and "catalog is valid: 1 warning(s)" in out


def test_resolve_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_catalog(tmp_path)
    code, out, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert [(d["instance"], d["app"], d["version"], d["source"], d["cluster"]) for d in data] == [
        ("api", "podinfo", "6.6.0", "range:>=6.0.0 <7.0.0", "prod"),
        ("web", "podinfo", "6.5.0", "channel:stable", "prod"),
    ]


def test_resolve_error_instead_of_version_and_others_still_resolve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: nope\n"
        },
    )
    code, out, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "--output", "json")
    assert code == 1
    data = {d["instance"]: d for d in json.loads(out)}
    assert "version" not in data["web"] and "nope" in data["web"]["error"]
    assert data["api"]["version"] == "6.6.0"


def test_resolve_broken_file_is_reported_per_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path, {"clusters/prod/instances/web.yaml": "key: [unclosed\n"})
    code, out, err = run(capsys, "resolve", str(root), "--cluster", "prod", "--output", "json")
    assert code == 1
    data = {d["instance"]: d for d in json.loads(out)}
    assert data["web"]["reason"] == "CatalogInvalid"
    assert data["web"]["error"].startswith("clusters/prod/instances/web.yaml:2: invalid YAML")
    assert data["api"]["version"] == "6.6.0"
    assert "the catalog has 1 error(s)" in err


def test_resolve_explain_lists_candidates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path)
    code, out, _ = run(
        capsys, "resolve", str(root), "--cluster", "prod", "--explain", "--output", "json"
    )
    data = {d["instance"]: d for d in json.loads(out)}
    assert {c["version"] for c in data["api"]["candidates"]} == {"6.5.0", "6.6.0"}
    code, out, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "--explain")
    assert "6.5.0" in out and "6.6.0" in out and code == 0


def test_resolve_deployed_downgrade_guard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path)
    code, out, _ = run(
        capsys,
        "resolve",
        str(root),
        "--cluster",
        "prod",
        "--deployed",
        "web=6.6.0",
        "--output",
        "json",
    )
    assert code == 1
    web = {d["instance"]: d for d in json.loads(out)}["web"]
    assert web["reason"] == "DowngradeBlocked" and web["version"] == "6.5.0"


def test_render_yaml_and_json_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_catalog(tmp_path)
    code, out, _ = run(capsys, "render", str(root), "--cluster", "prod", "--instance", "web")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["Deployment"]
    code, out, _ = run(capsys, "render", str(root), "--cluster", "prod", "--output", "json")
    data = json.loads(out)
    assert data["kind"] == "List" and len(data["items"]) == 3


def test_render_reports_failed_instance_and_renders_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: stable\nparameters: {nope: 1}\n"
        },
    )
    code, out, err = run(capsys, "render", str(root), "--cluster", "prod", "--output", "json")
    assert code == 1
    assert "prod/web: not rendered (CatalogInvalid)" in err
    assert {o["metadata"]["namespace"] for o in json.loads(out)["items"]} == {"team-api"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["resolve", "CATALOG", "--cluster", "nope"],
            'cluster "nope" is not in the catalog (known: prod)',
        ),
        (
            ["render", "CATALOG", "--cluster", "prod", "--instance", "zz"],
            'instance "zz" is not in cluster prod',
        ),
        (
            ["resolve", "CATALOG", "--cluster", "prod", "--deployed", "web"],
            "--deployed expects INSTANCE=VERSION",
        ),
        (["validate", "MISSING"], "does not exist"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    root = write_catalog(tmp_path / "cat")
    argv = [
        str(root) if a == "CATALOG" else str(tmp_path / "missing") if a == "MISSING" else a
        for a in argv
    ]
    code, _, err = run(capsys, *argv)
    assert message in err
    assert code == 2


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["resolve"])
    assert exc.value.code == 2


def test_console_script_runs(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "catalog is valid" in result.stdout


def test_resolve_explain_and_render_show_the_pinned_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SPEC section 8: builds.yaml pins 6.5.0's image; ``render`` uses the pinned
    reference and ``resolve --explain`` names the build each instance runs."""
    digest = "sha256:" + "5" * 64
    version = (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: 6.5.0\n"
        "images:\n  podinfo: ghcr.io/stefanprodan/podinfo:6.5.0-rev1\n"
        "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
    )
    builds = (
        "apiVersion: reconciler/v1\nkind: ImageBuilds\napp: podinfo\nbuilds:\n"
        f"  6.5.0:\n    podinfo: {{tag: 6.5.0-rev1-b5.1, digest: '{digest}'}}\n"
    )
    root = write_catalog(
        tmp_path,
        {"apps/podinfo/versions/6.5.0/version.yaml": version, "apps/podinfo/builds.yaml": builds},
    )
    code, out, _ = run(capsys, "resolve", str(root), "--cluster", "prod", "--explain")
    assert code == 0
    assert (
        f"pinned image builds (apps/<app>/builds.yaml):\n  web: 6.5.0 podinfo 6.5.0-rev1-b5.1@{digest}\n"
        in out
    )
    code, out, _ = run(
        capsys, "resolve", str(root), "--cluster", "prod", "--explain", "--output", "json"
    )
    data = {d["instance"]: d for d in json.loads(out)}
    assert data["web"]["builds"] == {"podinfo": f"6.5.0-rev1-b5.1@{digest}"}
    assert data["api"]["builds"] == {}  # 6.6.0 has no builds
    code, out, _ = run(capsys, "render", str(root), "--cluster", "prod", "--instance", "web")
    assert f"image: ghcr.io/stefanprodan/podinfo:6.5.0-rev1-b5.1@{digest}" in out
