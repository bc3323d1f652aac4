"""The watch window is kept per resource, as the API server's watch cache keeps one cache
per resource type (``--watch-cache-sizes``,
https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/ and
https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
writes to one resource never expire another's history, and a resourceVersion older than
its own resource's window is still ``410 Gone``. Unless a test fixes its size, a window
keeps what the watch cache keeps (watch_cache.go): every event of the last 75 s, at
least 100 and at most 102,400, so a watch resuming from its last bookmark (sent every
minute, https://kubernetes.io/docs/reference/using-api/api-concepts/#watch-bookmarks)
finds its place however busy the cluster is.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.store import FRESH_SECONDS, LOWER_BOUND, Store
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from tests.sandbox.helpers import http

CMS = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"
MERGE = "application/merge-patch+json"


def _watch(sandbox: SandboxHandle, path: str, rv: str) -> list[dict[str, Any]]:
    url = f"{sandbox.url}{path}?watch=true&resourceVersion={rv}&timeoutSeconds=0.2"
    with urllib.request.urlopen(url, timeout=10) as response:
        return [json.loads(line) for line in response if line.strip()]


def _rv(body: dict[str, Any]) -> str:
    return str(body["metadata"]["resourceVersion"])


def test_writes_to_another_resource_do_not_expire_a_watch_or_a_list() -> None:
    with running_sandbox(history_limit=3) as sandbox:
        _, first = http(sandbox, "POST", CMS, {"metadata": {"name": "a"}})
        _, page = http(sandbox, "GET", f"{CMS}?limit=1")
        for n in range(10):  # more than the window, all of another resource
            http(sandbox, "POST", SECRETS, {"metadata": {"name": f"s{n}"}})
        http(sandbox, "POST", CMS, {"metadata": {"name": "b"}})
        events = _watch(sandbox, CMS, _rv(first))
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]
        # the list's next page is still served at its version (without "b")
        status, rest = http(
            sandbox, "GET", f"{CMS}?limit=5&continue={page['metadata']['continue']}"
        )
        assert status == 200
        assert "b" not in [item["metadata"]["name"] for item in rest["items"]]


def test_a_version_older_than_its_own_window_is_gone() -> None:
    with running_sandbox(history_limit=3) as sandbox:
        _, first = http(sandbox, "POST", CMS, {"metadata": {"name": "a"}})
        for n in range(4):  # one more than the window, of the same resource
            http(sandbox, "PATCH", f"{CMS}/a", {"data": {"n": str(n)}}, MERGE)
        events = _watch(sandbox, CMS, _rv(first))
        assert [e["type"] for e in events] == ["ERROR"]
        assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")
        # the secrets' window is untouched: a watch from the same version resumes
        assert _watch(sandbox, SECRETS, _rv(first)) == []


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _put(store: Store, name: str) -> int:
    stored = store.put(("", "configmaps"), {"metadata": {"name": name, "namespace": "default"}})
    return int(stored["metadata"]["resourceVersion"])


def test_a_window_keeps_every_event_younger_than_the_watch_caches_75_seconds() -> None:
    clock = Clock()
    store = Store(clock=clock)  # sized as the watch cache sizes itself
    first = _put(store, "c0")
    for n in range(1, 3 * LOWER_BOUND):  # a burst well beyond the lower bound
        _put(store, f"c{n}")
    assert len(store.events_since(first - 1, ("", "configmaps"), None)) == 3 * LOWER_BOUND
    clock.now = FRESH_SECONDS + 1  # the burst is no longer fresh
    last = _put(store, "late")
    with pytest.raises(ApiError) as gone:
        store.events_since(first, ("", "configmaps"), None)
    assert gone.value.code == 410
    # the lower bound stays: the newest 100 events, the late one among them
    kept = store.events_since(last - LOWER_BOUND, ("", "configmaps"), None)
    assert len(kept) == LOWER_BOUND and kept[-1].obj["metadata"]["name"] == "late"


def test_a_quiet_resource_keeps_its_last_events_however_old() -> None:
    clock = Clock()
    store = Store(clock=clock)
    first = _put(store, "a")
    _put(store, "b")
    clock.now = 10 * FRESH_SECONDS
    _put(store, "c")
    names = [
        e.obj["metadata"]["name"] for e in store.events_since(first - 1, ("", "configmaps"), None)
    ]
    assert names == ["a", "b", "c"]
