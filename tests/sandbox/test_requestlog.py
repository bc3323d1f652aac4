"""The request log, in-process and over ``/sandbox/requests`` (for tests and benchmarks)."""

from __future__ import annotations

from kubernetes import client

from reconciler.sandbox.requestlog import RequestLogEntry
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import http


def test_request_log_records_and_resets(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    sandbox.reset_request_log()
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.list_namespaced_config_map("default", label_selector="x=y")
    core.read_namespaced_config_map("a", "default")
    entries = sandbox.request_log()
    assert [(e.method, e.verb, e.status) for e in entries] == [
        ("POST", "create", 201),
        ("GET", "list", 200),
        ("GET", "get", 200),
    ]
    assert entries[1].path == "/api/v1/namespaces/default/configmaps"
    assert entries[1].query == "labelSelector=x%3Dy"
    assert entries[0].user_agent.startswith("OpenAPI-Generator/")
    assert RequestLogEntry.from_dict(entries[0].to_dict()) == entries[0]
    sandbox.reset_request_log()
    assert sandbox.request_log() == []


def test_request_log_over_http(sandbox: SandboxHandle) -> None:
    http(sandbox, "GET", "/api/v1/namespaces/default/configmaps/missing")
    http(sandbox, "GET", "/api/v1/namespaces?watch=true&timeoutSeconds=0.05")
    status, body = http(sandbox, "GET", "/sandbox/requests")
    assert status == 200
    assert [(e["verb"], e["status"]) for e in body["items"]] == [("get", 404), ("watch", 200)]
    assert http(sandbox, "DELETE", "/sandbox/requests")[0] == 200
    assert http(sandbox, "GET", "/sandbox/requests")[1]["items"] == []


def test_request_log_over_http_in_pages(sandbox: SandboxHandle) -> None:
    """A reader of tens of thousands of entries asks for them a page at a time."""
    for name in ("a", "b", "c"):
        http(sandbox, "GET", f"/api/v1/namespaces/default/configmaps/{name}")
    status, body = http(sandbox, "GET", "/sandbox/requests?offset=1&limit=1")
    assert status == 200 and body["total"] == 3
    assert [e["path"].rsplit("/", 1)[1] for e in body["items"]] == ["b"]
    rest = http(sandbox, "GET", "/sandbox/requests?offset=2")[1]
    assert [e["path"].rsplit("/", 1)[1] for e in rest["items"]] == ["c"]
    assert http(sandbox, "GET", "/sandbox/requests?offset=9&limit=5")[1]["items"] == []
    for bad in ("offset=x", "limit=-1"):
        status, body = http(sandbox, "GET", f"/sandbox/requests?{bad}")
        assert status == 400 and "offset and limit" in body["message"]
