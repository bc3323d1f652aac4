"""``apply --wait``: wait for health after the pass, like ``flux reconcile`` / ``argocd app wait``."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.sandbox.testing import running_sandbox
from tests.factories import write_catalog


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def crashing() -> Iterator[Any]:
    """A sandbox where podinfo 6.5.0 (the ``web`` instance) crash-loops."""
    with running_sandbox(fail_images=["*podinfo:6.5.0"]) as handle:
        yield handle


def apply(catalog: Path, sandbox: Any, *extra: str) -> int:
    argv = ["apply", str(catalog), "--cluster", "prod", "--kubeconfig", str(sandbox.kubeconfig)]
    return main([*argv, *extra])


def test_wait_reports_each_instance_healthy(
    tmp_path: Path, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert apply(write_catalog(tmp_path), sandbox, "--wait", "--timeout", "60s") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[-3] == "apply: 2 instances; objects: 5 created"  # the pass first, then health
    assert re.fullmatch(r"api: Ready \(2 objects healthy, [0-9.]+s\)", lines[-2]), out
    assert re.fullmatch(r"web: Ready \(1 object healthy, [0-9.]+s\)", lines[-1]), out
    assert "\r" not in out  # not a terminal: final lines only


def test_an_unhealthy_instance_fails_the_wait_and_others_still_pass(
    tmp_path: Path, crashing: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = apply(write_catalog(tmp_path), crashing, "--wait", "--timeout", "1s", "-o", "json")
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)  # stdout stays a JSON document; progress is on stderr
    assert re.search(r"^api: ", captured.err, re.M)  # (Ready unless the machine is very slow)
    web = next(line for line in captured.err.splitlines() if line.startswith("web: "))
    assert "Deployment/web/web" in web and "Ready" not in web
    # without --wait the same pass succeeds: applying worked, health is not its business
    assert apply(write_catalog(tmp_path), crashing) == 0


def test_progress_line_per_instance_on_a_terminal(
    tmp_path: Path, sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    screen = Terminal()
    monkeypatch.setattr("sys.stdout", screen)
    assert apply(write_catalog(tmp_path), sandbox, "--wait") == 0
    out = screen.getvalue()
    assert "\r\x1b[K[1/2] api: waiting, " in out  # redrawn in place while it waits
    assert re.search(r"\r\x1b\[K\[2/2\] web: Ready \(1 object healthy", out)
