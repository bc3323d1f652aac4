"""A real registry on 127.0.0.1 for tests and the demo, and the tools around it.

``running_registry`` runs the CNCF distribution server (Debian's ``docker-registry``
package, ``/usr/bin/docker-registry``) with filesystem storage in a directory,
deletes enabled, on a free loopback port; with ``token_auth=True`` it also runs
``TokenServer``, a small Docker-token-protocol issuer that demands Basic
credentials and signs RS256 JWTs with a key whose self-signed certificate is
the registry's ``rootcertbundle`` (distribution's ``registry/auth/token``
accepts a token whose ``x5c`` header chains to that bundle). Keys, certificate
and signatures come from the ``openssl`` command line, so no crypto library is
needed.

``push_image`` pushes a small generated image (config blob, one layer, an OCI
manifest) with the OCI API, as ``docker push`` would, with no Docker daemon;
``FaultProxy`` answers 500 to the first requests and forwards the rest, to show
that a client recovers from a registry that fails for a while.

Nothing here skips: a registry that cannot start raises ``RegistryStartError``
with the server's own output.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import secrets
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import urllib3

from reconciler.localserver import Readiness, free_port, server_process, wait_ready

REGISTRY_BINARY = "/usr/bin/docker-registry"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
SERVICE = "reconciler-test-registry"
ISSUER = "reconciler-test-token-issuer"


class RegistryStartError(RuntimeError):
    """The local registry (or its token server) could not be started; the message says why."""


@dataclass(frozen=True)
class LocalRegistry:
    """A running registry: ``host`` (``127.0.0.1:PORT``) goes into image references."""

    host: str
    directory: Path
    token_server: TokenServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def token(self, repository: str, actions: str = "pull,push,delete") -> str | None:
        """A token for pushing and deleting in tests (None when the registry is open)."""
        if self.token_server is None:
            return None
        return self.token_server.issue(f"repository:{repository}:{actions}", "admin")


def _config(directory: Path, port: int, token: TokenServer | None) -> str:
    lines = [
        "version: 0.1",
        "log:",
        "  level: warn",
        "  accesslog:",
        "    disabled: true",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {directory / 'storage'}",
        "  delete:",
        "    enabled: true",
        "  maintenance:",
        "    uploadpurging:",
        "      enabled: false",
        "http:",
        f"  addr: 127.0.0.1:{port}",
        f"  secret: {secrets.token_hex(16)}",
    ]
    if token is not None:
        lines += [
            "auth:",
            "  token:",
            f"    realm: {token.url}/token",
            f"    service: {SERVICE}",
            f"    issuer: {ISSUER}",
            f"    rootcertbundle: {token.certificate}",
        ]
    return "\n".join(lines) + "\n"


@contextmanager
def running_registry(
    directory: str | Path,
    *,
    token_auth: bool = False,
    username: str = "reader",
    password: str = "reader-secret",
    binary: str = REGISTRY_BINARY,
    start_timeout: float = 30.0,
    port: int | None = None,
) -> Iterator[LocalRegistry]:
    """Run the distribution registry on 127.0.0.1 until the block ends.

    ``token_auth`` puts it behind a ``TokenServer`` that grants tokens to
    ``username``/``password`` only. ``port`` fixes the port (e.g. 5000, for image
    names written in a catalog); by default a free one is taken.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    if shutil.which(binary) is None:
        raise RegistryStartError(
            f"{binary} not found: install the registry with `apt-get install -y docker-registry` "
            "(`make test` does this when it runs as root)"
        )
    token = TokenServer(root / "token", username, password) if token_auth else None
    try:
        if token is not None:
            token.start()
        tries = 1 if port is not None else 3  # a free port can be taken before we bind it
        for _attempt in range(tries):
            chosen = port if port is not None else free_port()
            config = root / "config.yml"
            config.write_text(_config(root, chosen, token), encoding="utf-8")
            argv = [binary, "serve", str(config)]
            with server_process(argv, log=root / "registry.log", cwd=root) as process:
                if _wait_ready(process, chosen, root, start_timeout):
                    yield LocalRegistry(f"127.0.0.1:{chosen}", root, token)
                    return
        raise RegistryStartError(
            f"{binary} exited before answering ({tries} tries); its log "
            f"({root / 'registry.log'}):\n{_tail(root / 'registry.log')}"
        )
    finally:
        if token is not None:
            token.stop()


