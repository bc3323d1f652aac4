"""Helpers the daemon benchmarks share: the sandbox in its own process, request and git counts.

The sandbox runs as ``reconciler sandbox`` in a child process, so the CPU the
benchmark reports is the reconciler's alone; API requests come from the sandbox's
request log (``/sandbox/requests``); git commands are counted at GitPython's
command layer (the only way the package runs git); a webhook is a signed POST to
the daemon's ``/hooks/generic``, as a Git host would send it.

Scripts in this folder import it after moving the folder to the *end* of
``sys.path``: bench/git.py must not shadow GitPython's ``git`` package.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

# GitPython and the kubernetes client are imported where they are used: bench/scale.py's
# parent process, which only starts a child per size, needs neither
if TYPE_CHECKING:
    from reconciler.kube import KubeClient

SECRET = "bench-secret"
# The ``web`` app of the daemon benchmarks: three objects per instance.
WEB_MANIFESTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: "${instance.name}"}
data: {message: "${params.message}", version: "${app.version}"}
---
apiVersion: v1
kind: Service
metadata: {name: "${instance.name}"}
spec:
  selector: {app: "${instance.name}"}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: "${instance.name}"}
spec:
  replicas: ${params.replicas}
  selector: {matchLabels: {app: "${instance.name}"}}
  template:
    metadata: {labels: {app: "${instance.name}"}}
    spec:
      containers: [{name: web, image: "${images.web}"}]
"""

STOP_GRACE = 120.0  # seconds a sandbox gets to stop on SIGTERM before SIGKILL


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """``git daemon`` serving the repositories under ``base`` (push enabled): its URL prefix.

    A Git host in a process of its own: with ``file://`` the server half of every fetch
    (``upload-pack``) is a child of the benchmark and its CPU would count as the
    reconciler's.
    """
    for _ in range(5):  # a free port can be taken between probe and bind
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                f"--base-path={base}",
                "--listen=127.0.0.1",
                f"--port={port}",
                str(base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        if proc.poll() is None and time.monotonic() < deadline:
            try:
                yield f"git://127.0.0.1:{port}/"
            finally:
                proc.terminate()
                proc.wait(timeout=10)
            return
        proc.kill()
        proc.wait(timeout=10)
    raise SystemExit("git daemon did not start")


@contextmanager
def sandbox_process(workdir: Path, *options: str) -> Iterator[tuple[str, Path]]:
    """``reconciler sandbox OPTIONS`` in a child process: (its URL, a kubeconfig for it)."""
    kubeconfig = workdir / "kubeconfig"
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "sandbox",
            *options,
            "--write-kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = line.rsplit(" ", 1)[-1].strip()
    try:
        yield url, kubeconfig
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            # a sandbox holding thousands of objects takes a while, longer on a busy machine
            proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            # the figures are already printed: a slow stop must not turn them into a crash
            proc.kill()
            proc.wait()


def create_own_namespace(client: KubeClient, namespace: str) -> None:
    """The namespace the daemon keeps its Lease in (``--leader-namespace``, by default
    ``reconciler-system``), as the deploy manifests create it before the daemon starts.

    Without it the service cannot take its single-writer Lease (404 on the namespace):
    it says so on every start and runs unguarded, which is not the production setup a
    bench measures.
    """
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


def request_log(url: str, reset: bool = False) -> list[dict[str, Any]]:
    """The sandbox's request log entries (then emptied when ``reset``)."""
    with urllib.request.urlopen(f"{url}/sandbox/requests") as response:
        data = json.loads(response.read())
    if reset:
        urllib.request.urlopen(
            urllib.request.Request(f"{url}/sandbox/requests", method="DELETE")
        ).close()
    items = data.get("items", data) if isinstance(data, dict) else data
    return list(items)


def request_log_pages(url: str, reset: bool = False, page: int = 5_000) -> Iterator[dict[str, Any]]:
    """The sandbox's request log entries, read a page at a time (then emptied when
    ``reset``): at 10,000 instances a step logs 50,000 requests, ~50 MiB decoded at
    once, which would count in the max RSS a benchmark measures in its own process."""
    offset = 0
    while True:
        with urllib.request.urlopen(f"{url}/sandbox/requests?offset={offset}&limit={page}") as r:
            items = json.loads(r.read()).get("items") or []
        if not items:
            break
        offset += len(items)
        yield from items
        del items
    if reset:
        urllib.request.urlopen(
            urllib.request.Request(f"{url}/sandbox/requests", method="DELETE")
        ).close()


def requests_by_verb(url: str, reset: bool = False) -> Counter[str]:
    return Counter(str(e.get("verb", e.get("method"))) for e in request_log(url, reset))


class GitCounter:
    """Counts git commands run through GitPython (the only way the package runs git)."""

    def __init__(self) -> None:
        import git

        self.count = 0
        original = git.cmd.Git.execute

        def counting(this: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(this, *args, **kwargs)

        git.cmd.Git.execute = counting  # type: ignore[method-assign]


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def fmt(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {verb}" for verb, n in sorted(counter.items())) or "none"


def wait_for(check: Callable[[], bool], timeout: float = 120.0, what: str = "the change") -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if check():
            return time.perf_counter() - start
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


def send_webhook(port: int, branch: str = "main", secret: str = SECRET) -> None:
    """A push notification for ``branch``, signed as ``--webhook-secret`` expects."""
    body = json.dumps({"ref": f"refs/heads/{branch}"}).encode()
    sig = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/hooks/generic",
        data=body,
        headers={"X-Reconciler-Signature": sig, "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()


def figure(name: str, value: str, goal: str, baseline: str, met: bool | None) -> None:
    """One line of the benchmarks' common table: ``figure | name | value | goal | baseline | met``.

    ``make bench`` collects these lines and ``bench/report.py`` turns them into the table
    in bench/README.md, so every figure there is one a bench printed in that run, beside
    its goal and the baseline measured in the same run. ``met`` None: a figure with no
    goal of its own (printed for the record).
    """
    verdict = "-" if met is None else "met" if met else "not met"
    print(f"figure | {name} | {value} | {goal} | {baseline} | {verdict}", flush=True)
