"""``reconciler demo``'s narration: no log lines in the story, hints that run as printed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reconciler.commands.demo import closing_hints, command_name, demo_logs
from reconciler.source.scaffold import CatalogRepo


def _hints(tmp_path: Path, *, serve: bool, program: str) -> str:
    repo = CatalogRepo(tmp_path / "catalog", tmp_path / "catalog.git")
    return closing_hints(repo, tmp_path, tmp_path / "kubeconfig", serve=serve, program=program)


def test_serve_advice_only_without_serve(tmp_path: Path) -> None:
    plain = _hints(tmp_path, serve=False, program="reconciler")
    assert "reconciler demo --serve" in plain
    served = _hints(tmp_path, serve=True, program="reconciler")
    assert "--serve" not in served
    assert "keeps serving" in served and f"--kubeconfig {tmp_path / 'kubeconfig'}" in served


def test_hints_name_the_program_that_runs(tmp_path: Path) -> None:
    text = _hints(tmp_path, serve=False, program=".venv/bin/reconciler")
    commands = [line.strip() for line in text.splitlines() if "--cluster prod" in line]
    assert commands and all(c.startswith(".venv/bin/reconciler ") for c in commands)
    assert "source .venv/bin/activate" in text
    assert "resolve --repo" in text  # the current spelling, not the deprecated positional
    on_path = _hints(tmp_path, serve=False, program="reconciler")
    assert "activate" not in on_path


def test_command_name_is_bare_only_when_path_finds_the_same_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / ".venv" / "bin" / "reconciler"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    assert command_name(str(script), path_lookup="") == ".venv/bin/reconciler"
    assert command_name(str(script), path_lookup="/usr/bin/reconciler") == ".venv/bin/reconciler"
    assert command_name(str(script), path_lookup=str(script)) == "reconciler"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert command_name(str(script), path_lookup="") == str(script)


def test_daemon_logs_go_to_a_file_during_the_story(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    before = root.handlers[:]
    log_file = tmp_path / "demo.log"
    with demo_logs(log_file, explicit=False) as shown:
        assert shown == log_file
        logging.getLogger("reconciler.daemon").warning("status-page Stalled (CatalogInvalid)")
        print("  3. the story goes on")
    out, err = capfd.readouterr()
    assert "Stalled" not in out + err and "the story goes on" in out
    assert "status-page Stalled (CatalogInvalid)" in log_file.read_text()
    assert root.handlers == before


def test_an_explicit_log_level_keeps_logs_where_asked(tmp_path: Path) -> None:
    with demo_logs(tmp_path / "demo.log", explicit=True) as shown:
        assert shown is None
    assert not (tmp_path / "demo.log").exists()
