"""``reconciler version --server`` and ``reconciler reconcile`` against a real daemon HTTP server."""

from __future__ import annotations

import json
import socket
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import reconciler
from reconciler.cli import main
from reconciler.daemon.http import DaemonHealth, DaemonHttpServer
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.triggers import TriggerQueue
from reconciler.daemon.webhook import (
    GENERIC_SIGNATURE,
    WebhookRejected,
    parse_reconcile_request,
    reconcile_request_body,
    sign,
)
from tests.conftest import REPO_ROOT

SECRET = "s3cret"


@pytest.fixture
def server() -> Iterator[DaemonHttpServer]:
    http = DaemonHttpServer(
        "127.0.0.1",
        0,
        TriggerQueue(),
        DaemonMetrics(),
        DaemonHealth(),
        SECRET,
        "main",
        cluster="prod",
    )
    http.start()
    yield http
    http.stop()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_version_has_one_source() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "reconciler.__version__"


def test_client_and_daemon_versions(
    server: DaemonHttpServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "version")
    assert code == 0 and out.startswith(f"Client Version: {reconciler.__version__} (Python ")
    code, out, _ = run(capsys, "version", "--server", server.url, "-o", "json")
    data = json.loads(out)
    assert code == 0
    assert data["clientVersion"]["version"] == reconciler.__version__
    assert data["serverVersion"]["version"] == reconciler.__version__
    assert data["serverVersion"]["cluster"] == "prod"
    code, out, _ = run(
        capsys, "version", "--server", server.url.removeprefix("http://"), "-o", "yaml"
    )
    assert code == 0 and yaml.safe_load(out) == data
    code, out, _ = run(capsys, "version", "--server", server.url)
    assert f"Server Version: {reconciler.__version__} ({server.url}, cluster prod)" in out


def test_version_of_an_unreachable_daemon_is_an_environment_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, out, err = run(capsys, "version", "--server", url)
    assert code == 2
    assert out.startswith("Client Version: ")  # still says what it knows, like kubectl
    assert "cannot reach the daemon" in err


def test_reconcile_asks_the_daemon_for_a_pass(
    server: DaemonHttpServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("RECONCILER_WEBHOOK_SECRET", SECRET)
    code, out, _ = run(capsys, "reconcile", "--cluster", "prod", "--server", server.url)
    assert code == 0 and "reconcile requested: cluster prod" in out
    trigger = server.queue.wait(timeout=5)
    assert trigger is not None and trigger.reason == "request"
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    monkeypatch.delenv("RECONCILER_WEBHOOK_SECRET")
    code, out, _ = run(
        capsys, "reconcile", "--cluster", "prod", "--server", server.url,
        "--webhook-secret-file", str(secret_file), "-o", "json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["accepted"] is True
    assert server.queue.wait(timeout=5) is not None


def test_reconcile_refusals_start_no_pass(
    server: DaemonHttpServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "reconcile", "--cluster", "prod", "--server", server.url)
    assert code == 2 and "no webhook secret" in err
    monkeypatch.setenv("RECONCILER_WEBHOOK_SECRET", "wrong")
    code, _, err = run(capsys, "reconcile", "--cluster", "prod", "--server", server.url)
    assert code == 2 and "(401)" in err and "does not match" in err
    monkeypatch.setenv("RECONCILER_WEBHOOK_SECRET", SECRET)
    code, _, err = run(capsys, "reconcile", "--cluster", "staging", "--server", server.url)
    assert code == 2 and "(409)" in err and "reconciles cluster prod, not staging" in err
    url = f"http://127.0.0.1:{closed_port()}"
    code, _, err = run(capsys, "reconcile", "--cluster", "prod", "--server", url)
    assert code == 2 and "cannot reach the daemon" in err
    assert server.queue.pending() == 0
    assert SECRET not in err


def test_a_reconcile_request_is_signed_fresh_and_for_this_cluster() -> None:
    body = reconcile_request_body("prod", now=1_000_000)
    headers = {GENERIC_SIGNATURE: sign(body, SECRET)}
    assert parse_reconcile_request(headers, body, SECRET, "prod", now=1_000_100) == "prod"
    with pytest.raises(WebhookRejected) as replay:
        parse_reconcile_request(headers, body, SECRET, "prod", now=1_000_000 + 301)
    assert replay.value.status_code == 401
    with pytest.raises(WebhookRejected) as disabled:
        parse_reconcile_request(headers, body, "", "prod", now=1_000_000)
    assert disabled.value.status_code == 403
    tampered = body.replace(b"prod", b"prox")
    with pytest.raises(WebhookRejected) as forged:
        parse_reconcile_request(headers, tampered, SECRET, "prox", now=1_000_000)
    assert forged.value.status_code == 401
