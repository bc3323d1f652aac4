"""``run --once`` prints its pass as a table: -o name|wide and --no-headers like the others."""

from __future__ import annotations

import pytest

from reconciler.cli import main
from tests.daemon.conftest import World


def test_run_once_name_wide_and_no_headers(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.sandbox is not None
    argv = ["run", "--repo", world.repo.url, "--cluster", "prod", "--once"]
    argv += ["--kubeconfig", str(world.sandbox.kubeconfig)]
    assert main([*argv, "-o", "name"]) == 0
    assert capsys.readouterr().out == "api\nweb\n"
    assert main([*argv, "-o", "wide", "--no-headers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:6] for line in lines[:2]] == [
        ["api", "podinfo", "6.6.0", "6.6.0", "Ready", "range:>=6.0.0"],
        ["web", "podinfo", "6.5.0", "6.5.0", "Ready", "channel:stable"],
    ]
    assert lines[2].startswith("pass at ")
