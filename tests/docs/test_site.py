"""The documentation site builds, and what users read never points at a file they lack.

`mkdocs build --strict` fails on a broken link, a missing anchor or a page left out of
the navigation, so running it here keeps the site from rotting. Users do not have the
product specification, so neither the docs nor ``--help`` may send them to "SPEC".
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_LIMIT = 12 * 1024


def _cli_reference() -> str:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "docs/hooks/cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = module.reference()
    return text


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    cli_page = (tmp_path / "site" / "CLI" / "index.html").read_text()
    assert "reconciler rollout promote" in cli_page  # the generated reference is in


def test_the_cli_reference_lists_every_command() -> None:
    text = _cli_reference()
    for command in (
        "validate",
        "preview",
        "run",
        "status",
        "history",
        "rollout promote",
        "images scan",
    ):
        assert f"### `reconciler {command}`" in text, command


def test_user_docs_and_help_never_send_users_to_the_spec() -> None:
    pages = [ROOT / "README.md", ROOT / "bench/README.md"]
    pages += [p for p in (ROOT / "docs").glob("*.md") if p.name != "ARCHITECTURE.md"]
    for page in pages:
        found = re.findall(r".{0,40}\bSPEC\b.{0,40}", page.read_text())
        assert not found, f"{page.relative_to(ROOT)}: {found}"
    assert not re.search(r"\bSPEC\b", _cli_reference())


def test_the_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; the reference belongs in docs/"
    first = (ROOT / "README.md").read_text().split("```", 2)[1]
    assert [line.split("#")[0].strip() for line in first.strip().splitlines()[1:]] == [
        "make demo",
        "make test",
    ]
