"""Connecting like kubectl, retries with backoff, and errors at the HTTP boundary."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.kube import KubeClient, RetryPolicy
from reconciler.kube.client import _encoded, parse_warnings, throttled_refresh
from reconciler.kube.errors import ClusterUnreachable, KubeApiError
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import UsageError

FAST = RetryPolicy(
    attempts=4, base_delay=0.01, max_delay=0.02, timeout=(1.0, 2.0), throttle_attempts=5
)


def kubeconfig(path: Path, server: str, context: str = "test") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": context, "cluster": {"server": server}}],
                "users": [{"name": context, "user": {"token": "t0ken"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
                "current-context": context,
            }
        )
    )
    return path


def test_connects_with_explicit_file_and_context(sandbox: Any, tmp_path: Path) -> None:
    cfg = kubeconfig(tmp_path / "cfg", sandbox.url, context="other")
    client = KubeClient.connect(cfg, context="other")
    assert client.get(ObjectRef("v1", "Namespace", "", "default")) is not None
    with pytest.raises(UsageError, match="nope"):
        KubeClient.connect(cfg, context="nope")


def test_connects_from_kubeconfig_env(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    client = KubeClient.connect()
    assert client.host.rstrip("/") == sandbox.url.rstrip("/")


def test_missing_configuration_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UsageError, match="no Kubernetes configuration"):
        KubeClient.connect()
    with pytest.raises(UsageError, match="no such file"):
        KubeClient.connect(tmp_path / "missing")
    (tmp_path / "garbage").write_text("::: not yaml [")
    with pytest.raises(UsageError, match="garbage"):
        KubeClient.connect(tmp_path / "garbage")


def test_unreachable_server_after_retries(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    client = KubeClient.connect(
        kubeconfig(tmp_path / "cfg", f"http://127.0.0.1:{port}"), retry=FAST
    )
    with pytest.raises(
        ClusterUnreachable, match=r"failed: cannot reach the API server at http://127.0.0.1"
    ):
        client.get(ObjectRef("v1", "ConfigMap", "ns", "x"))


class Flaky:
    """A real HTTP server that fails the first ``failures`` requests with ``status``."""

    def __init__(self, status: int, failures: int, retry_after: str | None = "0") -> None:
        self.status, self.failures, self.seen = status, failures, 0
        self.authorization: list[str | None] = []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                flaky.seen += 1
                flaky.authorization.append(self.headers.get("Authorization"))
                if flaky.seen <= flaky.failures:
                    body = json.dumps({"kind": "Status", "reason": "TooManyRequests"}).encode()
                    self.send_response(flaky.status)
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                else:
                    body = json.dumps(_resources()).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def _resources() -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True}],
    }


@pytest.fixture
def flaky(request: pytest.FixtureRequest) -> Iterator[Flaky]:
    f = Flaky(*request.param)
    thread = threading.Thread(target=f.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f
    f.server.shutdown()
    f.server.server_close()


@pytest.mark.parametrize("flaky", [(429, 2), (503, 3), (500, 1)], indirect=True)
def test_transient_errors_are_retried(flaky: Flaky, tmp_path: Path) -> None:
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", flaky.url), retry=FAST)
    assert client.resource("v1", "ConfigMap").plural == "configmaps"
    assert flaky.seen == flaky.failures + 1


@pytest.mark.parametrize("flaky", [(503, 10)], indirect=True)
def test_persistent_errors_name_the_reason(flaky: Flaky, tmp_path: Path) -> None:
    """A 503 with Retry-After is throttling: it uses up the throttling budget, and counts."""
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", flaky.url), retry=FAST)
    with pytest.raises(KubeApiError, match=r"/api/v1: discovery failed \(TooManyRequests\)"):
        client.resource("v1", "ConfigMap")
    assert flaky.seen == FAST.throttle_attempts
    assert client.budget.throttled == FAST.throttle_attempts - 1


@pytest.mark.parametrize("flaky", [(503, 10, None)], indirect=True)
def test_a_failing_server_uses_up_the_failure_budget(flaky: Flaky, tmp_path: Path) -> None:
    """A 503 that does not say when to come back is a failure, not throttling."""
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", flaky.url), retry=FAST)
    with pytest.raises(KubeApiError):
        client.resource("v1", "ConfigMap")
    assert flaky.seen == FAST.attempts and client.budget.throttled == 0


@pytest.mark.parametrize("flaky", [(403, 1)], indirect=True)
def test_client_errors_are_not_retried(flaky: Flaky, tmp_path: Path) -> None:
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", flaky.url), retry=FAST)
    with pytest.raises(KubeApiError) as info:
        client.resource("v1", "ConfigMap")
    assert info.value.status == 403 and flaky.seen == 1


def test_server_warnings_are_returned_and_logged(
    sandbox: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``Warning: 299`` headers (here: a field the server dropped) reach the caller.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", sandbox.url), retry=FAST)
    body = {"metadata": {"name": "c"}, "data": {"a": "1"}, "dataa": {"b": "2"}}
    with caplog.at_level("WARNING", logger="reconciler.kube.client"):
        response = client.request(
            "POST", "/api/v1/namespaces/default/configmaps", subject="cm", verb="create", body=body
        )
    assert response.status == 201 and response.warnings == ('unknown field "dataa"',)
    assert 'cm: create: the API server warns: unknown field "dataa"' in caplog.text
    assert "dataa" not in response.body


def test_apply_is_strict_and_a_typed_patch_refusal_is_not_retried(
    sandbox: Any, tmp_path: Path
) -> None:
    """Apply sends ``fieldValidation=Strict``; the 500 a server answers for an undeclared
    field would come back on every retry, so it is raised at once, naming the field.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", sandbox.url), retry=FAST)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
    }
    sandbox.reset_request_log()
    assert client.apply(cm).status == 201
    with pytest.raises(KubeApiError) as info:
        client.apply({**cm, "dataa": {"a": "1"}})
    assert info.value.status == 500
    assert str(info.value).startswith("ConfigMap/default/c: apply failed")
    assert str(info.value).endswith(".dataa: field not declared in schema")
    patches = [e for e in sandbox.request_log() if e.method == "PATCH"]
    assert len(patches) == 2
    assert all("fieldValidation=Strict" in e.query for e in patches)


