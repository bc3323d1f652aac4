"""Benchmark: apply 200 instances x 8 objects to the sandbox, vs. ``kubectl apply --server-side``.

Three passes, each on a fresh ``LiveState`` as a daemon pass would use:
  * first apply (everything is created),
  * a no-op pass (nothing changed in Git or in the cluster),
  * a pass where one instance's ConfigMap changed.
For each pass it prints the API requests by verb (from the sandbox's request log)
and the reconciler's CPU seconds (its own thread; the sandbox runs on another).
In the same run, the same manifests go through ``kubectl apply --server-side`` on
a second, fresh sandbox as the baseline (skipped with a message without kubectl).

Goals: the no-op pass makes zero writes and at most one list per kind, at a small
fraction of kubectl's cost; the one-instance change writes only that instance's
changed objects (plus its inventory).

Run: ``.venv/bin/python bench/apply.py [--instances 200] [--no-kubectl]``
"""

from __future__ import annotations

import argparse
import copy
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

_HERE = Path(__file__).resolve().parent
# the folder goes last on the import path (bench/git.py would shadow GitPython's git)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

from benchkit import figure  # noqa: E402

from reconciler.kube import (  # noqa: E402
    ApplyOptions,
    InstanceTarget,
    KubeClient,
    LiveState,
    apply_instance,
)
from reconciler.sandbox.testing import SandboxHandle, running_sandbox  # noqa: E402

CLUSTER = "bench"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
PASSES = ("first apply", "no-op", "one instance changed")


def instance_objects(i: int, message: str = "hello") -> list[dict[str, Any]]:
    """Eight objects of one instance, labelled as render would label them."""
    name, ns = f"app{i:03d}", f"bench-{i:03d}"
    labels = {
        "app.kubernetes.io/managed-by": "reconciler",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/name": "demo",
        "app.kubernetes.io/version": "1.0.0",
    }

    def meta(n: str = name) -> dict[str, Any]:
        return {"name": n, "namespace": ns, "labels": dict(labels)}

    selector = {"app.kubernetes.io/instance": name}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(), "data": {"msg": message}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta(), "stringData": {"token": "s3"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(),
            "spec": {"selector": selector, "ports": [{"port": 80, "targetPort": 8080}]},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(),
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": selector},
                    "spec": {
                        "serviceAccountName": name,
                        "containers": [
                            {
                                "name": "app",
                                "image": "ghcr.io/stefanprodan/podinfo:6.5.0",
                                "ports": [{"containerPort": 8080}],
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(),
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}},
        },
    ]


def pass_objects(count: int, pass_name: str) -> list[list[dict[str, Any]]]:
    objects = [instance_objects(i) for i in range(count)]
    if pass_name == "one instance changed":
        objects[0] = instance_objects(0, message="changed")
    return objects


def verbs_of(sandbox: SandboxHandle, agent: str = "") -> Counter[str]:
    return Counter(e.verb for e in sandbox.request_log() if agent in e.user_agent)


def run_reconciler(count: int) -> list[tuple[str, Counter[str], float, str]]:
    rows = []
    with running_sandbox() as sandbox, KubeClient.connect(sandbox.kubeconfig) as client:
        for pass_name in PASSES:
            targets = [
                InstanceTarget(CLUSTER, f"app{i:03d}", f"bench-{i:03d}", tuple(objs), "demo", "1")
                for i, objs in enumerate(pass_objects(count, pass_name))
            ]
            sandbox.reset_request_log()
            cpu = time.thread_time()
            live = LiveState(client, CLUSTER)
            results = [apply_instance(client, t, ApplyOptions(), live) for t in targets]
            cpu = time.thread_time() - cpu
            failed = [r for r in results if not r.ok]
            if failed:
                sys.exit(f"bench: {failed[0].instance} failed: {failed[0].message}")
            summary = Counter(str(e.action) for r in results for e in r.changes.entries)
            rows.append((pass_name, verbs_of(sandbox), cpu, _fmt(summary)))
    return rows


