"""Slow and malformed clients of the daemon's HTTP servers (issue 28).

A client sending its request one byte at a time held a connection (headers) or a
handler (body) for as long as it liked, and a malformed request logged aiohttp's
traceback at error level. Now headers and bodies have time limits and a
malformed request is one debug line.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from reconciler.daemon.http import DaemonHealth, DaemonHttpServer, _ServerLog
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.triggers import TriggerQueue

DRIP = 0.2  # seconds between two bytes
PATIENCE = 30.0  # how long a test waits for the server to give up (it should in ~1 s)


@pytest.fixture
def server() -> Iterator[DaemonHttpServer]:
    running = DaemonHttpServer(
        "127.0.0.1",
        0,
        TriggerQueue(),
        DaemonMetrics(),
        DaemonHealth(stale_after=30.0),
        "hook-secret",
        "main",
        header_timeout=1.0,
        body_timeout=1.0,
    )
    running.start()
    yield running
    running.stop()


def drip(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data`` a byte every DRIP seconds (then wait) until the server answers or
    closes; what it answered (b"" for a close without an answer)."""
    sock.settimeout(DRIP)
    deadline = time.monotonic() + PATIENCE
    sent = 0
    while time.monotonic() < deadline:
        if sent < len(data):
            try:
                sock.sendall(data[sent : sent + 1])
            except OSError:
                return b""
            sent += 1
        try:
            answer = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return b""
        return answer
    raise AssertionError(f"the server still waits after {PATIENCE}s")


def test_headers_sent_a_byte_at_a_time_are_cut_off(server: DaemonHttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        answer = drip(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000)
    assert answer == b""  # closed: no request was ever complete


def test_a_body_sent_a_byte_at_a_time_gets_408(server: DaemonHttpServer) -> None:
    head = (
        b"POST /hooks/generic HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
        b"Content-Type: application/json\r\nX-Reconciler-Signature: sha256=00\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head)
        answer = drip(sock, b"{" + b" " * 999)
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1]) == {
        "accepted": False,
        "error": "body not received within 1s",
    }


def test_headers_in_time_are_served(server: DaemonHttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
        b"GET /version HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS on a plain port\r\n\r\n",
    ],
    ids=["bad-header-name", "header-too-long", "tls-hello"],
)
def test_a_malformed_request_is_one_debug_line(
    server: DaemonHttpServer, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request_bytes)
        assert sock.recv(65536).startswith((b"HTTP/1.1 400", b"HTTP/1.0 400"))
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and not _server_records(caplog):
        time.sleep(0.05)
    records = _server_records(caplog)
    assert records, "the malformed request was not logged at all"
    assert all(r.levelno == logging.DEBUG and r.exc_info is None for r in records)
    assert all("\n" not in r.getMessage() for r in records)
    assert "Error handling request from 127.0.0.1: " in records[0].getMessage()


def test_a_fault_in_our_own_handlers_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = _ServerLog(logging.getLogger("aiohttp.server"), {})
    try:
        raise RuntimeError("a bug of ours")
    except RuntimeError:
        adapter.exception("Error handling request from %s", "127.0.0.1")
    (record,) = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert record.levelno == logging.ERROR and record.exc_info is not None


def _server_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "aiohttp.server"]
