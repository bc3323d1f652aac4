"""``reconciler sandbox``: serves until SIGINT/SIGTERM, writes a kubeconfig, exits 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client, config

from reconciler.cli import main
from reconciler.model.errors import UsageError
from reconciler.sandbox.runner import COLLECTOR_THRESHOLDS


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "reconciler", "sandbox", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_signal(tmp_path: Path, sig: signal.Signals) -> None:
    kubeconfig = tmp_path / "kc" / "config"
    proc = start("--port", "0", "--write-kubeconfig", str(kubeconfig))
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        hint = proc.stdout.readline()
        assert first.startswith("sandbox API server listening on http://127.0.0.1:")
        assert f"kubectl --kubeconfig {kubeconfig} get ns" in hint
        url = first.rsplit(" ", 1)[1].strip()
        with urllib.request.urlopen(url + "/version", timeout=10) as response:
            assert json.load(response)["major"] == "1"
        core = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        assert "default" in [n.metadata.name for n in core.list_namespace().items]
    finally:
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0


# The command's usage errors, in process through ``cli.main`` (what ``python -m
# reconciler`` runs): a Python start-up each only tested the same wiring again, which
# test_a_bad_timing_option_exits_2_from_the_command checks once through a real process.


def test_port_in_use_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["sandbox", "--port", str(port)])
    assert code == 2 and f"127.0.0.1:{port}" in capsys.readouterr().err


def test_bad_port_and_unwritable_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox", "--port", "70000"]) == 2
    assert "70000" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["sandbox", "--write-kubeconfig", str(blocker / "config")]) == 2
    out, err = capsys.readouterr()
    assert "kubeconfig" in err
    assert "listening" not in out  # it never said it was serving


def test_timing_options_reach_the_simulated_cluster() -> None:
    from reconciler.cli import build_parser
    from reconciler.commands.sandbox import timing_of

    args = build_parser().parse_args(
        [
            "sandbox",
            "--controller-delay",
            "0.5",
            "--pod-start-delay",
            "2",
            "--job-duration",
            "3",
            "--ready-delay",
            "app:2.*=5",
            "--nodes",
            "5",
            "--job-backoff",
            "0",
            "--cron-minute",
            "0.5",
            "--pod-grace-scale",
            "0.01",
        ]
    )
    timing = timing_of(args)
    assert (timing.controller_delay, timing.start, timing.run, timing.nodes) == (0.5, 2, 3, 5)
    assert timing.job_backoff == 0  # retries at once
    assert timing.cron_minute == 0.5
    assert timing.grace(30) == 0.3
    # without the option a Job's retries wait as on a cluster
    assert timing_of(build_parser().parse_args(["sandbox"])).job_backoff == 10
    # nor a deleted pod's grace period: the real one
    assert timing_of(build_parser().parse_args(["sandbox"])).grace(30) == 30
    assert timing.ready_delay(["app:2.1", "sidecar:1"]) == 5
    assert timing.ready_delay(["app:1.0"]) == 0


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--ready-delay", "nodelay"], "GLOB=SECONDS"),
        (["--ready-delay", "app:*=soon"], "is not a number"),
        (["--nodes", "0"], "--nodes must be at least 1"),
        (["--pod-start-delay", "-1"], "--pod-start-delay must not be negative"),
        (["--job-backoff", "-1"], "--job-backoff must not be negative"),
        (["--pod-grace-scale", "-1"], "--pod-grace-scale must not be negative"),
        (["--cron-minute", "0"], "--cron-minute must be more than 0"),
    ],
)
def test_bad_timing_options_are_usage_errors(option: list[str], message: str) -> None:
    """The options' checks, in process: a Python start-up each only tested the same wiring
    again (the test below runs one through the real command)."""
    from reconciler.cli import build_parser
    from reconciler.commands.sandbox import timing_of

    with pytest.raises(UsageError, match=r"^sandbox: ") as raised:
        timing_of(build_parser().parse_args(["sandbox", *option]))
    assert message in str(raised.value)


# what ``reconciler sandbox`` must not import: Git and the catalog's sources (the CLI's
# ``--repo``/``--cluster`` defaults need them, the sandbox has neither option); every
# benchmark and many tests start a sandbox process, which paid 0.15 s of CPU for them
NOT_FOR_THE_SANDBOX = ("git", "reconciler.source")
IMPORTS_OF = """\
import json, sys
from reconciler.cli import main
code = main(["sandbox", *sys.argv[1:]])
print(json.dumps([m for m in {names!r} if m in sys.modules]), file=sys.stderr)
sys.exit(code)
"""


def test_a_bad_timing_option_exits_2_from_the_command() -> None:
    """Through ``cli.main`` as ``python -m reconciler`` calls it, in a fresh interpreter
    that then says which of the modules the sandbox has no use for it imported."""
    script = IMPORTS_OF.format(names=NOT_FOR_THE_SANDBOX)
    done = subprocess.run(
        [sys.executable, "-c", script, "--nodes", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and "--nodes must be at least 1" in done.stderr
    imported = json.loads(done.stderr.strip().splitlines()[-1])
    assert imported == [], f"reconciler sandbox imported {imported}"


def test_the_standalone_sandbox_tunes_the_collector_of_its_own_process() -> None:
    """``tune_collector`` (what ``reconciler sandbox`` calls once it listens) freezes
    what starting built and raises the young generation's threshold; checked in a
    process of its own, since the collector's settings are process-wide."""
    code = (
        "import gc, json\n"
        "from reconciler.sandbox.runner import tune_collector\n"
        "before = gc.get_threshold()\n"
        "tune_collector()\n"
        "print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, after, frozen = json.loads(out.stdout)
    assert tuple(after) == COLLECTOR_THRESHOLDS != tuple(before)
    assert after[0] > before[0] and frozen > 0
