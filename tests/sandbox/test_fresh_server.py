"""Each test sandbox is a copy of a server built once (``testing.fresh_server``).

The copy must be what building a server gives: the standard objects every cluster holds
before anything is applied (as kube-apiserver and kubeadm create them,
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings,
https://kubernetes.io/docs/tasks/configure-pod-container/static-pod/), nothing else,
and nothing shared with the template or another copy.
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
import weakref
from typing import Any

import pytest
from kubernetes import client, config

from reconciler.sandbox import testing
from reconciler.sandbox.bootstrap import CONTROL_PLANE
from reconciler.sandbox.kinds import EVENTS, PODS
from reconciler.sandbox.server import SandboxServer
from reconciler.sandbox.store import Store
from reconciler.sandbox.testing import fresh_server, running_sandbox
from reconciler.sandbox.timing import Timing
from tests.sandbox.helpers import eventually, http

_UID = re.compile(r'"uid":"[^"]*"')
OPTIONS: dict[str, Any] = {"controller_delay": 0.05, "timing": Timing(controller_delay=0.05)}


# what differs between two builds of the same cluster: identities, addresses and times
_UNSTABLE = frozenset(
    {"uid", "creationTimestamp", "resourceVersion", "time", "firstTimestamp", "lastTimestamp"}
    | {"podIP", "podIPs", "containerID"}
)
_TIMED = ("lastHeartbeatTime", "lastTransitionTime", "lastProbeTime", "startTime", "startedAt")


def _contents(store: Store) -> dict[tuple[Any, ...], Any]:
    """Every stored object by its key, without what differs between two builds (an
    Event's name is its object's and a time: Events are keyed by object and reason)."""
    contents = {}
    for resource, obj in store.iter_all():
        meta = obj["metadata"]
        if resource == EVENTS:
            key: tuple[Any, ...] = (resource, obj["involvedObject"]["name"], obj["reason"])
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "name"}}
        else:
            key = (resource, str(meta.get("namespace", "")), meta["name"])
        contents[key] = _stable(obj)
    return contents


def _stable(value: Any) -> Any:
    """``value`` without identities and times (also where a managedFields key holds an
    owner's uid: ``k:{"uid":"..."}``)."""
    if isinstance(value, dict):
        return {
            _UID.sub('"uid":""', k): _stable(v)
            for k, v in value.items()
            if k not in _UNSTABLE and k not in _TIMED
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _built_and_settled(**options: Any) -> SandboxServer:
    """The reference: a server built on a running loop, its controllers left to settle."""

    async def build() -> SandboxServer:
        server = SandboxServer(**options)
        deadline = time.monotonic() + 30
        while not server.controllers.queue.idle and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await server.controllers.stop()
        return server

    return asyncio.run(build())


def test_a_copy_holds_what_a_built_server_holds_once_settled() -> None:
    built = _built_and_settled(**OPTIONS)
    copy = fresh_server(**OPTIONS)
    assert copy is not built
    assert _contents(copy.api.store) == _contents(built.api.store)
    pods = copy.api.store.view(PODS, "kube-system")
    assert len(pods) == len(CONTROL_PLANE)
    assert {p["status"]["phase"] for p in pods} == {"Running"}
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
    assert _contents(server.api.store) == _contents(_built_and_settled(**OPTIONS).api.store)


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


def test_what_a_template_left_pending_runs_in_each_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A template whose controllers had no time to settle is paused as it is: each copy
    goes on from there once served (the control-plane pods start in it)."""
    monkeypatch.setattr(testing, "SETTLE_LIMIT", 0.0)
    monkeypatch.setattr(testing, "_TEMPLATES", {})
    unsettled = fresh_server(**OPTIONS)
    assert not unsettled.controllers.queue.idle
    phases = {p.get("status", {}).get("phase") for p in unsettled.api.store.view(PODS)}
    assert "Running" not in phases
    with running_sandbox() as sandbox:
        api = config.new_client_from_config(str(sandbox.kubeconfig))
        try:
            core = client.CoreV1Api(api)

            def running() -> bool:
                pods = core.list_namespaced_pod("kube-system").items
                return len(pods) == len(CONTROL_PLANE) and all(
                    p.status.phase == "Running" for p in pods
                )

            eventually(running, timeout=30)
        finally:
            api.close()


def test_a_stopped_sandbox_is_freed_with_its_store() -> None:
    """Nothing outside a sandbox keeps it once it stopped: not aiohttp's module-wide cache
    of middleware chains, which kept every served sandbox (and its whole store) alive
    until a thousand others had pushed it out, up to 600 MB in one test process."""
    with running_sandbox() as sandbox:
        for path in ("/api/v1/namespaces/default/configmaps", "/version", "/no/such/path"):
            http(sandbox, "GET", path)  # each route's chain is built, and cached, once
        served = sandbox._running.server
        server, store = weakref.ref(served), weakref.ref(served.api.store)
    del sandbox, served
    gc.collect()
    assert server() is None and store() is None
