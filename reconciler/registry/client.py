"""The OCI Distribution API v2 client: the only code that speaks to image registries.

Two questions are asked (https://github.com/opencontainers/distribution-spec/blob/main/spec.md):

* ``GET /v2/<name>/tags/list?n=N``: every tag of a repository, following the
  ``Link: <...>; rel="next"`` header (a relative URL) page by page. A ``Link`` to
  another origin (scheme, host or port) is refused, not followed: every request
  of the scan carries the registry's credentials, and a registry (or whoever
  answers for it) must not be able to send them, or the scan, anywhere else.
  Redirects behave the same way (urllib3 drops ``Authorization`` across hosts);
  no registry we know pages across origins;
* ``HEAD /v2/<name>/manifests/<reference>``: the manifest digest of a tag or
  digest, from ``Docker-Content-Digest``, accepting OCI indexes and manifests and
  Docker manifest lists and v2 manifests (so the digest is the one ``docker pull``
  and the kubelet resolve). 404 means "not there", an answer, not an error.

Authentication follows the registry's ``WWW-Authenticate`` answer: anonymous
first; ``Basic`` with the configured credentials; ``Bearer`` by fetching a token
from the challenge's realm for its service and scope (sending the credentials
there, when configured) and caching it per scope until it expires.

Connection errors, 5xx and 429 are retried a bounded number of times with
exponential backoff (429 and 503 honour ``Retry-After``); every request has a
connect and a read timeout, and a wall-clock deadline over all its tries: urllib3's
read timeout bounds each read of the socket only, so a registry that sends one byte
every few seconds would otherwise hold a scan forever. When the deadline passes, the
connection's socket is shut down from a timer (the only way to wake a blocked read).
``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` are honoured.
Every failure is a ``RegistryError`` naming the registry and what failed; no
credential or token ever reaches a message or a log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote, urlencode, urljoin, urlsplit

import urllib3
import urllib3.connection
import urllib3.connectionpool
import urllib3.response

from reconciler.model.errors import ReconcilerError, UsageError
from reconciler.model.images import is_digest
from reconciler.registry.auth import Challenge, Credential, Credentials, parse_challenges
from reconciler.registry.reference import Repository

log = logging.getLogger("reconciler.registry")

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
USER_AGENT = "reconciler-registry-client"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_RETRY_AFTER = 30.0
_MAX_PAGES = 10_000
_T = TypeVar("_T")
# the wall-clock (time.monotonic) time by which the request in flight on this thread
# must have its whole answer; None outside RegistryClient._send
_DEADLINE: ContextVar[float | None] = ContextVar("registry_request_deadline", default=None)
_REL_NEXT = re.compile(r'(?:^|;)\s*rel\s*=\s*"?(?:[^";]*\s)?next(?:\s[^";]*)?"?\s*(?:;|$)')


class RegistryError(ReconcilerError):
    """A registry could not answer: down, refused credentials, malformed answer, ...

    ``registry`` is the host as the image names it; the message says what was asked.
    """

    reason = "RegistryFailed"

    def __init__(self, registry: str, message: str) -> None:
        prefix = "registries" if "," in registry else "registry"
        super().__init__(f"{prefix} {registry}: {message}")
        self.registry = registry


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts per request, backoff, and the time limits of one request."""

    attempts: int = 4
    backoff: float = 0.25  # seconds before the 2nd attempt, doubled each time after
    max_backoff: float = 5.0
    connect_timeout: float = 5.0
    read_timeout: float = 30.0  # per read of the socket
    deadline: float = 120.0  # for one request's whole answer, all its tries included

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, _MAX_RETRY_AFTER)
        return float(min(self.backoff * (2**attempt), self.max_backoff))


@dataclass
class _Token:
    value: str
    expires: float


