"""``reconciler init DIR``: the smallest catalog that passes ``reconciler validate``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from reconciler.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_init_writes_a_catalog_that_validates_resolves_and_renders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "catalog"
    code, out, _ = run(capsys, "init", str(root), "--app", "shop", "--cluster", "prod")
    assert code == 0 and "10 files" in out
    assert (root / ".git").is_dir()
    assert subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout  # nothing committed: every file is new
    code, out, _ = run(capsys, "validate", "--repo", str(root), "-o", "json")
    assert code == 0 and json.loads(out) == {"problems": []}  # not even a warning
    code, out, _ = run(capsys, "resolve", "--repo", str(root), "--cluster", "prod", "-o", "json")
    assert code == 0
    assert [(r["instance"], r["version"], r["source"]) for r in json.loads(out)] == [
        ("shop", "0.1.0", "channel:stable")
    ]
    code, out, _ = run(capsys, "render", "--repo", str(root), "--cluster", "prod", "-o", "json")
    assert code == 0 and '"kind": "Deployment"' in out


def test_init_ships_ci_and_pre_commit_that_run_validate_and_preview(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "c"
    assert run(capsys, "init", str(root))[0] == 0
    hooks = yaml.safe_load((root / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    assert hooks[0]["entry"] == "reconciler validate" and hooks[0]["pass_filenames"] is False
    text = (root / ".github/workflows/validate.yaml").read_text()
    workflow = yaml.safe_load(text)
    runs = [s.get("run", "") for s in workflow["jobs"]["validate"]["steps"]]
    assert "reconciler validate" in runs
    assert any("reconciler preview --base" in r for r in runs)
    assert "${{ github.event.pull_request.base.sha }}" in text
    uses = re.findall(r"uses:\s*(\S+)", text)
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses)
    gitlab = yaml.safe_load((root / ".gitlab-ci.yml").read_text())
    script = "\n".join(gitlab["validate"]["script"])
    assert "reconciler validate" in script and "reconciler preview --base" in script
    assert "images verify" not in text + script  # opt-in: the example image is a placeholder


def test_init_inside_a_repository_adds_files_without_a_nested_repository(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    code, out, _ = run(capsys, "init", str(tmp_path / "catalog"))
    assert code == 0 and "inside a Git repository" in out
    assert not (tmp_path / "catalog" / ".git").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--app", "Shop"], "--app 'Shop': must be a DNS-1123 label"),
        (["--cluster", "prod_eu"], "--cluster 'prod_eu': must be a DNS-1123 label"),
        (["--channel", ""], "--channel '': must be a DNS-1123 label"),
    ],
)
def test_bad_names_exit_2_and_write_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "init", str(tmp_path / "c"), *argv)
    assert code == 2 and message in err
    assert not (tmp_path / "c").exists()


def test_a_directory_with_files_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    code, _, err = run(capsys, "init", str(tmp_path))
    assert code == 2 and "exists and is not an empty directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
