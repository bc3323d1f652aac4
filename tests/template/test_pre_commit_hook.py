"""The template's pre-commit hook passes out of the box, run as pre-commit runs it.

pre-commit is not a dependency of this project, so this does what it does for a
``language: python`` hook from a remote repository
(https://pre-commit.com/#python, pre_commit/languages/python.py):

1. take the hook's definition from the repository's ``.pre-commit-hooks.yaml`` and
   the overrides the catalog's ``.pre-commit-config.yaml`` gives it;
2. build a fresh virtualenv holding the hook's repository (at the commit under test:
   its files, as pre-commit's clone has them) and the hook's
   ``additional_dependencies``, installed in one command as ``pip install . DEPS``
   in the clone (here with uv, the installer ``make install`` uses: the same
   resolution, in seconds instead of a minute);
3. in the catalog's checkout with every file staged, run the hook when a staged
   file matches its ``files``/``exclude`` patterns: ``entry`` + ``args`` (+ the
   file names with ``pass_filenames``), with the environment's ``bin`` first on
   ``PATH`` and ``VIRTUAL_ENV`` set, nothing of this project's own environment.

The environment lacks the template's ``migrations-example`` package, exactly the
situation that made the hook fail with ``python migration ... is not registered``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT, TEMPLATE

pytestmark = pytest.mark.slow
HOOK_REPO = "https://github.com/example-org/reconciler"  # the template's placeholder
UV = Path(sys.executable).parent / "uv"  # installed by `make install` (bootstrap.lock)


@dataclass(frozen=True)
class Hook:
    """A hook as pre-commit resolves it: the manifest's keys, the config's on top."""

    id: str
    entry: str
    args: tuple[str, ...]
    files: str
    exclude: str
    pass_filenames: bool
    additional_dependencies: tuple[str, ...]
    language: str

    @classmethod
    def resolve(cls, manifest: dict[str, Any], config: dict[str, Any]) -> Hook:
        merged = {**manifest, **config}
        return cls(
            id=merged["id"],
            entry=merged["entry"],
            args=tuple(merged.get("args") or ()),
            files=merged.get("files", ""),
            exclude=merged.get("exclude", "^$"),
            pass_filenames=merged.get("pass_filenames", True),
            additional_dependencies=tuple(merged.get("additional_dependencies") or ()),
            language=merged["language"],
        )


def _template_hooks() -> list[Hook]:
    manifest = {
        h["id"]: h for h in yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    }
    config = yaml.safe_load((TEMPLATE / ".pre-commit-config.yaml").read_text())
    hooks = []
    for repo in config["repos"]:
        assert repo["repo"] == HOOK_REPO, "the template uses only this repository's hooks"
        hooks += [Hook.resolve(manifest[h["id"]], h) for h in repo["hooks"]]
    return hooks


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


@pytest.fixture(scope="module")
def hook_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """pre-commit's environment for the hooks: this repository and the extra deps."""
    [hook] = _template_hooks()
    assert hook.language == "python"
    root = tmp_path_factory.mktemp("pre-commit")
    clone = root / "repo"  # the hook repository's files, as pre-commit's clone holds them
    tracked = _git(REPO_ROOT, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, tracked):
        source = REPO_ROOT / rel
        if source.is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / rel)
    env = root / "py_env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120
    )
    assert UV.is_file(), f"{UV} missing: run make install"
    subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(env / "bin" / "python"),
            ".",
            *hook.additional_dependencies,
        ],
        cwd=clone,
        check=True,
        timeout=600,
    )
    yield env


def run_hooks(env: Path, catalog: Path) -> list[subprocess.CompletedProcess[str]]:
    """Each hook of the catalog's config, as ``pre-commit run --all-files`` would."""
    _git(catalog, "add", "-A")
    staged = [f for f in _git(catalog, "ls-files", "-z").split("\0") if f]
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    environ["VIRTUAL_ENV"] = str(env)
    environ["PATH"] = f"{env / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
    results = []
    for hook in _template_hooks():
        matching = [
            f for f in staged if re.search(hook.files, f) and not re.search(hook.exclude, f)
        ]
        assert matching, f"{hook.id}: no staged file matches {hook.files!r}: it would be skipped"
        argv = [*shlex.split(hook.entry), *hook.args, *(matching if hook.pass_filenames else [])]
        executable = shutil.which(argv[0], path=environ["PATH"])
        assert executable == str(env / "bin" / argv[0]), executable
        results.append(
            subprocess.run(
                [executable, *argv[1:]],
                cwd=catalog,
                env=environ,
                capture_output=True,
                text=True,
                timeout=300,
            )
        )
    return results


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A new catalog repository made from the template, as its README says."""
    root = tmp_path / "catalog"
    shutil.copytree(TEMPLATE, root)
    _git(root, "init", "-q")
    return root


def test_the_hook_environment_lacks_the_example_migrations(hook_env: Path) -> None:
    probe = (
        "from importlib.metadata import entry_points;"
        "print(sorted(e.name for e in entry_points(group='reconciler.migrations')))"
    )
    out = subprocess.run(
        [str(hook_env / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.strip() == "[]"


def test_the_template_passes_its_own_pre_commit_hook(hook_env: Path, catalog: Path) -> None:
    [result] = run_hooks(hook_env, catalog)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        'python migration "ledger-backfill-order-totals" is declared by '
        "migrations-example/pyproject.toml (ledger-migrations) but not installed" in result.stdout
    )
    assert "catalog is valid: 1 warning(s)" in result.stdout


def test_the_hook_still_fails_a_migration_name_nobody_declares(
    hook_env: Path, catalog: Path
) -> None:
    version = catalog / "apps/ledger/versions/2.1.0/version.yaml"
    text = version.read_text()
    version.write_text(text.replace("ledger-backfill-order-totals", "ledger-backfill-order-total"))
    [result] = run_hooks(hook_env, catalog)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'python migration "ledger-backfill-order-total" is not registered' in result.stdout