def _wait_ready(process: subprocess.Popen[bytes], port: int, root: Path, timeout: float) -> bool:
    """True once ``GET /v2/`` answers (200, or 401 behind token auth); False if it exited.

    The read timeout starts short and doubles up to 2 s on every timeout: when the port
    belongs to another process that accepts connections but never answers (the registry
    itself exited at once, "address already in use"), the exit is seen after a tenth of
    a second rather than after a full 2 s read; a registry slow to answer under load
    still gets the longer reads on the next tries.
    """
    pool = urllib3.PoolManager(retries=False)
    read = 0.1

    def answers() -> bool | None:
        nonlocal read
        try:
            response = pool.request(
                "GET",
                f"http://127.0.0.1:{port}/v2/",
                timeout=urllib3.Timeout(connect=1.0, read=read),
            )
            return response.status in (200, 401)
        except urllib3.exceptions.ReadTimeoutError:
            read = min(read * 2, 2.0)
            return None  # the wait was the timeout itself: look at the process again now
        except urllib3.exceptions.HTTPError:
            return False

    try:
        readiness = wait_ready(process, answers, timeout=timeout, interval=0.05)
    finally:
        pool.clear()
    if readiness is Readiness.TIMED_OUT:
        raise RegistryStartError(
            f"the registry on 127.0.0.1:{port} did not answer /v2/ within {timeout:.0f}s; "
            f"its log ({root / 'registry.log'}):\n{_tail(root / 'registry.log')}"
        )
    return readiness is Readiness.READY


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- pushing images with the OCI API ---------------------------------------------------


def _layer(seed: str) -> bytes:
    """A small gzipped tar with one file whose content is ``seed``: a real layer."""
    data = seed.encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("seed.txt")
        info.size = len(data)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _headers(token: str | None, **extra: str) -> dict[str, str]:
    headers = dict(extra)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _upload(
    pool: urllib3.PoolManager, base: str, repository: str, blob: bytes, token: str | None
) -> str:
    """POST an upload session, then PUT the whole blob to it (a monolithic upload)."""
    digest = _digest(blob)
    started = pool.request(
        "POST", f"{base}/v2/{repository}/blobs/uploads/", headers=_headers(token)
    )
    if started.status != 202:
        raise RuntimeError(
            f"starting a blob upload to {repository}: HTTP {started.status}: {started.data[:200]!r}"
        )
    location = str(started.headers["Location"])
    if location.startswith("/"):
        location = base + location
    sep = "&" if "?" in location else "?"
    done = pool.request(
        "PUT",
        f"{location}{sep}digest={digest}",
        body=blob,
        headers=_headers(token, **{"Content-Type": "application/octet-stream"}),
    )
    if done.status != 201:
        raise RuntimeError(
            f"uploading blob {digest} to {repository}: HTTP {done.status}: {done.data[:200]!r}"
        )
    return digest


def image_manifest(base_url: str, repository: str, seed: str, token: str | None = None) -> bytes:
    """Upload a config and a layer made from ``seed`` and return the OCI manifest naming them."""
    layer = _layer(seed)
    diff_id = _digest(gzip.decompress(layer))
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": {"seed": seed}},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        },
        sort_keys=True,
    ).encode()
    pool = urllib3.PoolManager(retries=False)
    try:
        config_digest = _upload(pool, base_url, repository, config, token)
        layer_digest = _upload(pool, base_url, repository, layer, token)
    finally:
        pool.clear()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
    }
    return json.dumps(manifest, sort_keys=True).encode()


