"""``make test-packages``: the Debian packages the tests run, installed by one apt-get.

On a fresh machine ``make -j`` once ran an apt-get per package side by side, and the
second died on dpkg's lock, failing ``make test`` before a test ran. These run the real
Makefile with stand-ins for ``apt-get`` and ``id`` on PATH: the stand-in records each
call, and fails an install that names a package in ``FAIL_PACKAGES``, as apt-get does
for a package it cannot find.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
APT = ["-o", "DPkg::Lock::Timeout=600"]
INSTALL = [*APT, "install", "-q", "-y", "--no-install-recommends"]

pytestmark = pytest.mark.skipif(MAKE is None, reason="no make on PATH")


@dataclass
class Machine:
    """A PATH with stand-ins for apt-get and id, and the binaries the Makefile looks for."""

    bin: Path
    calls: Path
    present: Path
    missing: Path

    def make(
        self, *overrides: str, uid: int = 0, fail: str = ""
    ) -> subprocess.CompletedProcess[str]:
        assert MAKE is not None
        env = {
            "PATH": str(self.bin),
            "FAKE_UID": str(uid),
            "FAIL_PACKAGES": fail,
            "HOME": os.environ.get("HOME", "/"),
        }
        return subprocess.run(
            [MAKE, "--no-print-directory", "-C", str(ROOT), "test-packages", *overrides],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def apt_calls(self) -> list[list[str]]:
        if not self.calls.exists():
            return []
        return [line.split() for line in self.calls.read_text().splitlines()]


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    (bin_dir / "apt-get").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'for arg in "$@"; do for bad in $FAIL_PACKAGES; do\n'
        '  if [ "$arg" = "$bad" ]; then echo "E: Unable to locate package $bad" >&2; exit 100; fi\n'
        "done; done\n"
    )
    (bin_dir / "id").write_text('#!/bin/sh\necho "$FAKE_UID"\n')
    for name in ("apt-get", "id"):
        (bin_dir / name).chmod(0o755)
    tr = shutil.which("tr")
    assert tr is not None
    (bin_dir / "tr").symlink_to(tr)
    present = tmp_path / "present"
    present.write_text("#!/bin/sh\n")
    present.chmod(0o755)
    return Machine(bin_dir, calls, present, tmp_path / "missing")


def binaries(machine: Machine, *, registry: bool, prometheus: bool, chromium: bool) -> list[str]:
    """Make overrides pointing each binary at a file that exists, or at one that does not."""
    pick = {True: machine.present, False: machine.missing}
    return [
        f"REGISTRY_BINARY={pick[registry]}",
        f"PROMETHEUS_BINARY={pick[prometheus]}",
        f"CHROMIUM_BINARY={pick[chromium]}",
    ]


def test_a_machine_that_has_them_all_runs_no_apt_get(machine: Machine) -> None:
    done = machine.make(*binaries(machine, registry=True, prometheus=True, chromium=True))
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == []


def test_everything_missing_is_one_apt_get_without_recommended_packages(machine: Machine) -> None:
    done = machine.make(*binaries(machine, registry=False, prometheus=False, chromium=False))
    assert done.returncode == 0, done.stderr
    packages = ["docker-registry", "prometheus", "chromium", "fonts-liberation"]
    assert machine.apt_calls() == [[*INSTALL, *packages]]


def test_only_what_is_missing_is_installed(machine: Machine) -> None:
    done = machine.make(*binaries(machine, registry=True, prometheus=False, chromium=True))
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == [[*INSTALL, "prometheus"]]


def test_a_browser_apt_cannot_install_still_leaves_the_servers_installed(
    machine: Machine,
) -> None:
    """A distribution without Debian's chromium: the registry and Prometheus still come."""
    overrides = binaries(machine, registry=False, prometheus=False, chromium=False)
    done = machine.make(*overrides, "CHROMIUM_PACKAGES=no-such-browser", fail="no-such-browser")
    assert done.returncode == 0, done.stderr
    assert "could not install no-such-browser: installing only what the tests need" in done.stderr
    every = [*INSTALL, "docker-registry", "prometheus", "no-such-browser"]
    assert machine.apt_calls() == [
        every,
        [*APT, "update"],
        every,
        [*INSTALL, "docker-registry", "prometheus"],
    ]


def test_a_server_apt_cannot_install_fails_make_test(machine: Machine) -> None:
    done = machine.make(
        *binaries(machine, registry=False, prometheus=True, chromium=True), fail="docker-registry"
    )
    assert done.returncode != 0
    assert [*INSTALL, "docker-registry"] in machine.apt_calls()


def test_without_root_a_missing_server_fails_with_the_command_that_installs_it(
    machine: Machine,
) -> None:
    done = machine.make(
        *binaries(machine, registry=True, prometheus=False, chromium=True), uid=1000
    )
    assert done.returncode != 0
    assert (
        "not installed: prometheus, which the tests need: install it as root with "
        "apt-get install -y --no-install-recommends prometheus"
    ) in done.stderr
    assert machine.apt_calls() == []


def test_without_root_a_missing_browser_is_said_and_the_run_goes_on(machine: Machine) -> None:
    done = machine.make(
        *binaries(machine, registry=True, prometheus=True, chromium=False), uid=1000
    )
    assert done.returncode == 0, done.stderr
    assert "not installed: chromium fonts-liberation (needs root and apt-get; its tests skip)" in (
        done.stderr
    )
    assert machine.apt_calls() == []
