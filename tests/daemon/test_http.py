"""DaemonHttpServer over real loopback HTTP: webhooks, metrics, health and readiness."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.daemon.http import DaemonHealth, DaemonHttpServer
from reconciler.daemon.logs_limit import RateLimitedLog
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.triggers import TriggerQueue
from reconciler.model.errors import UsageError

SECRET = "hook-secret"
SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Daemon:
    server: DaemonHttpServer
    queue: TriggerQueue
    metrics: DaemonMetrics
    health: DaemonHealth
    clock: FakeClock

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def post_json(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        status, _, data = self.request("POST", path, body, headers)
        return status, json.loads(data)


def make_daemon(secret: str | None = SECRET, max_body: int = 4096) -> Daemon:
    clock = FakeClock()
    queue, metrics = TriggerQueue(), DaemonMetrics()
    health = DaemonHealth(stale_after=30.0, clock=clock)
    server = DaemonHttpServer(
        "127.0.0.1", 0, queue, metrics, health, secret, "main", max_body=max_body
    )
    server.start()
    return Daemon(server, queue, metrics, health, clock)


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = make_daemon()
    yield running
    running.server.stop()


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_headers(body: bytes, event: str = "push") -> dict[str, str]:
    return {
        "X-Hub-Signature-256": signed(body),
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "d-1",
        "Content-Type": "application/json",
    }


def push(branch: str = "main") -> bytes:
    return json.dumps({"ref": f"refs/heads/{branch}", "after": SHA}).encode()


def webhook_count(metrics: DaemonMetrics, provider: str, result: str) -> float:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name == "reconciler_webhooks_total" and sample.labels == {
                "provider": provider,
                "result": result,
            }:
                return sample.value
    return 0.0


def test_github_push_starts_a_pass(daemon: Daemon) -> None:
    body = push()
    status, answer = daemon.post_json("/hooks/github", body, github_headers(body))
    assert status == 202
    assert answer == {
        "accepted": True,
        "provider": "github",
        "event": "push",
        "branch": "main",
        "commit": SHA,
        "triggered": True,
    }
    trigger = daemon.queue.wait(timeout=0)
    assert trigger is not None and trigger.reason == "webhook"
    assert trigger.detail == f"github push to main at {SHA[:12]} (delivery d-1)"
    assert webhook_count(daemon.metrics, "github", "triggered") == 1


def test_a_burst_of_pushes_is_one_more_pass(daemon: Daemon) -> None:
    body = push()
    for _ in range(10):
        assert daemon.post_json("/hooks/github", body, github_headers(body))[0] == 202
    assert daemon.queue.wait(timeout=0) is not None
    assert daemon.queue.wait(timeout=0) is None


def test_gitlab_and_generic_pushes(daemon: Daemon) -> None:
    body = push()
    headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"}
    assert daemon.post_json("/hooks/gitlab", body, headers)[0] == 202
    assert daemon.queue.wait(timeout=0) is not None

    body = b'{"branch": "main"}'
    status, answer = daemon.post_json(
        "/hooks/generic", body, {"X-Reconciler-Signature": signed(body)}
    )
    assert (status, answer["triggered"]) == (202, True)
    trigger = daemon.queue.wait(timeout=0)
    assert trigger is not None and trigger.detail == "generic push to main"


def test_push_to_another_branch_is_accepted_but_ignored(daemon: Daemon) -> None:
    body = push("feature/x")
    status, answer = daemon.post_json("/hooks/github", body, github_headers(body))
    assert status == 202
    assert answer["triggered"] is False
    assert answer["reason"] == (
        f"github push to feature/x at {SHA[:12]} (delivery d-1); following main"
    )
    assert daemon.queue.wait(timeout=0) is None
    assert webhook_count(daemon.metrics, "github", "ignored") == 1


def test_github_ping_answers_200_without_a_pass(daemon: Daemon) -> None:
    body = b'{"zen": "Design for failure."}'
    status, answer = daemon.post_json("/hooks/github", body, github_headers(body, "ping"))
    assert (status, answer["triggered"], answer["reason"]) == (200, False, "ping")
    assert daemon.queue.wait(timeout=0) is None


@pytest.mark.parametrize(
    ("path", "headers", "body", "status", "error"),
    [
        (
            "/hooks/github",
            {"X-GitHub-Event": "push"},
            push(),
            401,
            "missing X-Hub-Signature-256 header",
        ),
        (
            "/hooks/github",
            {"X-GitHub-Event": "push", "X-Hub-Signature-256": signed(push(), "not-the-secret")},
            push(),
            401,
            "X-Hub-Signature-256 does not match the body and the webhook secret",
        ),
        (
            "/hooks/gitlab",
            {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "guess"},
            push(),
            401,
            "X-Gitlab-Token does not match the webhook secret",
        ),
        ("/hooks/generic", {}, b"{}", 401, "missing X-Reconciler-Signature header"),
        (
            "/hooks/generic",
            {"X-Reconciler-Signature": signed(b"{oops")},
            b"{oops",
            400,
            "body is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            "/hooks/github",
            {"X-Hub-Signature-256": signed(push())},
            push(),
            400,
            "missing X-GitHub-Event header",
        ),
    ],
)
def test_rejections(
    daemon: Daemon, path: str, headers: dict[str, str], body: bytes, status: int, error: str
) -> None:
    assert daemon.post_json(path, body, headers) == (status, {"accepted": False, "error": error})
    assert daemon.queue.wait(timeout=0) is None
    provider = path.rsplit("/", 1)[1]
    assert webhook_count(daemon.metrics, provider, "rejected") == 1


def test_body_too_large(daemon: Daemon) -> None:
    body = b'{"pad": "' + b"x" * 5000 + b'"}'
    status, answer = daemon.post_json(
        "/hooks/generic", body, {"X-Reconciler-Signature": signed(body)}
    )
    assert (status, answer) == (413, {"accepted": False, "error": "body larger than 4096 bytes"})
    assert daemon.queue.wait(timeout=0) is None


def test_body_too_large_without_content_length(daemon: Daemon) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.server.port, timeout=10)
    try:
        chunks = iter([b"x" * 3000, b"y" * 3000])
        conn.request(
            "POST",
            "/hooks/generic",
            body=chunks,
            encode_chunked=True,
            headers={"X-Reconciler-Signature": "sha256=00"},
        )
        response = conn.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["error"] == "body larger than 4096 bytes"
    finally:
        conn.close()


def test_wrong_method_and_unknown_path_answer_json(daemon: Daemon) -> None:
    status, headers, body = daemon.request("GET", "/hooks/github")
    assert status == 405
    assert headers["Allow"] == "POST"
    assert json.loads(body) == {"error": "Method Not Allowed"}
    status, _, body = daemon.request("GET", "/nowhere")
    assert (status, json.loads(body)) == (404, {"error": "Not Found"})


def test_hooks_are_refused_without_a_secret() -> None:
    running = make_daemon(secret=None)
    try:
        body = push()
        status, answer = running.post_json("/hooks/github", body, github_headers(body))
        assert (status, answer["error"]) == (
            403,
            "webhooks are disabled: no webhook secret is configured",
        )
    finally:
        running.server.stop()


def test_metrics_endpoint_serves_the_registry(daemon: Daemon) -> None:
    daemon.metrics.observe_pass("prod", 1.5, ok=True)
    daemon.metrics.set_phases("prod", {"Ready": 2})
    status, headers, body = daemon.request("GET", "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=")
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    assert values[("reconciler_pass_duration_seconds_count", (("cluster", "prod"),))] == 1
    assert values[("reconciler_instances", (("cluster", "prod"), ("phase", "Ready")))] == 2


def test_healthz_follows_the_heartbeat(daemon: Daemon) -> None:
    status, _, body = daemon.request("GET", "/healthz")
    assert (status, json.loads(body)["status"]) == (200, "ok")
    daemon.clock.now += 31
    status, _, body = daemon.request("GET", "/healthz")
    assert status == 503
    assert json.loads(body) == {"status": "stale", "secondsSinceHeartbeat": 31.0}
    daemon.health.heartbeat()
    assert daemon.request("GET", "/healthz")[0] == 200


def test_readyz_after_the_first_pass(daemon: Daemon) -> None:
    status, _, body = daemon.request("GET", "/readyz")
    assert (status, json.loads(body)) == (
        503,
        {"status": "starting", "passes": 0, "lastPassOk": None},
    )
    daemon.health.pass_completed(ok=False)
    status, _, body = daemon.request("GET", "/readyz")
    assert (status, json.loads(body)) == (
        200,
        {"status": "ready", "passes": 1, "lastPassOk": False},
    )


def test_readyz_reports_leadership(daemon: Daemon) -> None:
    daemon.health.set_leader(False)  # a standby replica is ready to take over
    status, _, body = daemon.request("GET", "/readyz")
    assert (status, json.loads(body)["leader"]) == (200, False)
    daemon.health.set_leader(True)  # a fresh leader is ready after its first pass
    assert daemon.request("GET", "/readyz")[0] == 503
    daemon.health.pass_completed(ok=True)
    status, _, body = daemon.request("GET", "/readyz")
    assert (status, json.loads(body)["leader"]) == (200, True)


def test_taken_port_is_a_usage_error(daemon: Daemon) -> None:
    other = DaemonHttpServer(
        "127.0.0.1",
        daemon.server.port,
        TriggerQueue(),
        DaemonMetrics(),
        DaemonHealth(),
        SECRET,
        None,
    )
    with pytest.raises(UsageError, match=rf"cannot listen on 127.0.0.1:{daemon.server.port}: "):
        other.start()
    other.stop()  # nothing started: a no-op


def test_stop_closes_the_port_and_is_idempotent() -> None:
    running = make_daemon()
    port = running.server.port
    assert running.server.url == f"http://127.0.0.1:{port}"
    running.server.stop()
    running.server.stop()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_repr_hides_the_secret(daemon: Daemon) -> None:
    assert SECRET not in repr(daemon.server)


def test_a_deeply_nested_signed_body_is_a_json_400(daemon: Daemon) -> None:
    # issue 8: this used to be a plain-text 500 from a RecursionError
    body = b"[" * 2000 + b"]" * 2000  # within the 4096-byte limit of this test server
    status, answer = daemon.post_json(
        "/hooks/generic", body, {"X-Reconciler-Signature": signed(body)}
    )
    assert (status, answer) == (
        400,
        {"accepted": False, "error": "body is nested too deeply to be a webhook"},
    )


def test_rejections_are_summarised_not_logged_one_by_one(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(50):
        daemon.post_json("/hooks/generic", push(), {"X-Reconciler-Signature": "sha256=00"})
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert webhook_count(daemon.metrics, "generic", "rejected") == 50


def test_summary_line_counts_what_was_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    limited = RateLimitedLog(logging.getLogger("test.limit"), "webhook rejected", clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.limit"):
        for _ in range(5):
            limited.note("generic (401)", "bad signature")
        clock.now += 61
        limited.note("generic (401)", "bad signature")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "webhook rejected generic (401): bad signature (similar ones are summarised)",
        "4 more webhook rejected in the last 61s (generic (401): 4)",
        "webhook rejected generic (401): bad signature (similar ones are summarised)",
    ]


def test_a_client_that_disconnects_mid_body_logs_no_error(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.create_connection(("127.0.0.1", daemon.server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /hooks/generic HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
            b'X-Reconciler-Signature: sha256=00\r\n\r\n{"partial": '
        )
    time.sleep(0.5)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