@dataclass
class RegistryClient:
    """Asks registries about tags and manifests; one per scan, sharing connections and tokens."""

    credentials: Credentials = field(default_factory=Credentials)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    page_size: int = 100
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    _pool: urllib3.PoolManager = field(init=False, repr=False)
    _proxies: dict[str, urllib3.ProxyManager] = field(init=False, repr=False)
    _tokens: dict[tuple[str, str, str], _Token] = field(init=False, repr=False)
    _schemes: dict[str, Challenge] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pool = _with_deadlines(urllib3.PoolManager(**self._options()))
        self._proxies = {}
        self._tokens = {}
        self._schemes = {}

    @classmethod
    def from_environment(cls, **kwargs: Any) -> RegistryClient:
        """A client with the credentials of ``RECONCILER_REGISTRY_*`` and docker's config.json."""
        try:
            credentials = Credentials.from_environment()
        except ValueError as e:  # a docker config.json that does not parse
            raise UsageError(str(e)) from None
        return cls(credentials=credentials, **kwargs)

    def close(self) -> None:
        self._pool.clear()
        for manager in self._proxies.values():
            manager.clear()

    def _options(self) -> dict[str, Any]:
        return {
            # our own loop retries; urllib3 only follows redirects (dropping Authorization
            # on a cross-host redirect, as its Retry.remove_headers_on_redirect says)
            "retries": urllib3.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=5),
            "timeout": urllib3.Timeout(
                connect=self.policy.connect_timeout, read=self.policy.read_timeout
            ),
            "headers": {"User-Agent": USER_AGENT},
        }

    def _pool_for(self, url: str) -> urllib3.PoolManager:
        """The connection pool for ``url``: through ``HTTPS_PROXY``/``HTTP_PROXY`` unless
        ``NO_PROXY`` exempts the host, read as curl and Python's urllib read them.

        Credentials in the proxy URL become a ``Proxy-Authorization`` header; the proxy
        URL is never logged.
        """
        parts = urlsplit(url)
        proxy = urllib.request.getproxies_environment().get(parts.scheme)
        if not proxy or urllib.request.proxy_bypass(parts.netloc):
            return self._pool
        manager = self._proxies.get(proxy)
        if manager is None:
            parsed = urllib3.util.parse_url(proxy if "://" in proxy else f"http://{proxy}")
            headers = (
                urllib3.util.make_headers(proxy_basic_auth=unquote(parsed.auth))
                if parsed.auth
                else None
            )
            bare = f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
            manager = _with_deadlines(
                urllib3.ProxyManager(bare, proxy_headers=headers, **self._options())
            )
            self._proxies[proxy] = manager
        return manager

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the two questions -------------------------------------------------------------

    def list_tags(self, repo: Repository) -> list[str]:
        """Every tag of ``repo``, all pages; a repository that does not exist is an error."""
        url: str | None = f"{repo.base_url}/v2/{repo.name}/tags/list?" + urlencode(
            {"n": self.page_size}
        )
        tags: list[str] = []
        seen: set[str] = set()
        while url is not None:
            if url in seen or len(seen) >= _MAX_PAGES:
                raise RegistryError(repo.host, f"tags of {repo.name}: pagination loops at {url}")
            seen.add(url)
            response = self._request("GET", url, repo, f"listing tags of {repo.name}")
            if response.status == 404:
                raise RegistryError(
                    repo.host, f"repository {repo.name} does not exist{_detail(response)}"
                )
            self._check(response, repo, f"listing tags of {repo.name}")
            tags.extend(_tags_page(response, repo))
            url = _next_link(response, url)
            if url is not None and _origin(url) != _origin(repo.base_url):
                raise RegistryError(
                    repo.host,
                    f"tags of {repo.name}: the next page is on another origin "
                    f"({_safe(url)}); refusing to follow it (the registry's credentials "
                    "go to the registry only)",
                )
        return tags

    def manifest_digest(self, repo: Repository, reference: str) -> str | None:
        """The manifest digest of a tag or digest in ``repo``; None when it does not exist."""
        url = f"{repo.base_url}/v2/{repo.name}/manifests/{reference}"
        what = f"manifest {repo.name}:{reference}"
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        response = self._request("HEAD", url, repo, what, headers)
        if response.status == 404:
            return None
        self._check(response, repo, what)
        digest = response.headers.get("Docker-Content-Digest")
        if not digest:
            # some registries send the digest only with the body: hash what GET returns
            response = self._request("GET", url, repo, what, headers)
            if response.status == 404:
                return None
            self._check(response, repo, what)
            digest = response.headers.get("Docker-Content-Digest") or (
                "sha256:" + hashlib.sha256(response.data).hexdigest()
            )
        if not is_digest(str(digest)):
            # it ends up in builds.yaml and in image references: never trust its shape
            raise RegistryError(
                repo.host,
                f"{what}: the registry answered the digest {str(digest)[:100]!r}, "
                "not sha256: and 64 lowercase hex digits",
            )
        return str(digest)

    # --- HTTP, auth and retries ---------------------------------------------------------

    def _request(
        self,
        method: str,
        url: str,
        repo: Repository,
        what: str,
        headers: Mapping[str, str] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """One API request, authenticated as the registry asks, retried when worth it."""
        scope = f"repository:{repo.name}:pull"
        sent = dict(headers or {})
        authorization = self._authorization(repo, scope)
        if authorization:
            sent["Authorization"] = authorization
        response = self._send(method, url, repo, what, sent)
        if response.status != 401:
            return response
        challenges = parse_challenges(str(response.headers.get("WWW-Authenticate", "")))
        if not challenges:
            raise RegistryError(repo.host, f"{what}: 401 Unauthorized without a challenge")
        challenge = _preferred(challenges)
        self._schemes[repo.api_host] = challenge
        if authorization and challenge.scheme == "bearer":
            self._tokens.pop(_token_key(challenge, scope), None)
        authorization = self._authorization(repo, scope)
        if not authorization:
            raise RegistryError(
                repo.host,
                f"{what}: the registry asks for credentials ({challenge.scheme.title()}) and "
                "none are configured for it (RECONCILER_REGISTRY_USERNAME/PASSWORD or a "
                "docker config.json)",
            )
        sent["Authorization"] = authorization
        response = self._send(method, url, repo, what, sent)
        if response.status == 401:
            raise RegistryError(repo.host, f"{what}: 401 Unauthorized: credentials were refused")
        return response

    def _authorization(self, repo: Repository, scope: str) -> str | None:
        challenge = self._schemes.get(repo.api_host)
        if challenge is None:
            return None  # anonymous until the registry says otherwise
        credential = self.credentials.for_host(repo.host)
        if challenge.scheme == "basic":
            return credential.basic() if credential and credential.password else None
        if challenge.scheme != "bearer":
            raise RegistryError(repo.host, f"unsupported auth scheme {challenge.scheme!r}")
        key = _token_key(challenge, scope)
        token = self._tokens.get(key)
        if token is None or token.expires <= self.clock():
            token = self._fetch_token(repo, challenge, scope, credential)
            self._tokens[key] = token
        return f"Bearer {token.value}"

    def _fetch_token(
        self, repo: Repository, challenge: Challenge, scope: str, credential: Credential | None
    ) -> _Token:
        """A bearer token from the challenge's realm (the Docker token protocol).

        https://distribution.github.io/distribution/spec/auth/token/ : GET the realm
        with ``service`` and ``scope``, Basic credentials when we have them; with an
        identity token, POST it as an OAuth2 refresh token instead.
        """
        realm = challenge.realm
        parsed = urlsplit(realm)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise RegistryError(repo.host, f"token realm {realm!r} is not an http(s) URL")
        if parsed.scheme == "http" and repo.scheme == "https":
            raise RegistryError(repo.host, f"refusing a plain-http token realm {realm!r}")
        params = {"scope": challenge.params.get("scope") or scope}
        if challenge.params.get("service"):
            params["service"] = challenge.params["service"]
        what = f"token from {parsed.netloc} for {params['scope']}"
        headers: dict[str, str] = {}
        if credential is not None and credential.identity_token:
            body = urlencode(
                {
                    **params,
                    "grant_type": "refresh_token",
                    "refresh_token": credential.identity_token,
                    "client_id": USER_AGENT,
                }
            )
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            response = self._send("POST", realm, repo, what, headers, body=body.encode())
        else:
            if credential is not None and (credential.username or credential.password):
                headers["Authorization"] = credential.basic()
            sep = "&" if parsed.query else "?"
            response = self._send("GET", realm + sep + urlencode(params), repo, what, headers)
        if response.status in (401, 403):
            refused = "were refused" if headers else "are needed and none are configured"
            raise RegistryError(repo.host, f"{what}: {response.status}: credentials {refused}")
        self._check(response, repo, what)
        try:
            data = json.loads(response.data)
            value = data.get("token") or data.get("access_token")
            expires_in = float(data.get("expires_in") or 60)
        except (ValueError, AttributeError, TypeError):
            raise RegistryError(repo.host, f"{what}: the answer is not a token document") from None
        if not isinstance(value, str) or not value:
            raise RegistryError(repo.host, f"{what}: the answer holds no token")
        # renew a little early, so a token never expires between check and use
        return _Token(value, self.clock() + max(expires_in - 10.0, 1.0))

    def _send(
        self,
        method: str,
        url: str,
        repo: Repository,
        what: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """The request with bounded retries; connection errors and 5xx/429 are retried.

        All tries share one deadline (``policy.deadline``); past it the request fails
        at once, without another try: a registry that stalls once stalls again.
        """
        attempts = max(self.policy.attempts, 1)
        deadline = time.monotonic() + self.policy.deadline
        for attempt in range(attempts):
            last = attempt == attempts - 1
            token = _DEADLINE.set(deadline)
            try:
                response = self._pool_for(url).request(
                    method, url, headers=dict(headers), body=body, redirect=True
                )
            except urllib3.exceptions.HTTPError as e:
                log.debug("%s %s failed: %s", method, _safe(url), type(e).__name__)
                if time.monotonic() >= deadline:
                    raise self._too_slow(repo, what) from None
                if last:
                    raise RegistryError(
                        repo.host, f"{what}: cannot connect ({_reason(e)}) after {attempts} tries"
                    ) from None
                self._pause(self.policy.delay(attempt, None), deadline, repo, what)
                continue
            finally:
                _DEADLINE.reset(token)
            log.debug("%s %s -> %s", method, _safe(url), response.status)
            if response.status not in _RETRY_STATUS or last:
                return response
            self._pause(self.policy.delay(attempt, _retry_after(response)), deadline, repo, what)
        raise AssertionError("unreachable")

    def _pause(self, seconds: float, deadline: float, repo: Repository, what: str) -> None:
        """Wait before the next try, unless that try could not start before the deadline."""
        if time.monotonic() + seconds >= deadline:
            raise self._too_slow(repo, what)
        self.sleep(seconds)

    def _too_slow(self, repo: Repository, what: str) -> RegistryError:
        return RegistryError(
            repo.host,
            f"{what}: no complete answer within {self.policy.deadline:g}s "
            "(the registry stalls or sends too slowly)",
        )

    def _check(self, response: urllib3.BaseHTTPResponse, repo: Repository, what: str) -> None:
        if 200 <= response.status < 300:
            return
        tries = f" after {self.policy.attempts} tries" if response.status in _RETRY_STATUS else ""
        raise RegistryError(repo.host, f"{what}: HTTP {response.status}{_detail(response)}{tries}")


class _Watchdog:
    """Shuts a connection's socket down when the request's deadline passes.

    A read blocked in another thread wakes with end-of-file, so http.client raises and
    urllib3 discards the connection. ``disarm`` and the timer take one lock, so a
    socket whose answer came in time is never shut down afterwards (it may go back
    to the pool).
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        self._armed = True

    def fire(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self._armed = False
            # socket.socket's own shutdown: an SSLSocket's would also drop its TLS state
            # under the reading thread's feet; OSError: already closed, nothing to wake
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def disarm(self) -> None:
        with self._lock:
            self._armed = False


def _by_deadline(sock: socket.socket | None, read: Callable[[], _T]) -> _T:
    """``read()`` (the status line, headers and body of an answer), cut off at the deadline."""
    deadline = _DEADLINE.get()
    if deadline is None or sock is None:
        return read()
    watchdog = _Watchdog(sock)
    timer = threading.Timer(max(deadline - time.monotonic(), 0.0), watchdog.fire)
    timer.daemon = True
    timer.start()
    try:
        return read()
    finally:
        watchdog.disarm()
        timer.cancel()


class _DeadlineHTTPConnection(urllib3.connection.HTTPConnection):
    """urllib3 reads (and, preloading, the whole body) in ``getresponse``: bound it."""

    # the ignore is urllib3's own: its getresponse narrows http.client's return type
    def getresponse(self) -> urllib3.response.HTTPResponse:  # type: ignore[override]
        return _by_deadline(self.sock, super().getresponse)


class _DeadlineHTTPSConnection(urllib3.connection.HTTPSConnection):
    def getresponse(self) -> urllib3.response.HTTPResponse:  # type: ignore[override]
        return _by_deadline(self.sock, super().getresponse)


class _DeadlineHTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _DeadlineHTTPConnection


class _DeadlineHTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _DeadlineHTTPSConnection


_M = TypeVar("_M", bound=urllib3.PoolManager)


def _with_deadlines(manager: _M) -> _M:
    """``manager``, its connections answering by the deadline of the request in flight."""
    manager.pool_classes_by_scheme = {"http": _DeadlineHTTPPool, "https": _DeadlineHTTPSPool}
    return manager


def _preferred(challenges: list[Challenge]) -> Challenge:
    for scheme in ("bearer", "basic"):
        for challenge in challenges:
            if challenge.scheme == scheme:
                return challenge
    return challenges[0]


def _token_key(challenge: Challenge, scope: str) -> tuple[str, str, str]:
    return (challenge.realm, challenge.params.get("service", ""), scope)


def _retry_after(response: urllib3.BaseHTTPResponse) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None  # an HTTP date: fall back to the backoff


def _tags_page(response: urllib3.BaseHTTPResponse, repo: Repository) -> list[str]:
    try:
        data = json.loads(response.data)
    except ValueError:
        raise RegistryError(
            repo.host, f"tags of {repo.name}: the answer is not JSON (malformed tags response)"
        ) from None
    tags = data.get("tags") if isinstance(data, dict) else None
    if tags is None and isinstance(data, dict) and "tags" in data:
        return []  # distribution answers "tags": null for a repository without tags
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise RegistryError(
            repo.host, f"tags of {repo.name}: malformed tags response (no list of strings)"
        )
    return list(tags)


def _next_link(response: urllib3.BaseHTTPResponse, current: str) -> str | None:
    """The ``rel="next"`` target of a ``Link`` header, resolved against the current URL."""
    for value in response.headers.get_all("Link") or ():
        for part in str(value).split(","):
            target, _, params = part.partition(";")
            target = target.strip()
            if target.startswith("<") and target.endswith(">") and _REL_NEXT.search(params):
                return urljoin(current, target[1:-1])
    return None


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    parsed = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parsed.scheme)
    try:
        port = parsed.port or default
    except ValueError:  # a port that is not a number: no origin matches it
        return parsed.scheme, "", -1
    return parsed.scheme, (parsed.hostname or "").lower(), port


def _detail(response: urllib3.BaseHTTPResponse) -> str:
    """The registry's own error code and message (distribution's ``errors`` list)."""
    try:
        data = json.loads(response.data or b"{}")
        errors = data.get("errors") if isinstance(data, dict) else None
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            code, message = errors[0].get("code", ""), errors[0].get("message", "")
            return f" ({code}: {message})"[:200] if code or message else ""
    except ValueError:
        pass
    return ""


def _reason(e: Exception) -> str:
    """What went wrong on the wire, in urllib3's words minus its object reprs and URLs:
    ``[Errno 111] Connection refused``, ``Read timed out. (read timeout=30)``."""
    reason = getattr(e, "reason", None) or e
    text = str(reason).rsplit(": ", 1)[-1].strip()
    return text[:120] or type(reason).__name__


def _safe(url: str) -> str:
    """A URL for logs: no query (a token realm's query carries the scope only, but be sure)."""
    return url.split("?", 1)[0]
