"""Completion of catalog names in a real bash: clusters, instances, apps, channels.

``--cluster <TAB>`` used to complete file names. The script asks ``reconciler
__complete`` (through the same ``reconciler`` the line runs) for the catalog's names.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.cli import build_parser, main
from tests.cli.test_completion import BASH, script, shim  # noqa: F401
from tests.factories import write_catalog

pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_catalog(tmp_path_factory.mktemp("catalog"))
    (root / "clusters" / "staging" / "instances").mkdir(parents=True)
    (root / "clusters" / "staging" / "instances" / "docs.yaml").write_text("kind: Instance\n")
    return root


def complete(
    script: Path,  # noqa: F811
    env: dict[str, str],
    cwd: Path,
    *words: str,
) -> list[str]:
    line = " ".join(f"'{w}'" for w in ("reconciler", *words))
    program = (
        f"source '{script}'\nCOMP_WORDS=({line})\nCOMP_CWORD={len(words)}\n_reconciler\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [str(BASH), "-c", program], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


@pytest.mark.slow  # each TAB below starts a Python for `reconciler __complete`
def test_cluster_instance_app_and_channel_names_complete_from_the_catalog(
    script: Path,  # noqa: F811
    shim: dict[str, str],  # noqa: F811
    catalog: Path,
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in shim.items() if k not in ("RECONCILER_REPO", "RECONCILER_CLUSTER")}
    assert complete(script, env, catalog, "status", "--cluster", "") == ["prod", "staging"]
    assert complete(script, env, catalog, "status", "--cluster", "st") == ["staging"]
    promote = complete(script, env, catalog, "rollout", "promote", "--cluster", "prod", "")
    assert promote == ["api", "web"]
    assert complete(script, env, catalog, "history", "--cluster", "staging", "") == ["docs"]
    assert complete(script, env, catalog, "render", "--instance", "") == ["api", "docs", "web"]
    assert complete(script, env, catalog, "channel", "set", "") == ["podinfo"]
    assert complete(script, env, catalog, "channel", "set", "podinfo", "") == ["fast", "stable"]
    # --repo on the line names the catalog, wherever the shell is
    elsewhere = complete(script, env, tmp_path, "status", "--repo", str(catalog), "--cluster", "")
    assert elsewhere == ["prod", "staging"]
    assert complete(script, env, tmp_path, "status", "--cluster", "") == []  # no catalog here


def test_the_helper_prints_names_only_and_never_fails(
    capsys: pytest.CaptureFixture[str], catalog: Path, tmp_path: Path
) -> None:
    assert main(["__complete", "apps", "--repo", str(catalog)]) == 0
    assert capsys.readouterr().out == "podinfo\n"
    assert main(["__complete", "clusters", "--repo", "https://example.invalid/c.git"]) == 0
    assert main(["__complete", "channels", "--repo", str(tmp_path / "missing")]) == 0
    (tmp_path / "apps" / "x").mkdir(parents=True)
    (tmp_path / "apps" / "x" / "channels.yaml").write_text("channels: [unclosed\n")
    assert main(["__complete", "channels", "--repo", str(tmp_path)]) == 0
    assert capsys.readouterr() == ("", "")
    assert "__complete" not in build_parser().format_help()  # hidden from people
