"""Benchmark: the daemon with 500 managed instances on the sandbox.

Measured in one run (the sandbox runs in its own process, so CPU figures are the
reconciler's alone; API requests come from the sandbox's request log; Git
operations are counted at GitPython's command layer):
  * the cost of a no-op pass (CPU seconds, API requests by verb, git commands),
    against a pass that naively re-applies every object with server-side apply
    (what a reconciler without a live-state comparison does) in the same run;
  * commit-to-applied latency of a one-instance change, via webhook and via polling;
  * peak memory (max RSS) of the process.

Run: ``.venv/bin/python bench/daemon.py [--instances 500] [--interval 2]``
"""

# ruff: noqa: E402  (imports must follow the sys.path guard below)
from __future__ import annotations

import sys
from pathlib import Path

# bench/git.py (named by the issue) would shadow GitPython's ``git`` package for
# scripts run from this folder: drop the folder from the import path first.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import hashlib
import hmac
import json
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import git

from reconciler.daemon.loop import Daemon, DaemonSettings
from reconciler.daemon.service import Service
from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.source.scaffold import IDENTITY, CatalogRepo, commit_file, create_catalog_repo

SECRET = "bench-secret"
APP = """\
apiVersion: reconciler/v1
kind: App
name: web
"""
CHANNELS = "apiVersion: reconciler/v1\nkind: Channels\napp: web\nchannels:\n  stable: 1.0.0\n"
VERSION = """\
apiVersion: reconciler/v1
kind: AppVersion
app: web
version: {v}
images: {{web: "registry.example.com/web:{v}"}}
parameters: {{replicas: {{default: 2}}, message: {{default: hello}}}}
"""
MANIFESTS = """\
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
INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: {name}
app: web
version: 1.0.0
namespace: ns{ns}
parameters: {{message: "{message}"}}
"""


def generate(root: Path, instances: int) -> None:
    files = {"apps/web/app.yaml": APP, "apps/web/channels.yaml": CHANNELS}
    for v in ("1.0.0", "1.1.0"):
        files[f"apps/web/versions/{v}/version.yaml"] = VERSION.format(v=v)
        files[f"apps/web/versions/{v}/manifests/app.yaml"] = MANIFESTS
    for i in range(instances):
        name = f"web{i:04d}"
        files[f"clusters/bench/instances/{name}.yaml"] = INSTANCE.format(
            name=name, ns=i % 25, message="hello"
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@contextmanager
def sandbox_process(workdir: Path) -> Iterator[tuple[str, Path]]:
    kubeconfig = workdir / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "sandbox",
            "--controller-delay",
            "0.05",
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
        proc.wait(timeout=10)


def requests_by_verb(url: str, reset: bool = False) -> Counter[str]:
    with urllib.request.urlopen(f"{url}/sandbox/requests") as response:
        data = json.loads(response.read())
    if reset:
        urllib.request.urlopen(
            urllib.request.Request(f"{url}/sandbox/requests", method="DELETE")
        ).close()
    items = data.get("items", data) if isinstance(data, dict) else data
    return Counter(str(e.get("verb", e.get("method"))) for e in items)


class GitCounter:
    """Counts git commands run through GitPython (the only way the package runs git)."""

    def __init__(self) -> None:
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


def wait_for(check: Callable[[], bool], timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if check():
            return time.perf_counter() - start
        time.sleep(0.02)
    raise SystemExit("timed out waiting for the change to be applied")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument(
        "--interval", type=float, default=2.0, help="poll interval for the latency run"
    )
    args = parser.parse_args()
    for key, value in IDENTITY.items():
        os.environ.setdefault(key, value)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate(work / "template", args.instances)
        repo = create_catalog_repo(work / "template", work / "repos")
        gits = GitCounter()
        with (
            sandbox_process(work) as (url, kubeconfig),
            KubeClient.connect(str(kubeconfig)) as client,
        ):
            settings = DaemonSettings(
                repo=repo.url,
                cluster="bench",
                health_timeout=120.0,
                cache_dir=work / "cache",
                interval=args.interval,
                jitter=0.0,
                drift_interval=3600.0,
                metrics_address="127.0.0.1:0",
                webhook_secret=SECRET,
            )
            daemon = Daemon(settings, client)
            first, cpu, wall = measure(daemon.run_pass)
            assert first.ok, first.error
            total = len(first.report.changes.entries)
            print(f"instances: {args.instances} ({total} objects incl. namespaces)")
            print(
                f"first pass (install)      {wall:6.2f} s wall  {cpu:6.2f} s CPU   "
                f"{len(first.commits)} status commits"
            )
            requests_by_verb(url, reset=True)
            git_before = gits.count
            noop, cpu, wall = measure(daemon.run_pass)
            noop_requests = requests_by_verb(url, reset=True)
            git_ops = gits.count - git_before
            assert noop.ok and not noop.commits
            print(
                f"no-op pass                {wall:6.2f} s wall  {cpu:6.2f} s CPU   "
                f"requests: {sum(noop_requests.values())} ({fmt(noop_requests)}); "
                f"git commands: {git_ops}"
            )
            plans = first.report.plans
            objects = [obj for plan in plans for obj in plan.objects]

            def naive() -> None:
                for obj in objects:
                    client.apply(obj)

            _, naive_cpu, naive_wall = measure(naive)
            naive_requests = requests_by_verb(url, reset=True)
            print(
                f"naive re-apply of all     {naive_wall:6.2f} s wall  {naive_cpu:6.2f} s CPU   "
                f"requests: {sum(naive_requests.values())} ({fmt(naive_requests)})"
            )
            print(
                f"no-op / naive:  CPU {cpu / naive_cpu:.2f}x   requests "
                f"{sum(noop_requests.values()) / max(1, sum(naive_requests.values())):.3f}x"
            )
            latency(repo, daemon, client, args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS)     {peak:.0f} MiB")


def latency(
    repo: CatalogRepo, daemon: Daemon, client: KubeClient, args: argparse.Namespace
) -> None:
    service = Service(daemon, install_signals=False)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        time.sleep(1.0)
        for attempt, via in enumerate(("webhook", "poll")):
            name = f"web{attempt:04d}"
            message = f"changed via {via}"
            ns = attempt % 25
            text = INSTANCE.format(name=name, ns=ns, message=message)
            ref = ObjectRef("v1", "ConfigMap", f"ns{ns}", name)
            start = time.perf_counter()
            commit_file(repo, f"clusters/bench/instances/{name}.yaml", text, f"{name}: {message}")
            if via == "webhook":
                body = b'{"ref": "refs/heads/main"}'
                sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                request = urllib.request.Request(
                    f"http://127.0.0.1:{service.http_port}/hooks/generic",
                    data=body,
                    headers={"X-Reconciler-Signature": sig, "Content-Type": "application/json"},
                )
                urllib.request.urlopen(request, timeout=10).close()

            def applied(ref: ObjectRef = ref, message: str = message) -> bool:
                obj = client.get(ref)
                return obj is not None and obj.get("data", {}).get("message") == message

            wait_for(applied)
            elapsed = time.perf_counter() - start
            extra = f" (poll interval {args.interval:g}s)" if via == "poll" else ""
            print(f"commit-to-applied via {via:8s} {elapsed:6.2f} s{extra}")
    finally:
        service.shutdown("benchmark done")
        thread.join(timeout=60)


if __name__ == "__main__":
    main()
