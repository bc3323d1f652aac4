"""``reconciler completion``: the bash script loads in a real bash and completes from the parser."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli import COMMANDS, build_parser
from reconciler.commands.completion import bash_script, command_tree, fish_script, zsh_script
from tests.conftest import REPO_ROOT

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH with a ``reconciler`` that runs this checkout, as the console script would."""
    bin_dir = tmp_path_factory.mktemp("bin")
    script = bin_dir / "reconciler"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m reconciler "$@"\n')
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bash script, generated once (each completion below runs a bash, not Python)."""
    path = tmp_path_factory.mktemp("completion") / "reconciler.bash"
    path.write_text(bash_script(list(command_tree(build_parser()))))
    return path


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` (the word being typed, maybe empty)."""
    line = " ".join(f"'{w}'" for w in ("reconciler", *words))
    program = (
        f"source '{script}'\n"
        f"COMP_WORDS=({line})\n"
        f"COMP_CWORD={len(words)}\n"
        "_reconciler\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run([str(BASH), "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_bash_script_loads_and_registers(shim: dict[str, str]) -> None:
    done = subprocess.run(
        [str(BASH), "-c", "source <(reconciler completion bash); complete -p reconciler"],
        env=shim,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "-F _reconciler reconciler" in done.stdout


def test_bash_completes_commands_options_and_values(script: Path) -> None:
    assert set(complete(script, "")) >= {"validate", "diff", "status", "rollout", "completion"}
    assert complete(script, "ro") == ["rollout"]
    assert complete(script, "rollout", "") == ["promote", "pause", "resume", "status", "analyze"]
    assert complete(script, "rollout", "st") == ["status"]
    assert complete(script, "completion", "") == ["bash", "zsh", "fish"]
    assert "--no-headers" in complete(script, "status", "--no")
    assert complete(script, "status", "-o", "") == ["text", "wide", "name", "json", "yaml"]
    assert complete(script, "diff", "-o", "y") == ["yaml"]
    # options and their values before the command do not confuse the command path
    assert complete(script, "--log-level", "debug", "--kubeconfig", "kc", "ap") == ["apply"]
    assert complete(script, "--log-level", "") == ["debug", "info", "warning", "error"]
    assert "--wait" in complete(script, "--no-color", "apply", ".", "--w")


def test_every_command_is_in_every_script() -> None:
    """Generated from the parser: a command registered in cli.py completes everywhere."""
    tree = list(command_tree(build_parser()))
    paths = {c.path for c in tree}
    public = {name for name in COMMANDS if not name.startswith("__")}  # __complete: hidden
    assert public <= paths and not any(p.startswith("__") for p in paths)
    bash, zsh, fish = bash_script(tree), zsh_script(tree), fish_script(tree)
    assert "bashcompinit" in zsh and bash in zsh
    for name in public:
        last = name.split()[-1]
        assert f" {last}" in bash or f'"{last}' in bash, name
        assert f"-a {last} " in fish, name
    assert "-l kubeconfig -r -F" in fish
    assert "-s o -x -a 'text json yaml'" in fish
