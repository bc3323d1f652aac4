"""The daemon's HTTP side: webhooks in, metrics and health probes out.

``reconciler run`` starts one ``DaemonHttpServer`` next to the reconcile loop. It
serves an aiohttp application on its own event loop in a background thread, like a
sidecar, so the loop stays plain synchronous code and a slow pass never delays a
probe. The two sides share three thread-safe objects: the ``TriggerQueue`` (a
verified push becomes a ``webhook`` trigger), ``DaemonMetrics`` and ``DaemonHealth``
(which the loop updates: a heartbeat while alive, a mark when a pass completes).

Routes::

    POST /hooks/github | /hooks/gitlab | /hooks/generic   202 (200 for a ping)
    POST /reconcile  202: a pass now (``reconciler reconcile``; signed like /hooks/generic)
    GET  /version    the daemon's version (``reconciler version --server URL``)
    GET  /metrics    Prometheus text
    GET  /healthz    200 while the loop heartbeats, 503 once it is stale
    GET  /readyz     200 once the first pass completed (or a standby replica), else 503
    GET  /ui/        the status page of the daemon's status branch (read-only HTML)

Every answer, errors included, is JSON except ``/metrics`` and ``/ui``.

Slow clients are cut off, as a reverse proxy would: a connection has
``HEADER_TIMEOUT`` seconds to send a request's headers (from when it opened, or
from the previous answer on a kept-alive connection), and a handler waits at most
``BODY_TIMEOUT`` seconds for the body (then 408). Without them, a client dripping
a byte now and then held a connection and a handler for as long as it liked. A
malformed request is the client's fault: aiohttp's traceback at error level becomes
one line at debug level (``_ServerLog``); a fault in our own handlers keeps its
traceback.

The routes come in three groups, ``webhooks`` (``/hooks/*`` and ``/reconcile``),
``metrics`` (``/metrics`` and the status page ``/ui``) and ``probes`` (``/healthz``,
``/readyz``); ``/version`` is in every server. One server serves all three by default;
``reconciler run --webhook-address`` and ``--probe-address`` give groups servers of
their own, so an Ingress publishing the webhook port exposes neither ``/metrics`` nor
the probes.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from concurrent.futures import Future
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

import reconciler
from reconciler.daemon.logs_limit import RateLimitedLog
from reconciler.daemon.metrics import CONTENT_TYPE, DaemonMetrics
from reconciler.daemon.probes import DEFAULT_STALE_AFTER as DEFAULT_STALE_AFTER
from reconciler.daemon.probes import METRICS as METRICS
from reconciler.daemon.probes import PROBES as PROBES
from reconciler.daemon.probes import ROUTE_GROUPS as ROUTE_GROUPS
from reconciler.daemon.probes import WEBHOOKS as WEBHOOKS
from reconciler.daemon.probes import DaemonHealth as DaemonHealth
from reconciler.daemon.triggers import Trigger, TriggerQueue
from reconciler.daemon.webhook import (
    PROVIDERS,
    WebhookRejected,
    parse_reconcile_request,
    parse_webhook,
)
from reconciler.model.errors import ReconcilerError, UsageError

log = logging.getLogger(__name__)
# DaemonHealth and the route groups live in reconciler.daemon.probes, so that a daemon
# serving no HTTP never imports aiohttp; they are re-exported here for the callers
# that serve HTTP

MAX_BODY = 1024 * 1024  # GitHub caps payloads at 25 MB but a push is far smaller
SHUTDOWN_TIMEOUT = 1.0
START_TIMEOUT = 10.0
HEADER_TIMEOUT = 15.0  # seconds for a request line and headers; also the keep-alive idle time
BODY_TIMEOUT = 30.0  # seconds for a request body (at most MAX_BODY bytes)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# the status page: a path under /ui/ ("" for the index) -> the page's HTML, or None
PageSource = Callable[[str], str | None]
UI_HEADERS = {
    # the pages hold no script; forbid any, and any fetch, whatever a record contains
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


class DaemonHttpServer:
    """The aiohttp application of the daemon, served from a background thread.

    ``webhook_secret`` None or empty disables the hook routes and ``/reconcile``
    (they answer 403); ``branch`` is the catalog branch the daemon follows: pushes
    to other branches are accepted (202) and ignored. ``cluster`` is the cluster
    the daemon reconciles: a ``/reconcile`` request for another one is refused (409).
    """

    def __init__(
        self,
        host: str,
        port: int,
        queue: TriggerQueue,
        metrics: DaemonMetrics,
        health: DaemonHealth,
        webhook_secret: str | bytes | None,
        branch: str | None,
        *,
        max_body: int = MAX_BODY,
        cluster: str | None = None,
        pages: PageSource | None = None,
        routes: Collection[str] = ROUTE_GROUPS,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
    ) -> None:
        unknown = set(routes) - set(ROUTE_GROUPS)
        if unknown or not routes:
            raise ValueError(f"route groups must be some of {ROUTE_GROUPS}, not {sorted(routes)}")
        self.routes = tuple(g for g in ROUTE_GROUPS if g in routes)
        self.host = host
        self.pages = pages
        self.cluster = cluster
        self.port = port
        self.queue = queue
        self.metrics = metrics
        self.health = health
        self.branch = branch
        self.max_body = max_body
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self._secret = webhook_secret or b""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.rejections = RateLimitedLog(log, "webhook rejected")

    def __repr__(self) -> str:  # keeps the secret out of any accidental log line
        return (
            f"DaemonHttpServer(host={self.host!r}, port={self.port}, branch={self.branch!r}, "
            f"routes={self.routes!r})"
        )

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body, middlewares=[_json_errors])
        if WEBHOOKS in self.routes:
            for provider in PROVIDERS:
                app.router.add_post(f"/hooks/{provider}", self._hook(provider))
            app.router.add_post("/reconcile", self._reconcile)
        app.router.add_get("/version", self._version)
        if METRICS in self.routes:
            app.router.add_get("/metrics", self._metrics)
            if self.pages is not None:
                app.router.add_get("/ui", self._ui_root)
                app.router.add_get("/ui/{path:.*}", self._ui)
        if PROBES in self.routes:
            app.router.add_get("/healthz", self._healthz)
            app.router.add_get("/readyz", self._readyz)
        return app

    @property
    def _serves_ui(self) -> bool:
        return self.pages is not None and METRICS in self.routes

    def start(self) -> int:
        """Bind and serve; returns the bound port (``port=0`` picks a free one).

        Raises ``UsageError`` when the address cannot be bound (taken, not local).
        """
        if self._thread is not None:
            raise RuntimeError("daemon HTTP server already started")
        started: Future[int] = Future()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._serve, args=(started,), name="reconciler-http", daemon=True
        )
        self._thread.start()
        try:
            self.port = started.result(START_TIMEOUT)
        except OSError as e:
            self._thread.join()
            self._thread = None
            raise UsageError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from e
        shown = [*self.routes, "the status page (/ui)"] if self._serves_ui else list(self.routes)
        log.info("serving %s on %s", ", ".join(shown), self.url)
        return self.port

    def stop(self) -> None:
        """Stop serving and wait for the thread; safe to call twice or before ``start``."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._runner is not None:
            cleanup = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop)
            cleanup.result(SHUTDOWN_TIMEOUT + 5.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._thread = None

    def _serve(self, started: Future[int]) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            try:
                port = loop.run_until_complete(self._bind())
            except OSError as e:
                started.set_exception(e)
                return
            started.set_result(port)
            loop.run_forever()
        finally:
            loop.close()
            self._loop = None

    async def _bind(self) -> int:
        runner = web.AppRunner(
            self.build_app(),
            access_log=None,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            # aiohttp closes a connection still waiting for a whole request line and
            # headers this long after it opened (or after the previous answer)
            keepalive_timeout=self.header_timeout,
            logger=_ServerLog(logging.getLogger("aiohttp.server"), {}),
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        return int(runner.addresses[0][1])

    def _hook(self, provider: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._webhook(provider, request)

        return handle

    async def _webhook(self, provider: str, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > self.max_body:
            return self._reject(provider, 413, f"body larger than {self.max_body} bytes")
        body = await self._body(request, provider)
        if isinstance(body, web.Response):
            return body
        try:
            event = parse_webhook(provider, request.headers, body, self._secret)
        except WebhookRejected as e:
            return self._reject(provider, e.status_code, e.message)
        answer: dict[str, Any] = {
            "accepted": True,
            "provider": provider,
            "event": event.event,
            "branch": event.branch,
            "commit": event.commit,
        }
        if event.event == "ping":
            self.metrics.count_webhook(provider, "ignored")
            return web.json_response({**answer, "triggered": False, "reason": "ping"})
        if not event.triggers_pass(self.branch):
            self.metrics.count_webhook(provider, "ignored")
            why = f"{event.describe()}; following {self.branch or 'any branch'}"
            log.info("webhook ignored: %s", why)
            return web.json_response({**answer, "triggered": False, "reason": why}, status=202)
        self.queue.put(Trigger("webhook", event.describe()))
        self.metrics.count_webhook(provider, "triggered")
        log.info("webhook: %s", event.describe())
        return web.json_response({**answer, "triggered": True}, status=202)

    async def _body(self, request: web.Request, what: str) -> bytes | web.Response:
        """The request's body, or the answer for a body too large, too slow or cut off."""
        try:
            async with asyncio.timeout(self.body_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._reject(what, 413, f"body larger than {self.max_body} bytes")
        except TimeoutError:
            answer = self._reject(what, 408, f"body not received within {self.body_timeout:g}s")
            answer.force_close()  # the rest of a half-sent body must not become a request
            return answer
        except (ConnectionError, asyncio.IncompleteReadError, aiohttp.ClientError) as e:
            # a client that goes away mid-body is not our error: no traceback, no flood
            log.debug("%s: client disconnected while sending: %s", what, e)
            return web.json_response({"accepted": False, "error": "incomplete body"}, status=400)

    async def _reconcile(self, request: web.Request) -> web.Response:
        body = await self._body(request, "reconcile")
        if isinstance(body, web.Response):
            return body
        try:
            cluster = parse_reconcile_request(request.headers, body, self._secret, self.cluster)
        except WebhookRejected as e:
            return self._reject("reconcile", e.status_code, e.message)
        self.queue.put(Trigger("request", "reconciler reconcile"))
        self.metrics.count_webhook("reconcile", "triggered")
        log.info("reconcile requested for cluster %s", cluster)
        return web.json_response({"accepted": True, "cluster": cluster}, status=202)

    async def _ui_root(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/ui/")  # the pages link relatively: the index must end in /

    async def _ui(self, request: web.Request) -> web.Response:
        """A page of the status site, rendered off the event loop (it reads Git)."""
        assert self.pages is not None
        path = request.match_info["path"]
        try:
            page = await asyncio.get_running_loop().run_in_executor(None, self.pages, path)
        except ReconcilerError as e:
            log.warning("status page: %s", e)
            return web.json_response({"error": f"status branch unreadable: {e}"}, status=503)
        if page is None:
            raise web.HTTPNotFound()
        return web.Response(text=page, content_type="text/html", headers=UI_HEADERS)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response(version_info(cluster=self.cluster))

    def _reject(self, provider: str, status: int, reason: str) -> web.Response:
        self.metrics.count_webhook(provider, "rejected")
        self.rejections.note(f"{provider} ({status})", reason)
        return web.json_response({"accepted": False, "error": reason}, status=status)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: web.Request) -> web.Response:
        alive, body = self.health.liveness()
        return web.json_response(body, status=200 if alive else 503)

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, body = self.health.readiness()
        return web.json_response(body, status=200 if ready else 503)


class _ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server log, where a request the client got wrong is one debug line.

    aiohttp logs a malformed request (a bad request line, a header too long, a
    broken chunk) with ``logger.exception``: a traceback at error level that anyone
    who can reach the port can repeat at will. That is the client's fault, not
    ours, so it becomes one line at debug; any other exception (a fault in our
    handlers) keeps its level and traceback.
    """

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        error = _exception(kwargs.get("exc_info"))
        if isinstance(error, HttpProcessingError | ConnectionError):
            if self.logger.isEnabledFor(logging.DEBUG):
                what = " ".join(str(error).split())[:200]  # aiohttp's are multi-line
                text = str(msg) % args if args else str(msg)
                self.logger.debug("%s: %s: %s", text, type(error).__name__, what)
            return
        super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        return msg, kwargs


def _exception(exc_info: object) -> BaseException | None:
    """The exception an ``exc_info`` argument names (an exception, a tuple or True)."""
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1] if isinstance(exc_info[1], BaseException) else None
    return sys.exc_info()[1] if exc_info is True else None


def version_info(cluster: str | None = None) -> dict[str, Any]:
    """What ``/version`` answers: the build's version and the cluster this daemon serves."""
    info: dict[str, Any] = dict(reconciler.version_info())
    if cluster is not None:
        info["cluster"] = cluster
    return info


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Unknown paths (404) and wrong methods (405) answer JSON like everything else."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return web.json_response({"error": e.reason}, status=e.status, headers=_allow_header(e))


def _allow_header(error: web.HTTPException) -> dict[str, str]:
    allow = error.headers.get("Allow")
    return {"Allow": allow} if allow else {}