def run_kubectl(count: int, kubectl: str) -> list[tuple[str, Counter[str], float, str]]:
    rows = []
    with running_sandbox() as sandbox, tempfile.TemporaryDirectory() as tmp:
        for pass_name in PASSES:
            path = Path(tmp) / "manifests.yaml"
            docs: list[dict[str, Any]] = [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bench-{i:03d}"}}
                for i in range(count)
            ]
            for objs in pass_objects(count, pass_name):
                docs += copy.deepcopy(objs)
            path.write_text(yaml.safe_dump_all(docs))
            sandbox.reset_request_log()
            cpu = _children_cpu()
            argv = [
                kubectl,
                "--kubeconfig",
                str(sandbox.kubeconfig),
                "apply",
                "--server-side",
                "--validate=false",
            ]
            done = subprocess.run([*argv, "-f", str(path)], capture_output=True, text=True)
            cpu = _children_cpu() - cpu
            if done.returncode != 0:
                sys.exit(f"bench: kubectl failed: {done.stderr.strip()[:500]}")
            rows.append((pass_name, verbs_of(sandbox), cpu, f"{len(docs)} objects sent"))
    return rows


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _fmt(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counter.items())) or "-"


def print_rows(title: str, rows: Sequence[tuple[str, Counter[str], float, str]]) -> None:
    print(f"\n{title}")
    print(f"  {'pass':<22} {'cpu s':>7} {'requests':>8}  by verb / outcome")
    for name, verbs, cpu, outcome in rows:
        total = sum(verbs.values())
        print(f"  {name:<22} {cpu:7.2f} {total:8d}  {_fmt(verbs)}")
        print(f"  {'':<22} {'':>7} {'':>8}  {outcome}")


def check_goals(ours: Sequence[tuple[str, Counter[str], float, str]]) -> list[str]:
    noop, change = ours[1][1], ours[2][1]
    failures = []
    if sum(noop[v] for v in WRITES):
        failures.append(f"no-op pass wrote: {_fmt(noop)}")
    if noop["get"]:
        failures.append(f"no-op pass sent {noop['get']} GETs (one list per kind expected)")
    if sum(change[v] for v in WRITES) > 2:
        failures.append(
            f"one-instance change wrote more than its object + inventory: {_fmt(change)}"
        )
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--no-kubectl", action="store_true", help="skip the kubectl baseline")
    args = parser.parse_args(argv)
    print(f"{args.instances} instances x 8 objects on the sandbox")
    ours = run_reconciler(args.instances)
    print_rows("reconciler (apply_instance, one LiveState per pass)", ours)
    kubectl = shutil.which("kubectl")
    base: list[tuple[str, Counter[str], float, str]] = []
    if args.no_kubectl or kubectl is None:
        print(
            "\nkubectl baseline skipped: "
            + ("--no-kubectl" if args.no_kubectl else "kubectl is not on PATH")
        )
    else:
        base = run_kubectl(args.instances, kubectl)
        print_rows("baseline: kubectl apply --server-side (one process per pass)", base)
        for (name, _, cpu, _), (_, _, base_cpu, _) in zip(ours, base, strict=True):
            share = cpu / base_cpu if base_cpu else float("nan")
            print(f"  {name:<22} reconciler/kubectl CPU: {share:.2f}")
    failures = check_goals(ours)
    for name, verbs, cpu, _ in ours[1:]:  # the passes with a goal: no-op, one change
        baseline = "-"
        if base:
            _, base_verbs, base_cpu, _ = next(row for row in base if row[0] == name)
            baseline = f"kubectl {base_cpu:.2f} s CPU, {sum(base_verbs.values())} requests"
        figure(
            f"apply_instance {name}, {args.instances} instances x 8 objects",
            f"{cpu:.2f} s CPU, {sum(verbs.values())} requests ({_fmt(verbs)})",
            "0 writes (one change: its object and inventory), one list per kind",
            baseline,
            not failures,
        )
    for failure in failures:
        print(f"GOAL MISSED: {failure}")
    if not failures:
        print(
            "\ngoals met: no-op pass made 0 writes and one list per kind; "
            "the changed instance wrote only its changed object and inventory"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
