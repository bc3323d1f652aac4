"""What a shared cluster holds besides a test's own objects, for the ``real_cluster`` lane.

A cluster users point the lane at runs other things: another reconciler's instances
(inventories of another cluster name, under the same instance names as the tests'
catalog), objects that carry our managed-by label but belong to those instances, and
workloads of other tools. ``make test-real-sandbox`` seeds a standalone sandbox with
them before the lane runs and checks afterwards that they are all still there as they
were, so every scenario of the lane meets them: a test that assumes the cluster holds
only what it made fails, and an engine that prunes or edits what is not its own is
caught (a prune removes only what the instance's own inventory names).

    python -m tests.foreign seed KUBECONFIG    # before the lane
    python -m tests.foreign check KUBECONFIG   # after it: exit 1 names what changed
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reconciler.kube import KubeClient
from reconciler.kube.inventory import INSTANCE_LABEL, Inventory, to_configmap
from reconciler.model.changeset import ObjectRef

NAMESPACE = "foreign-tenant"
CLUSTER = "staging"  # never a cluster name of the tests' catalogs ("prod", "test-…")
# the instance names of the tests' catalogs (tests/factories.py and the lane's scenarios)
INSTANCES = ("web", "api", "books", "cards", "one", "two")
MANAGED = "app.kubernetes.io/managed-by"


def _labels(instance: str) -> dict[str, str]:
    return {MANAGED: "reconciler", INSTANCE_LABEL: instance}


def _config(instance: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{instance}-config",
            "namespace": NAMESPACE,
            "labels": _labels(instance),
        },
        "data": {"owner": f"{CLUSTER}/{instance}"},
    }


def _deployment(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }


def foreign_objects() -> list[dict[str, Any]]:
    """Every object ``seed`` writes, in the order it writes them (namespaces first)."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    ]
    for instance in INSTANCES:
        config = _config(instance)
        objects.append(config)
        inventory = Inventory(
            cluster=CLUSTER,
            instance=instance,
            namespace=NAMESPACE,
            app="podinfo",
            version="0.0.1",
            objects={ObjectRef.of(config): "foreign"},
            writer="another reconciler (main)",
        )
        objects.append(to_configmap(inventory))
    # ours by its labels, yet in no inventory of any cluster: a prune must leave it
    objects.append(_deployment("web", NAMESPACE, _labels("web")))
    # another tool's workloads, in a namespace of its own and in default
    objects.append(_deployment("other-tool", NAMESPACE, {MANAGED: "other-tool"}))
    objects.append(_deployment("other-tool", "default", {MANAGED: "other-tool"}))
    return objects


def _apply(client: KubeClient, obj: dict[str, Any]) -> None:
    ref = ObjectRef.of(obj)
    manager = obj["metadata"].get("labels", {}).get(MANAGED, "seed")
    client.request(
        "PATCH",
        client.object_path(ref),
        subject=str(ref),
        verb="apply",
        query=[("fieldManager", f"{manager}-foreign"), ("force", "true")],
        body=obj,
        content_type="application/apply-patch+yaml",
    )


def _owned(obj: dict[str, Any]) -> dict[str, Any]:
    """What the writer of ``obj`` owns: its labels and content, not what a controller
    adds (status, a revision annotation) or the version every write moves."""
    meta = obj.get("metadata") or {}
    return {
        "uid": meta.get("uid"),
        "labels": meta.get("labels") or {},
        "data": obj.get("data"),
        "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k in ("replicas", "template")},
        "generation": meta.get("generation"),
    }


def seed(client: KubeClient) -> dict[ObjectRef, dict[str, Any]]:
    """Write the foreign objects; what each looks like now, for ``changed``."""
    for obj in foreign_objects():
        _apply(client, obj)
    return snapshot(client)


def snapshot(client: KubeClient) -> dict[ObjectRef, dict[str, Any]]:
    found: dict[ObjectRef, dict[str, Any]] = {}
    for obj in foreign_objects():
        ref = ObjectRef.of(obj)
        live = client.get(ref)
        if live is not None:
            found[ref] = _owned(live)
    return found


def changed(client: KubeClient, before: dict[ObjectRef, dict[str, Any]]) -> list[str]:
    """Each foreign object that is gone or no longer as it was, named."""
    now = snapshot(client)
    faults = []
    for ref, was in before.items():
        if ref not in now:
            faults.append(f"{ref}: deleted")
        elif now[ref] != was:
            faults.append(f"{ref}: changed from {was} to {now[ref]}")
    return faults


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("seed", "check"):
        print("usage: python -m tests.foreign seed|check KUBECONFIG", file=sys.stderr)
        return 2
    command, kubeconfig = argv
    state = Path(kubeconfig).with_name("foreign.json")
    with KubeClient.connect(kubeconfig) as client:
        if command == "seed":
            state.write_text(_dump(seed(client)))
            print(f"seeded {len(foreign_objects())} foreign objects (namespace {NAMESPACE})")
            return 0
        faults = changed(client, _load(state.read_text()))
    for fault in faults:
        print(f"a foreign object was touched: {fault}", file=sys.stderr)
    return 1 if faults else 0


def _dump(found: dict[ObjectRef, dict[str, Any]]) -> str:
    rows = [[[r.api_version, r.kind, r.namespace, r.name], owned] for r, owned in found.items()]
    return json.dumps(rows)


def _load(text: str) -> dict[ObjectRef, dict[str, Any]]:
    return {ObjectRef(*ref): owned for ref, owned in json.loads(text)}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
