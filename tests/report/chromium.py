"""Debian's ``chromium``, headless, for the status page tests: found, or installed once.

Choice: when ``/usr/bin/chromium`` is missing and this process is root with
``apt-get`` on PATH, the session installs the package (``apt-get install -y
chromium``, one ``apt-get update`` retry), under a file lock so parallel
workers install it once. A failed install as root fails the tests (they must
not vanish silently); without root or apt the tests skip and say why.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_TIMEOUT = 900.0
RUN_TIMEOUT = 90.0


def ensure_chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        pytest.skip("no /usr/bin/chromium, and no apt-get to install Debian's chromium package")
    if os.geteuid() != 0:
        pytest.skip("no /usr/bin/chromium; run as root or `apt-get install -y chromium` first")
    lock = Path(tempfile.gettempdir()) / "reconciler-tests-chromium.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        if not CHROMIUM.exists():
            _apt_install()
    return CHROMIUM


def _apt_install() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "chromium"]
    proc = subprocess.run(install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    if proc.returncode != 0:  # a fresh container has no package lists yet
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=INSTALL_TIMEOUT)
        proc = subprocess.run(
            install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
    if proc.returncode != 0 or not CHROMIUM.exists():
        pytest.fail(f"apt-get install -y chromium failed: {proc.stderr[-2000:]}")


def headless(chromium: Path, profile: Path, url: str, *args: str) -> str:
    """Run headless Chromium on ``url`` with ``args``; its stdout (the DOM with --dump-dom).

    ``--no-sandbox``: Chromium's sandbox refuses to run as root, as tests in a
    container do; the pages hold no script and a Content Security Policy anyway.
    """
    command = [
        str(chromium),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--window-size=1280,900",
        *args,
        url,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout
