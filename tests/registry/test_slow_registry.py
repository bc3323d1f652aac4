"""A registry that drips its answer must not hold a scan forever (issue 28).

urllib3's read timeout bounds each read of the socket; a server sending one byte
every few seconds never trips it. These tests serve such drips from a small local
server (one thread per connection, a byte every 0.2 s, for as long as the client
listens) and expect the client's wall-clock deadline to end the request.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from reconciler.registry import RegistryClient, RegistryError, RetryPolicy, repository_of
from reconciler.registry.local import LocalRegistry, push_image

DRIP = 0.2  # seconds between two bytes: far below the read timeout
SLOW = RetryPolicy(
    attempts=3, backoff=0.01, max_backoff=0.05, connect_timeout=2, read_timeout=10, deadline=1.5
)


@contextmanager
def dripping_server(part: str) -> Iterator[tuple[str, list[int]]]:
    """``host:port`` of a server that drips ``part`` (``headers`` or ``body``), and a list
    that counts its connections."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    connections: list[int] = []

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)  # the request (small, one segment)
            if part == "headers":
                head, body = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10_000, b""
            else:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                head += b"Content-Length: 100000\r\n\r\n"
                body = b'{"name": "x", "tags": [' + b" " * 100_000
            conn.sendall(head if part == "body" else b"")
            for byte in head if part == "headers" else body:
                if stop.wait(DRIP):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up: what the test wants

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(1)
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", connections
    finally:
        stop.set()
        listener.close()


@pytest.mark.parametrize(
    ("part", "ask"),
    [
        ("body", lambda c, repo: c.list_tags(repo)),
        ("headers", lambda c, repo: c.manifest_digest(repo, "1.0.0")),
    ],
    ids=["tags-body", "manifest-headers"],
)
def test_a_dripping_registry_fails_the_request_at_its_deadline(part: str, ask: object) -> None:
    """Before the deadline, a drip of one byte every 5 s hung ``images scan`` forever."""
    with (
        dripping_server(part) as (host, connections),
        RegistryClient(policy=SLOW) as client,
        ThreadPoolExecutor(1) as worker,
    ):
        asked = worker.submit(ask, client, repository_of(f"{host}/team/app"))  # type: ignore[arg-type]
        # generous: the deadline is 1.5 s; without one this never returns
        error = asked.exception(timeout=60)
    assert isinstance(error, RegistryError)
    assert "no complete answer within 1.5s (the registry stalls or sends too slowly)" in str(error)
    assert len(connections) == 1  # a registry that stalled once is not asked again


def test_answers_in_time_keep_their_connection_after_the_deadline(
    registry: LocalRegistry, repo_name: str
) -> None:
    """The watchdog of an answer that came in time never fires later: the connection it
    leaves in the pool still serves the next request after the deadline has passed."""
    push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    quick = RetryPolicy(attempts=1, connect_timeout=2, read_timeout=10, deadline=0.3)
    repo = repository_of(f"{registry.host}/{repo_name}")
    with RegistryClient(policy=quick) as client:
        assert client.list_tags(repo) == ["1.0.0-rev1-b1"]
        threading.Event().wait(0.6)  # past the first request's deadline
        assert client.list_tags(repo) == ["1.0.0-rev1-b1"]
        assert client.manifest_digest(repo, "1.0.0-rev1-b1") is not None
