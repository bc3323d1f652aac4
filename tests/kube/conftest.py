"""Backends for the engine tests: the sandbox always, a real cluster on request.

Every scenario that takes ``backend`` runs against a fresh sandbox; with
``RECONCILER_TEST_KUBECONFIG`` set it also runs against that cluster as
``pytest -m real_cluster`` (unique namespaces and names, cleaned up after).
Request-log assertions apply only where a sandbox log exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reconciler.kube import KubeClient, RetryPolicy
from reconciler.model.changeset import ObjectRef
from tests.lanes import LANES, delete_namespaces, new_suffix, real_kubeconfig

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass
class Backend:
    client: KubeClient
    kubeconfig: Path
    cluster: str
    sandbox: Any = None  # SandboxHandle when running on the sandbox
    suffix: str = ""
    created_namespaces: list[str] = field(default_factory=list)

    def name(self, base: str) -> str:
        """A name unique to this test on a shared real cluster, ``base`` on the sandbox."""
        return f"{base}{self.suffix}"

    def namespace(self, base: str) -> str:
        """A namespace name for this test, deleted afterwards on a real cluster."""
        name = self.name(base)
        self.created_namespaces.append(name)
        return name

    def log(self) -> list[Any] | None:
        return None if self.sandbox is None else list(self.sandbox.request_log())

    def reset_log(self) -> None:
        if self.sandbox is not None:
            self.sandbox.reset_request_log()

    def writes(self) -> list[str] | None:
        log = self.log()
        if log is None:
            return None
        # a dry run (dryRun=All) persists nothing: it is a question, not a write
        return [
            f"{e.verb} {e.path}" for e in log if e.verb in WRITE_VERBS and "dryRun=" not in e.query
        ]


def edit_like_kubectl(client: KubeClient, ref: ObjectRef, body: dict[str, Any]) -> None:
    """Change an object the way ``kubectl edit`` does: a merge patch by manager kubectl-edit."""
    client.request(
        "PATCH",
        client.object_path(ref),
        subject=str(ref),
        verb="patch",
        query=[("fieldManager", "kubectl-edit")],
        body=body,
        content_type="application/merge-patch+json",
    )


FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)


@pytest.fixture(params=LANES)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "sandbox":
        handle = request.getfixturevalue("sandbox")
        client = KubeClient.connect(handle.kubeconfig, retry=FAST_RETRY)
        with client:
            yield Backend(client, handle.kubeconfig, "test", sandbox=handle)
        return
    path = real_kubeconfig()
    suffix = new_suffix()
    client = KubeClient.connect(path)
    be = Backend(client, path, f"test{suffix}", suffix=suffix)
    with client:
        try:
            yield be
        finally:
            # best effort on a shared cluster, and gone before the next test; through a
            # client of its own: the test's may still carry a monkeypatched method (the
            # autouse Git fixture's monkeypatch is undone only after this teardown), and a
            # patched ``delete`` left the namespaces in place for the whole 120 s wait
            with KubeClient.connect(path) as cleaner:
                delete_namespaces(cleaner, be.created_namespaces)


MANAGED = "app.kubernetes.io/managed-by"
INSTANCE = "app.kubernetes.io/instance"


def labels(instance: str) -> dict[str, str]:
    return {MANAGED: "reconciler", INSTANCE: instance, "app.kubernetes.io/name": "demo"}


def configmap(name: str, namespace: str, instance: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(instance)},
        "data": data or {"a": "1"},
    }


def deployment(
    name: str, namespace: str, instance: str, *, replicas: int = 2, fail: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels(instance)}
    if fail:
        meta["annotations"] = {"sandbox.reconciler.dev/fail": "true"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "ghcr.io/stefanprodan/podinfo:6.5.0",
                            "ports": [{"containerPort": 9898}],
                            "resources": {"limits": {"cpu": 0.5, "memory": "64Mi"}},
                        }
                    ]
                },
            },
        },
    }


def string_ids(value: Any) -> set[int]:
    """The ids of every string in a decoded JSON value, keys included."""
    if isinstance(value, str):
        return {id(value)}
    if isinstance(value, dict):
        return {i for k, v in value.items() for i in string_ids(k) | string_ids(v)}
    if isinstance(value, list):
        return {i for v in value for i in string_ids(v)}
    return set()
