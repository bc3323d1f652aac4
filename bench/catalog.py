"""Benchmark: load + validate + resolve + render a large catalog vs. a bare YAML parse.

Generates 1,000 apps x 5 versions and a cluster with 1,000 instances, then in
the same run measures
  * baseline: parsing every one of those files with PyYAML's C loader, nothing else;
  * reconciler: ``load_catalog`` + ``check_catalog`` (schemas, names, channels,
    placeholders, resolution and rendering of every instance).
Prints both (best of N, CPU seconds) and the ratio; the goal is within 2x.

Then the daemon's reload after a commit (issue 12): the same catalog at 5,000
apps in a Git repository, one commit that touches one app (a new version and a
channel move) and one that edits one instance; for each, the incremental
reload (``git diff`` + ``reload_catalog``, as ``Daemon.catalog_at`` does it)
against a full ``load_catalog`` of the same tree in the same run. The two
results are compared; the goal is under 0.5 s.

Run: ``.venv/bin/python bench/catalog.py [--apps 1000,5000] [--repeat 3] [--reload-apps 5000]``
(``--apps``: the sizes measured, each against its own baseline; the goal holds at each.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from resource import RUSAGE_CHILDREN, RUSAGE_SELF, getrusage

import yaml

# Run as a script, this file's directory comes first on sys.path and bench/git.py
# would shadow GitPython's ``git`` package; drop the directory before importing.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

from benchkit import figure  # noqa: E402

from reconciler.catalog import load_catalog  # noqa: E402
from reconciler.catalog.incremental import CatalogCache  # noqa: E402
from reconciler.daemon.plan import check_catalog  # noqa: E402
from reconciler.source.changes import TreeState, changed_since  # noqa: E402

VERSIONS = ("1.0.0", "1.1.0", "1.2.0", "2.0.0-rc.1", "2.0.0")

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${instance.name}
spec:
  replicas: ${params.replicas}
  selector:
    matchLabels: {app: "${instance.name}"}
  template:
    metadata:
      labels: {app: "${instance.name}"}
    spec:
      containers:
        - name: app
          image: ${images.app}
          ports: [{containerPort: 8080}]
          env:
            - {name: MESSAGE, value: "${params.message}"}
          resources:
            requests: {cpu: 100m, memory: 64Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: ${instance.name}
spec:
  selector: {app: "${instance.name}"}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${instance.name}-config
data:
  version: ${app.version}
"""


def generate(root: Path, apps: int) -> list[Path]:
    files: list[Path] = []

    def write(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        files.append(path)

    for i in range(apps):
        app = f"app{i:04d}"
        write(f"apps/{app}/app.yaml", f"apiVersion: reconciler/v1\nkind: App\nname: {app}\n")
        write(
            f"apps/{app}/channels.yaml",
            f"apiVersion: reconciler/v1\nkind: Channels\napp: {app}\nchannels:\n"
            "  stable: 1.2.0\n  fast: 2.0.0\n  experimental: 2.0.0-rc.1\n",
        )
        for v in VERSIONS:
            base = f"apps/{app}/versions/{v}"
            write(
                f"{base}/version.yaml",
                f"apiVersion: reconciler/v1\nkind: AppVersion\napp: {app}\nversion: {v}\n"
                f'upgradeFrom: ">=1.0.0"\nimages:\n  app: registry.example.com/{app}:{v}\n'
                "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
                "rollout:\n  batches: [1, 50%, 50%]\n",
            )
            write(f"{base}/manifests/app.yaml", DEPLOYMENT)
        selector = (
            "channel: stable",
            'version: ">=1.0.0 <2.0.0"',
            "version: latest",
            "version: 1.1.0",
        )[i % 4]
        write(
            f"clusters/prod/instances/{app}.yaml",
            f"apiVersion: reconciler/v1\nkind: Instance\nname: {app}\napp: {app}\n"
            f"{selector}\nnamespace: ns{i % 20}\nparameters: {{replicas: 3}}\n",
        )
    return files


def bare_parse(files: list[Path]) -> None:
    for path in files:
        list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))


def best_cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def new_version(root: Path, app: str) -> None:
    """One app gets a 2.1.0 (a copy of 2.0.0) and its fast channel moves to it."""
    base = root / "apps" / app / "versions"
    (base / "2.1.0" / "manifests").mkdir(parents=True)
    text = (base / "2.0.0" / "version.yaml").read_text()
    (base / "2.1.0" / "version.yaml").write_text(text.replace("2.0.0", "2.1.0"))
    manifest = (base / "2.0.0" / "manifests" / "app.yaml").read_text()
    (base / "2.1.0" / "manifests" / "app.yaml").write_text(manifest)
    channels = root / "apps" / app / "channels.yaml"
    channels.write_text(channels.read_text().replace("fast: 2.0.0", "fast: 2.1.0"))


