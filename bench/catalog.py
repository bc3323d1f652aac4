"""Benchmark: load + validate + resolve + render a large catalog vs. a bare YAML parse.

Generates 1,000 apps x 5 versions and a cluster with 1,000 instances, then in
the same run measures
  * baseline: parsing every one of those files with PyYAML's C loader, nothing else;
  * reconciler: ``load_catalog`` + ``check_catalog`` (schemas, names, channels,
    placeholders, resolution and rendering of every instance).
Prints both (best of N, CPU seconds) and the ratio; the goal is within 2x.

Run: ``.venv/bin/python bench/catalog.py [--apps 1000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import check_catalog

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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = generate(root, args.apps)

        def reconcile() -> None:
            problems = check_catalog(load_catalog(root))
            errors = [p for p in problems if p.is_error]
            if errors:
                raise SystemExit(f"generated catalog is invalid: {errors[0]}")

        reconcile()  # warm caches (schema compilation) once, as a daemon would be warm
        baseline = best_cpu(lambda: bare_parse(files), args.repeat)
        ours = best_cpu(reconcile, args.repeat)
    print(
        f"catalog: {args.apps} apps x {len(VERSIONS)} versions, "
        f"{args.apps} instances, {len(files)} files"
    )
    print(f"baseline  PyYAML CSafeLoader parse only        {baseline:8.3f} s CPU")
    print(f"reconciler load+validate+resolve+render        {ours:8.3f} s CPU")
    print(f"ratio     {ours / baseline:.2f}x (goal: <= 2.00x)")


if __name__ == "__main__":
    main()