def put_manifest(
    base_url: str,
    repository: str,
    reference: str,
    manifest: bytes,
    token: str | None = None,
    *,
    pool: urllib3.PoolManager | None = None,
) -> str:
    """PUT ``manifest`` under a tag (or digest); returns the digest the registry gives it.

    Pass a ``pool`` to reuse connections when tagging many times.
    """
    own = pool is None
    pool = pool if pool is not None else urllib3.PoolManager(retries=False)
    try:
        response = pool.request(
            "PUT",
            f"{base_url}/v2/{repository}/manifests/{reference}",
            body=manifest,
            headers=_headers(token, **{"Content-Type": OCI_MANIFEST}),
        )
    finally:
        if own:
            pool.clear()
    if response.status != 201:
        raise RuntimeError(
            f"pushing manifest {repository}:{reference}: "
            f"HTTP {response.status}: {response.data[:300]!r}"
        )
    digest = str(response.headers.get("Docker-Content-Digest") or _digest(manifest))
    if digest != _digest(manifest):
        raise RuntimeError(
            f"the registry stored {repository}:{reference} as {digest}, not {_digest(manifest)}"
        )
    return digest


def push_image(
    base_url: str,
    repository: str,
    tag: str,
    *,
    extra_tags: Sequence[str] = (),
    seed: str | None = None,
    token: str | None = None,
) -> str:
    """Push a small generated image as ``repository:tag`` (and ``extra_tags``); its digest.

    ``seed`` decides the content (default: ``repository:tag``), so two pushes with
    different seeds are different images with different digests, like two builds.
    """
    manifest = image_manifest(base_url, repository, seed or f"{repository}:{tag}", token)
    digest = put_manifest(base_url, repository, tag, manifest, token)
    for extra in extra_tags:
        put_manifest(base_url, repository, extra, manifest, token)
    return digest


def delete_manifest(base_url: str, repository: str, digest: str, token: str | None = None) -> None:
    """DELETE a manifest by digest: every tag pointing at it goes too (deletes must be on)."""
    pool = urllib3.PoolManager(retries=False)
    try:
        response = pool.request(
            "DELETE", f"{base_url}/v2/{repository}/manifests/{digest}", headers=_headers(token)
        )
    finally:
        pool.clear()
    if response.status != 202:
        raise RuntimeError(
            f"deleting {repository}@{digest}: HTTP {response.status}: {response.data[:200]!r}"
        )


# --- the token server --------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _openssl(*args: str, data: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["openssl", *args], input=data, capture_output=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise RegistryStartError(
            "openssl is not installed (the token server signs with it)"
        ) from None
    if done.returncode != 0:
        raise RegistryStartError(
            f"openssl {args[0]} failed: {done.stderr.decode(errors='replace')}"
        )
    return done.stdout


@dataclass
class TokenServer:
    """Issues registry tokens to one user (Basic auth) or identity token, on 127.0.0.1.

    ``requests`` records each request's method, path and whether Basic
    credentials came with it, so a test can prove the client sent them.
    """

    directory: Path
    username: str
    password: str
    identity_token: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def key(self) -> Path:
        return self.directory / "key.pem"

    @property
    def certificate(self) -> Path:
        return self.directory / "cert.pem"

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the token server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=reconciler-test-token-issuer",
            "-keyout", str(self.key), "-out", str(self.certificate),
        )  # fmt: skip
        pem = self.certificate.read_text()
        body = pem.split("-----BEGIN CERTIFICATE-----")[1].split("-----END CERTIFICATE-----")[0]
        self._x5c = "".join(body.split())  # PEM's base64 is the DER the x5c header wants
        server = ThreadingHTTPServer(("127.0.0.1", 0), _token_handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(
            target=server.serve_forever, args=(0.05,), name="token-server", daemon=True
        ).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def issue(self, scope: str, subject: str) -> str:
        """A signed token granting every action ``scope`` (``type:name:actions``) asks for."""
        now = int(time.time())
        access = []
        for item in scope.split(" "):
            kind, _, rest = item.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind and name:
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        claims = {
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing = _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())
        signature = _openssl("dgst", "-sha256", "-sign", str(self.key), data=signing.encode())
        return signing + "." + _b64url(signature)

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)