def edit_instance(root: Path, app: str) -> None:
    path = root / "clusters" / "prod" / "instances" / f"{app}.yaml"
    path.write_text(path.read_text().replace("replicas: 3", "replicas: 4"))


def cpu_and_wall(fn: Callable[[], object]) -> tuple[object, float, float]:
    """CPU seconds of this process and its children (``git diff``), and wall seconds."""

    def cpu() -> float:
        own, children = getrusage(RUSAGE_SELF), getrusage(RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    before, wall = cpu(), time.perf_counter()
    result = fn()
    return result, cpu() - before, time.perf_counter() - wall


def reload_bench(apps: int) -> None:
    """Issue 12: a commit touching one app reloads only it, against a full reload."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = generate(root, apps)
        git(root, "init", "-q")
        head = commit(root, "catalog")
        cache = CatalogCache[TreeState](changed_since)
        cache.load(root, TreeState(head))  # the daemon's first load (full)
        print(f"catalog reload: {apps} apps, {apps} instances, {len(files)} files in Git")
        target = f"app{apps // 2:04d}"
        for label, edit in (
            (f"one app ({target}: new version, channel move)", new_version),
            (f"one instance ({target}: parameters)", edit_instance),
        ):
            edit(root, target)
            head = commit(root, label)
            loaded = cache.incremental_loads
            state = TreeState(head)
            reloaded, cpu, wall = cpu_and_wall(lambda: cache.load(root, state))  # noqa: B023
            if cache.incremental_loads != loaded + 1:
                raise SystemExit("the incremental reload fell back to a full load")
            full, full_cpu, full_wall = cpu_and_wall(lambda: load_catalog(root))
            if reloaded != full:
                raise SystemExit(f"incremental reload differs from a full load after {label}")
            print(f"  commit touching {label}")
            print(
                f"    full reload (load_catalog)       {full_cpu:8.3f} s CPU"
                f" {full_wall:8.3f} s wall"
            )
            print(
                f"    incremental (git diff + reload)  {cpu:8.3f} s CPU {wall:8.3f} s wall"
                f"  (goal: < 0.500 s; {full_cpu / max(cpu, 1e-9):.0f}x less CPU)"
            )
            figure(
                f"catalog reload, {apps} apps, commit touching {label.split(' (')[0]}",
                f"{cpu:.3f} s CPU",
                "< 0.5 s",
                f"full load_catalog {full_cpu:.2f} s",
                cpu < 0.5,
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--apps", default="1000,5000", help="comma-separated catalog sizes (apps) to measure"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--reload-apps", type=int, default=5000, help="apps for the reload benchmark (0: skip)"
    )
    args = parser.parse_args()
    for apps in (int(a) for a in args.apps.split(",")):
        load_bench(apps, args.repeat)
    if args.reload_apps:
        reload_bench(args.reload_apps)


def load_bench(apps: int, repeat: int) -> None:
    """Load + validate + resolve + render ``apps`` apps against a bare parse of their files."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = generate(root, apps)

        def reconcile() -> None:
            problems = check_catalog(load_catalog(root))
            errors = [p for p in problems if p.is_error]
            if errors:
                raise SystemExit(f"generated catalog is invalid: {errors[0]}")

        reconcile()  # warm caches (schema compilation) once, as a daemon would be warm
        baseline = best_cpu(lambda: bare_parse(files), repeat)
        ours = best_cpu(reconcile, repeat)
    print(f"catalog: {apps} apps x {len(VERSIONS)} versions, {apps} instances, {len(files)} files")
    print(f"baseline  PyYAML CSafeLoader parse only        {baseline:8.3f} s CPU")
    print(f"reconciler load+validate+resolve+render        {ours:8.3f} s CPU")
    print(f"ratio     {ours / baseline:.2f}x (goal: <= 2.00x)")
    figure(
        f"catalog load+validate+resolve+render, {apps} apps x {len(VERSIONS)} versions",
        f"{ours:.2f} s CPU = {ours / baseline:.2f}x",
        "<= 2x",
        f"bare PyYAML C parse {baseline:.2f} s",
        ours / baseline <= 2.0,
    )


if __name__ == "__main__":
    main()
