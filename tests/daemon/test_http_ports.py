"""Webhooks, metrics and probes on ports of their own (issue 14).

An Ingress that publishes the webhook port must expose neither ``/metrics`` nor the
probes, so ``reconciler run`` can serve each route group on its own address. Each
path is requested on every port over real loopback HTTP: it answers only on its own.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json

import pytest

from reconciler.daemon.http import ROUTE_GROUPS, DaemonHealth, DaemonHttpServer
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.service import http_listeners
from reconciler.daemon.triggers import TriggerQueue
from reconciler.model.errors import UsageError
from tests.daemon.conftest import World
from tests.daemon.test_service import eventually, running

SECRET = "ports-secret"


def get(port: int, method: str, path: str, body: bytes = b"") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers = {"X-Reconciler-Signature": signature, "Content-Type": "application/json"}
        conn.request(method, path, body=body or None, headers=headers if body else {})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_one_address_serves_every_group_as_before() -> None:
    assert http_listeners(":8080") == [(("0.0.0.0", 8080), list(ROUTE_GROUPS))]
    assert http_listeners("") == []


def test_each_flag_moves_its_group_to_a_server_of_its_own() -> None:
    assert http_listeners(":8080", ":8081", ":8082") == [
        (("0.0.0.0", 8080), ["metrics"]),
        (("0.0.0.0", 8081), ["webhooks"]),
        (("0.0.0.0", 8082), ["probes"]),
    ]
    # the same address twice is one server; port 0 ("any free port") never is
    assert http_listeners(":8080", ":8081", ":8080") == [
        (("0.0.0.0", 8080), ["metrics", "probes"]),
        (("0.0.0.0", 8081), ["webhooks"]),
    ]
    assert [g for _, g in http_listeners("127.0.0.1:0", "", "127.0.0.1:0")] == [
        ["metrics", "webhooks"],
        ["probes"],
    ]
    # webhooks without metrics: serving only the hooks is allowed
    assert http_listeners("", ":8081") == [(("0.0.0.0", 8081), ["webhooks"])]


def test_a_bad_address_names_its_flag() -> None:
    with pytest.raises(UsageError, match='--probe-address "x:y"'):
        http_listeners(":8080", "", "x:y")


def test_a_server_refuses_unknown_route_groups() -> None:
    with pytest.raises(ValueError, match="route groups"):
        DaemonHttpServer(
            "127.0.0.1", 0, TriggerQueue(), DaemonMetrics(), DaemonHealth(), None, None,
            routes=["ui"],
        )  # fmt: skip


def test_every_path_answers_only_on_its_own_port(world: World) -> None:
    daemon = world.new_daemon(
        interval=3600.0,
        drift_interval=3600.0,
        metrics_address="127.0.0.1:0",
        webhook_address="127.0.0.1:0",
        probe_address="127.0.0.1:0",
        webhook_secret=SECRET,
    )
    with running(daemon) as service:
        eventually(lambda: len(service.ports) == 3)
        ports = service.ports
        assert len(set(ports.values())) == 3
        assert service.http_port == ports["metrics"]
        hook = json.dumps({"ref": "refs/heads/main"}).encode()
        paths = {
            "metrics": [("GET", "/metrics", b"")],
            "probes": [("GET", "/healthz", b""), ("GET", "/readyz", b"")],
            "webhooks": [("POST", "/hooks/generic", hook), ("POST", "/reconcile", b"{}")],
        }
        for group, requests in paths.items():
            for method, path, body in requests:
                for other, port in ports.items():
                    status = get(port, method, path, body)
                    if other == group:
                        assert status != 404, (path, other, status)
                    else:
                        assert status == 404, (path, other, status)
        for port in ports.values():  # which build answers, from any port
            assert get(port, "GET", "/version") == 200