def _token_handler(server: TokenServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # the test output stays quiet
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _grant(self, params: dict[str, list[str]], user: str | None) -> None:
            if user is None:
                self._answer(
                    401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]}
                )
                return
            scope = " ".join(params.get("scope", []))
            token = server.issue(scope, user)
            self._answer(200, {"token": token, "access_token": token, "expires_in": 300})

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            basic = self.headers.get("Authorization", "")
            user = None
            if basic.startswith("Basic "):
                try:
                    name, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
                except ValueError:
                    name, secret = "", ""
                if name == server.username and secret == server.password:
                    user = name
            server.record({"method": "GET", "path": url.path, "basic": basic.startswith("Basic ")})
            self._grant(parse_qs(url.query), user)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            refresh = (form.get("refresh_token") or [""])[0]
            good = bool(server.identity_token) and refresh == server.identity_token
            server.record(
                {"method": "POST", "path": self.path, "basic": False, "refresh": bool(refresh)}
            )
            self._grant(form, "identity" if good else None)

    return Handler


# --- a registry that fails for a while ---------------------------------------------------


@dataclass
class FaultProxy:
    """An HTTP proxy in front of ``upstream`` (``host:port``) that fails the first requests.

    The first ``failures`` requests are answered ``status`` (500 by default), with
    a ``Retry-After`` header when ``retry_after`` is set; the rest are forwarded.
    ``override(method, path, headers)`` may answer a request itself
    (``(status, headers, body)``), e.g. a malformed tags list or a Basic-auth
    challenge; returning None forwards it.

    ``paginate`` serves tag lists in pages as the distribution spec describes
    (``n`` and ``last``, lexical order, ``Link: <...?n=N&last=T>; rel="next"``,
    a relative URL) from the upstream's whole list. distribution 2.8, the
    packaged registry, ignores ``n`` on tag lists and answers every tag at once;
    distribution 3, Docker Hub, GHCR and Harbor page them, and a client that
    ignored ``Link`` would silently miss builds there.
    """

    upstream: str
    failures: int = 0
    paginate: bool = False
    status: int = 500
    retry_after: str | None = None
    override: (
        Callable[[str, str, Mapping[str, str]], tuple[int, dict[str, str], bytes] | None] | None
    ) = None
    seen: list[tuple[str, str, int]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FaultProxy:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(self))
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fault-proxy", daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def take_failure(self) -> bool:
        with self._lock:
            if self.failures > 0:
                self.failures -= 1
                return True
            return False


def _proxy_handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
            # recorded before answering: a client that got its answer sees it in ``seen``
            proxy.seen.append((self.command, self.path, status))
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if proxy.take_failure():
                headers = {"Content-Type": "application/json"}
                if proxy.retry_after is not None:
                    headers["Retry-After"] = proxy.retry_after
                self._reply(proxy.status, headers, b'{"errors":[{"code":"UNAVAILABLE"}]}')
                return
            answer = (
                proxy.override(self.command, self.path, dict(self.headers.items()))
                if proxy.override
                else None
            )
            if answer is not None:
                self._reply(*answer)
                return
            url = urlsplit(self.path)  # absolute-form when used as an HTTP proxy
            if proxy.paginate and self.command == "GET" and url.path.endswith("/tags/list"):
                self._reply(*self._page(url.path, parse_qs(url.query)))
                return
            target = url.path + (f"?{url.query}" if url.query else "")
            self._reply(*self._forward(target, body))

        def _page(
            self, path: str, query: dict[str, list[str]]
        ) -> tuple[int, dict[str, str], bytes]:
            status, headers, data = self._forward(path, None)
            if status != 200:
                return status, headers, data
            answer = json.loads(data)
            tags = sorted(answer.get("tags") or [])
            last = (query.get("last") or [""])[0]
            size = int((query.get("n") or ["100"])[0])
            rest = [t for t in tags if t > last] if last else tags
            answer["tags"] = rest[:size]
            out = {"Content-Type": "application/json"}
            if len(rest) > size:
                out["Link"] = f'<{path}?n={size}&last={rest[size - 1]}>; rel="next"'
            return 200, out, json.dumps(answer).encode()

        def _forward(self, path: str, body: bytes | None) -> tuple[int, dict[str, str], bytes]:
            host, _, port = proxy.upstream.partition(":")
            conn = http.client.HTTPConnection(host, int(port or 80), timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = proxy.upstream
                conn.request(self.command, path, body=body, headers=headers)
                response = conn.getresponse()
                return response.status, dict(response.getheaders()), response.read()
            finally:
                conn.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

    return Handler