@pytest.mark.parametrize(
    ("values", "texts"),
    [
        (['299 - "a \\"quoted\\" text"'], ('a "quoted" text',)),
        (['299 - "one", 299 - "two, with comma"'], ("one", "two, with comma")),
        (['299 kube "dated" "Wed, 21 Oct 2015 07:28:00 GMT"'], ("dated",)),
        (['199 - "not a 299"', "garbage"], ()),
        (['299 - "back\\\\slash"'], ("back\\slash",)),
    ],
)
def test_warning_header_values_are_parsed(values: list[str], texts: tuple[str, ...]) -> None:
    assert parse_warnings(values) == texts


@pytest.mark.parametrize("flaky", [(200, 0)], indirect=True)
def test_the_credential_refresh_hook_runs_at_most_once_a_second(
    flaky: Flaky, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubeconfig loader's hook re-resolves the proxy from the whole environment:
    once per request it cost more CPU than the request. The token still goes on every
    request."""
    from kubernetes.client import configuration

    resolved: list[int] = []
    real = configuration.getproxies
    monkeypatch.setattr(configuration, "getproxies", lambda: resolved.append(1) or real())
    client = KubeClient.connect(kubeconfig(tmp_path / "cfg", flaky.url), retry=FAST)
    before = len(resolved)
    for _ in range(20):
        client.request("GET", "/api/v1", subject="/api/v1", verb="discovery")
    assert len(resolved) - before <= 3  # 20 requests; the hook ran once a second at most
    assert flaky.authorization[-20:] == ["Bearer t0ken"] * 20


class _Configuration:
    refresh_api_key_hook: Any = None
    host = ""


def test_a_throttled_refresh_runs_again_once_its_interval_passed() -> None:
    """The loader's hook puts a new hook of its own in place each time it runs (as
    ``kube_config._set_config`` does): the throttle stays, and calls the newest."""
    now = [100.0]
    calls: list[str] = []

    def loader_hook(name: str) -> Any:
        def hook(configuration: _Configuration) -> None:
            calls.append(name)
            configuration.refresh_api_key_hook = loader_hook(name + "'")

        return hook

    configuration = _Configuration()
    refresh = throttled_refresh(loader_hook("h"), interval=1.0, clock=lambda: now[0])
    configuration.refresh_api_key_hook = refresh
    refresh(configuration)
    refresh(configuration)
    now[0] += 0.99
    configuration.refresh_api_key_hook(configuration)
    assert calls == ["h"]
    assert configuration.refresh_api_key_hook is refresh
    now[0] += 0.02
    configuration.refresh_api_key_hook(configuration)
    assert calls == ["h", "h'"]
    assert configuration.refresh_api_key_hook is refresh


def test_the_configuration_keeps_the_throttle_while_the_loaders_hook_runs() -> None:
    """Another thread's request reads the configuration's hook at any moment: it must
    be the throttle even while the loader's hook runs (it installs a new hook of its
    own each time). When the loader's hook was left in place for that moment, the
    threads that read it called the loader's hook for every request from then on."""
    now = [100.0]
    configuration = _Configuration()
    seen: list[Any] = []

    def loader_hook(name: str) -> Any:
        def hook(target: Any) -> None:
            target.refresh_api_key_hook = loader_hook(name + "'")
            target.host = f"https://{name}"
            seen.append(configuration.refresh_api_key_hook)  # what a request sees now

        return hook

    refresh = throttled_refresh(loader_hook("h"), interval=1.0, clock=lambda: now[0])
    configuration.refresh_api_key_hook = refresh
    for _ in range(3):
        configuration.refresh_api_key_hook(configuration)
        now[0] += 1.5
    assert seen == [refresh] * 3
    assert configuration.refresh_api_key_hook is refresh
    assert configuration.host == "https://h''"  # the newest loader hook ran each time


