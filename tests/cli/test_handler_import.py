"""A command's module is imported with the cyclic collector paused, then it runs as before."""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from reconciler import cli


@pytest.fixture
def collector_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether the collector ran while each command module was imported; the
    collector's state as the test found it is restored after it."""
    seen: list[bool] = []
    real = importlib.import_module

    def recording(name: str, package: str | None = None) -> ModuleType:
        seen.append(gc.isenabled())
        return real(name, package)

    monkeypatch.setattr(cli.importlib, "import_module", recording)
    was = gc.isenabled()
    try:
        yield seen
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


def test_the_collector_is_paused_for_the_import_and_runs_again_after(
    collector_seen: list[bool],
) -> None:
    gc.enable()
    handler = cli._handler("sandbox")
    assert handler.__name__ == "sandbox_command"
    assert collector_seen and not any(collector_seen)
    assert gc.isenabled()


def test_a_collector_stopped_before_stays_stopped(collector_seen: list[bool]) -> None:
    gc.disable()
    cli._handler("validate")
    assert collector_seen and not any(collector_seen)
    assert not gc.isenabled()


def test_a_failed_import_still_restarts_the_collector(
    collector_seen: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "validate", "no_such_module:main")
    gc.enable()
    with pytest.raises(ModuleNotFoundError):
        cli._handler("validate")
    assert gc.isenabled()


def test_the_daemon_starts_without_the_status_page_renderer() -> None:
    """``reconciler run`` imports the status page's HTML renderer when /ui is first
    drawn, not at start (0.05 s of CPU at every start of a daemon nobody browses).
    In a fresh interpreter: this one has imported everything already."""
    code = (
        "import sys\n"
        "from reconciler import cli\n"
        "cli._handler('run')\n"
        "import reconciler.daemon.service\n"
        "print(sorted(m for m in ('reconciler.status.report', 'reconciler.daemon.status_site')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
