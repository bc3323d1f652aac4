"""Real Git servers on loopback for the source, status and ledger tests.

``GitDaemon`` runs ``git daemon`` (git:// protocol, push enabled); ``GitHttpServer``
serves ``git http-backend`` through a small threaded HTTP server that demands a
Basic-auth token, so HTTPS-style credential handling runs end to end. Both serve
bare repositories from a directory in the test's tmp_path.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import git as gitpython

from reconciler.source.runner import read_ref


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` (tests' pinned environment) and return stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def head(root: Path) -> str:
    """The commit at ``HEAD`` of the repository at ``root``, read from its ref files as
    the daemon reads refs (``read_ref``): a test's commit helper needs no ``git rev-parse``."""
    commit = read_ref(gitpython.Repo(str(root)), "HEAD")
    assert commit is not None, f"{root}: no commit at HEAD"
    return commit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


class GitDaemon:
    """``git daemon`` serving every repository under ``base`` with push enabled."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> GitDaemon:
        for _ in range(5):  # a free port can be taken between probe and bind
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    "git",
                    "daemon",
                    "--reuseaddr",
                    "--export-all",
                    "--enable=receive-pack",
                    f"--base-path={self.base}",
                    "--listen=127.0.0.1",
                    f"--port={self.port}",
                    str(self.base),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # its own process group: ``git daemon`` is a wrapper that starts
                # ``git-daemon``, which forks a child per connection; ``stop`` ends them all
                start_new_session=True,
            )
            try:
                _wait_for_port(self.port, self.proc)
                return self
            except RuntimeError:
                self.stop()
        raise RuntimeError("git daemon did not start")

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """End the daemon and every process it started (its whole process group).

        Terminating only the ``git`` wrapper relies on Git passing the signal on to
        ``git-daemon``; one run of the suite left six of them serving after the tests
        that started them had ended. The group's leader is reaped here; what is left of
        the group exits on the same signal (its reaping is init's).
        """
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


class GitHttpServer:
    """``git http-backend`` behind an HTTP server that requires ``user:token`` Basic auth."""

    def __init__(self, base: Path, user: str, token: str) -> None:
        self.base = base
        self.expected = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
        self.server: ThreadingHTTPServer | None = None
        self.requests: list[dict[str, Any]] = []

    def start(self) -> GitHttpServer:
        handler = _make_handler(self)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # shutdown() waits for serve_forever's next look at its flag: every 50 ms, not
        # the default 500 ms (up to half a second at the end of each test that used it)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def url(self, name: str, userinfo: str = "") -> str:
        at = f"{userinfo}@" if userinfo else ""
        return f"http://{at}127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _make_handler(owner: GitHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return

        def do_GET(self) -> None:
            self._cgi()

        def do_POST(self) -> None:
            self._cgi()

        def _cgi(self) -> None:
            auth = self.headers.get("Authorization", "")
            owner.requests.append({"path": self.path, "auth": auth})
            if auth != owner.expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = self._body()
            path, _, query = self.path.partition("?")
            env = {
                **os.environ,
                "GIT_PROJECT_ROOT": str(owner.base),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": "tester",
                "REMOTE_ADDR": "127.0.0.1",
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            proc = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = proc.stdout.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").split("\r\n"):
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    status = int(value.strip().split()[0])
                elif key:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length", "0") or 0)
            return self.rfile.read(length) if length else b""

    return Handler


class SilentServer:
    """Accepts TCP connections and never answers: a remote that hangs."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def stop(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()
