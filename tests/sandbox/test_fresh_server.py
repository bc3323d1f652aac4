"""Each test sandbox is a copy of a server built once (``testing.fresh_server``).

The copy must be what building a server gives: the standard objects every cluster holds
before anything is applied (as kube-apiserver and kubeadm create them,
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings,
https://kubernetes.io/docs/tasks/configure-pod-container/static-pod/), nothing else,
and nothing shared with the template or another copy.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes import client, config

from reconciler.sandbox.kinds import PODS
from reconciler.sandbox.server import SandboxServer
from reconciler.sandbox.store import Store
from reconciler.sandbox.testing import fresh_server, running_sandbox
from reconciler.sandbox.timing import Timing
from tests.sandbox.helpers import eventually

_UID = re.compile(r'"uid":"[^"]*"')
OPTIONS: dict[str, Any] = {"controller_delay": 0.05, "timing": Timing(controller_delay=0.05)}


def _contents(store: Store) -> dict[tuple[Any, str, str], dict[str, Any]]:
    """Every stored object by its key, without what differs between two builds."""
    contents = {}
    for resource, obj in store.iter_all():
        meta = obj["metadata"]
        rest = {k: v for k, v in meta.items() if k not in ("uid", "creationTimestamp")}
        shown = {**obj, "metadata": rest}
        shown.pop("status", None)  # conditions carry the time they changed
        contents[(resource, str(meta.get("namespace", "")), meta["name"])] = shown
    return contents


def _without_times(value: Any) -> Any:
    """``value`` with each managedFields entry's time and each owner's uid dropped (also
    from the key of the owner reference a manager owns: ``k:{"uid":"..."}``)."""
    if isinstance(value, dict):
        return {
            (_UID.sub('"uid":""', k) if isinstance(k, str) else k): _without_times(v)
            for k, v in value.items()
            if k not in ("time", "uid")
        }
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def test_a_copy_holds_what_a_built_server_holds() -> None:
    built = SandboxServer(**OPTIONS)
    copy = fresh_server(**OPTIONS)
    assert copy is not built
    assert copy.api.store.resource_version == built.api.store.resource_version
    assert _without_times(_contents(copy.api.store)) == _without_times(_contents(built.api.store))
    assert copy.requests.entries() == []


def test_copies_share_nothing() -> None:
    first, second = fresh_server(**OPTIONS), fresh_server(**OPTIONS)
    node_pods = first.api.store.view(PODS, "kube-system")
    assert node_pods, "the control-plane pods are there"
    name = node_pods[0]["metadata"]["name"]
    assert first.api.store.view_one(PODS, "kube-system", name) is not (
        second.api.store.view_one(PODS, "kube-system", name)
    )
    assert first.api.store.listeners is not second.api.store.listeners
    assert first.controllers.queue is not second.controllers.queue
    assert first.requests is not second.requests


def test_an_option_that_cannot_be_a_key_builds_a_server_anew() -> None:
    server = fresh_server(**OPTIONS, fail_images=["*:broken"])
    assert server.controllers.plane.fail_images == ("*:broken",)
    assert _without_times(_contents(server.api.store)) == _without_times(
        _contents(fresh_server(**OPTIONS).api.store)
    )


def _config_maps(kubeconfig: str, namespace: str) -> list[str]:
    api = config.new_client_from_config(kubeconfig)
    try:
        items = client.CoreV1Api(api).list_namespaced_config_map(namespace).items
        return sorted(cm.metadata.name for cm in items)
    finally:
        api.close()


def test_a_sandbox_starts_empty_of_what_another_wrote() -> None:
    """Two sandboxes at once and one after: each sees only its own writes."""
    with running_sandbox() as first, running_sandbox() as second:
        api = config.new_client_from_config(str(first.kubeconfig))
        try:
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="mine"), data={"a": "b"})
            client.CoreV1Api(api).create_namespaced_config_map("default", body)
        finally:
            api.close()
        assert "mine" in _config_maps(str(first.kubeconfig), "default")
        assert "mine" not in _config_maps(str(second.kubeconfig), "default")
        assert first.request_log() and not [e for e in second.request_log() if e.verb == "create"]
    with running_sandbox() as third:
        assert "mine" not in _config_maps(str(third.kubeconfig), "default")


def test_a_copys_controllers_run_the_control_plane_pods() -> None:
    """A copy was built before any event loop ran, so its writes queued nothing: its
    controllers sync what it holds when it is served, as a controller manager's first
    list does."""
    with running_sandbox() as sandbox:
        api = config.new_client_from_config(str(sandbox.kubeconfig))
        try:
            core = client.CoreV1Api(api)

            def running() -> bool:
                pods = core.list_namespaced_pod("kube-system").items
                return bool(pods) and all(p.status.phase == "Running" for p in pods)

            eventually(running, timeout=30)
        finally:
            api.close()
