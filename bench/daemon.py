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
# scripts run from this folder: the folder goes last on the import path (benchkit).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import argparse
import os
import resource
import tempfile
import threading
import time

from benchkit import (
    SECRET,
    WEB_MANIFESTS,
    GitCounter,
    create_own_namespace,
    figure,
    fmt,
    measure,
    requests_by_verb,
    sandbox_process,
    send_webhook,
    wait_for,
)

from reconciler.daemon.loop import Daemon, DaemonSettings
from reconciler.daemon.service import Service
from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.source.scaffold import IDENTITY, CatalogRepo, commit_file, create_catalog_repo

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
        files[f"apps/web/versions/{v}/manifests/app.yaml"] = WEB_MANIFESTS
    for i in range(instances):
        name = f"web{i:04d}"
        files[f"clusters/bench/instances/{name}.yaml"] = INSTANCE.format(
            name=name, ns=i % 25, message="hello"
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


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
            sandbox_process(work, "--controller-delay", "0.05", "--pod-grace-scale", "0.01") as (
                url,
                kubeconfig,
            ),
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
            # the install's Events are sent in the background (kube.events.EventQueue):
            # sent during the no-op pass, they counted as its requests and its CPU
            daemon.flush_events(600.0)
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
            lists = noop_requests["list"]
            kinds = len({(obj.get("apiVersion"), obj.get("kind")) for obj in objects})
            figure(
                f"no-op pass without the watch cache (--once), {args.instances} instances",
                f"{cpu:.2f} s CPU, {sum(noop_requests.values())} requests ({lists} lists)",
                "one list per kind, 0 writes",
                f"naive re-apply {naive_cpu:.2f} s CPU, {sum(naive_requests.values())} requests",
                sum(noop_requests.values()) == lists <= kinds,
            )
            latency(repo, daemon, client, args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS)     {peak:.0f} MiB")


def latency(
    repo: CatalogRepo, daemon: Daemon, client: KubeClient, args: argparse.Namespace
) -> None:
    create_own_namespace(client, daemon.settings.leader_namespace)
    service = Service(daemon, install_signals=False)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        # the service binds its port as it starts: wait for that, not a fixed time
        wait_for(lambda: service.http_port != 0, what="the service's HTTP port")
        for attempt, via in enumerate(("webhook", "poll")):
            name = f"web{attempt:04d}"
            message = f"changed via {via}"
            ns = attempt % 25
            text = INSTANCE.format(name=name, ns=ns, message=message)
            ref = ObjectRef("v1", "ConfigMap", f"ns{ns}", name)
            start = time.perf_counter()
            commit_file(repo, f"clusters/bench/instances/{name}.yaml", text, f"{name}: {message}")
            if via == "webhook":
                send_webhook(service.http_port)

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
