"""The watch window is kept per resource, as the API server's watch cache keeps one cache
per resource type (``--watch-cache-sizes``,
https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/ and
https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
writes to one resource never expire another's history, and a resourceVersion older than
its own resource's window is still ``410 Gone``.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

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