def test_an_apply_body_is_sent_as_json_bytes_unless_orjson_cannot_encode_it() -> None:
    """Apply bodies are encoded with orjson (JSON is YAML, the apply content type);
    what orjson refuses, an integer past 64 bits, goes to the official client as an
    object, which encodes it with ``json.dumps`` as before."""
    body = {"metadata": {"name": "é"}, "data": {"k": "☃"}, "spec": {1: "one", "n": 3}}
    sent = _encoded(body)
    assert isinstance(sent, bytes)
    assert json.loads(sent) == {
        "metadata": {"name": "é"},
        "data": {"k": "☃"},
        "spec": {"1": "one", "n": 3},
    }
    huge = {"spec": {"n": 2**70}}
    assert _encoded(huge) is huge
    assert _encoded(b"{}") == b"{}"


def test_requests_keep_their_query_and_text_through_the_client(sandbox: Any) -> None:
    """The client builds each request's URL and headers itself (``_prepare``), from
    the official client's host, default headers and credentials: a label selector
    with ``/``, ``=`` and ``,`` selects what it says, and non-ASCII text in an apply
    body comes back as sent."""
    client = KubeClient.connect(sandbox.kubeconfig)
    for name, tier in (("web", "front"), ("db", "back")):
        answer = client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"prepared-{name}",
                    "namespace": "default",
                    "labels": {"app.kubernetes.io/name": "prepared", "tier": tier},
                    "annotations": {"note": "café ☃"},
                },
                "data": {"text": "naïve"},
            }
        )
        assert answer.body["metadata"]["annotations"]["note"] == "café ☃"
        assert answer.body["data"]["text"] == "naïve"
    found = client.list(
        "v1",
        "ConfigMap",
        namespace="default",
        label_selector="app.kubernetes.io/name=prepared,tier=back",
    )
    assert [o["metadata"]["name"] for o in found] == ["prepared-db"]
