"""The one place that talks HTTP to a Kubernetes API server.

``KubeClient`` connects like kubectl (``--kubeconfig``/``--context``,
``$KUBECONFIG``, ``~/.kube/config``, in-cluster), sends raw JSON requests
through the official client's authenticated connection pool (no model
deserialisation: we work on plain object dicts), retries 5xx and connection
errors with capped exponential backoff, waits as long as a throttling answer
(429, or 503 with ``Retry-After``) asks, and translates every failure into
``reconciler.kube.errors``. A client may be shared by threads: a
:class:`RequestBudget` keeps at most ``max_requests_in_flight`` requests on the
wire across all of them (the connection pool has as many connections) and counts
the throttled answers. ``Warning`` headers of an answer
(deprecations, dropped fields) are logged and returned with it. The rest of ``kube/`` (apply, diff,
prune, health, inventory) and, through them, the commands and the daemon use it.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client as _k8s_client
from kubernetes import config as _k8s_config
from kubernetes.client.exceptions import ApiException

from reconciler.kube.compare import comparable
from reconciler.kube.discovery import Discovery, ResourceInfo
from reconciler.kube.errors import ClusterUnreachable, KubeApiError, NotFoundError, api_error
from reconciler.kube.observe import NO_ANSWER, record_request, record_retry
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import UsageError

log = logging.getLogger(__name__)

FIELD_MANAGER = "reconciler"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386: only the keys named change
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Server-side apply's typed conversion refuses a field the schema does not declare
# with a 500 (kubernetes/kubernetes#122480); the same body fails again, so no retry.
_TYPED_PATCH_REFUSAL = b"failed to create typed patch object"
# RFC 7234 warning-value: warn-code SP warn-agent SP quoted warn-text [SP warn-date]
_WARNING = re.compile(r'(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"')
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
# Requests a pass keeps in flight at once (``--max-requests-in-flight``). A real API
# server answers in 5-10 ms, so requests sent one after another leave it idle; 8 is
# well within what one client may send (kube-apiserver's own --max-requests-inflight
# defaults to 400 for all clients together) and what two cores can prepare.
DEFAULT_MAX_REQUESTS_IN_FLIGHT = 8
REFRESH_INTERVAL = 1.0
"""Seconds between two runs of the kubeconfig loader's credential refresh hook."""
# How often a paged list whose continue token expired starts over from its first page
# before it is read in one request (``KubeClient.list_snapshot``).
LIST_RESTARTS = 2

# The official client's name for a bearer token: ``update_params_for_auth`` adds its
# ``Authorization`` header (from the kubeconfig, refreshed by the loader's hook).
_AUTH_SETTINGS = ("BearerToken",)

JsonObject = dict[str, Any]
Items = list[JsonObject]

# The official client is only partly annotated; we use it through Any at this boundary.
k8s_client: Any = _k8s_client
k8s_config: Any = _k8s_config


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry: ``attempts`` tries, delays doubling from ``base_delay`` up to a cap.

    Throttling answers (429, or 503 with ``Retry-After``: the API server's
    max-in-flight limit or API Priority and Fairness turning a request away,
    https://kubernetes.io/docs/concepts/cluster-administration/flow-control/) say
    the server is healthy but busy; they have their own, larger budget of
    ``throttle_attempts`` (client-go's default of 10 retries), so a burst of
    concurrent requests is slowed down rather than failed.
    """

    attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 5.0
    # connect, read (seconds); None: no limit (kubectl --request-timeout=0)
    timeout: tuple[float, float] | None = (5.0, 30.0)
    throttle_attempts: int = 10

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after and retry_after.isdigit():
            return min(float(retry_after), self.max_delay)
        return float(min(self.base_delay * (2**attempt), self.max_delay))

    def throttle_delay(self, attempt: int, retry_after: str | None) -> float:
        """``Retry-After`` (capped), or the backoff; plus a little jitter, so that the
        requests turned away together do not all come back in the same instant."""
        return self.delay(attempt, retry_after) + random.uniform(0, self.base_delay / 2)


class RequestBudget:
    """At most ``limit`` requests on the wire at once, whichever thread sends them.

    Shared by a client and the ``PassReads`` built on it, so the budget is the
    pass's, not one object's (a ``with_retry`` copy for a leader elector has its
    own). A request holds a slot only while it is sent and answered, never while it
    sleeps before a retry. ``throttled`` counts
    the throttling answers that were retried (for logs, metrics and tests).
    """

    def __init__(self, limit: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT) -> None:
        if limit < 1:
            raise UsageError(f"--max-requests-in-flight must be at least 1 (got {limit})")
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._throttled = 0

    def slot(self) -> threading.BoundedSemaphore:
        """The context manager that holds a slot: the semaphore itself, entered and left
        directly (a generator-based manager cost more CPU than the rest of the budget)."""
        return self._slots

    def count_throttled(self) -> None:
        with self._lock:
            self._throttled += 1

    @property
    def throttled(self) -> int:
        with self._lock:
            return self._throttled


@dataclass(frozen=True)
class Response:
    status: int
    body: JsonObject
    warnings: tuple[str, ...] = ()  # texts of the answer's ``Warning: 299`` headers


def throttled_refresh(
    hook: Callable[[Any], None],
    interval: float = REFRESH_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[Any], None]:
    """``hook`` run at most once per ``interval`` seconds instead of before every request.

    A kubeconfig with a token makes the client's loader install a hook that the
    client calls before each request: it reloads an expired token, and in any case
    assigns the configuration's host again, whose setter resolves the proxy from the
    whole environment. That cost 0.3 ms or more of CPU per request on the 1,000-instance
    install (bench/scale.py), more than the request's own serialisation. A token is
    reloaded when it is within five minutes of its expiry (the loader's own
    margin), so checking once a second refreshes it just as surely.

    The loader's hook installs a new hook of its own each time it runs. It runs on a
    stand-in (:class:`_HookKeeper`) that keeps that new hook for the next call and
    passes every other setting to the configuration: the configuration's own hook is
    this throttle, always. Put back after the loader's hook had run, it was the
    loader's for a moment, and a request of another thread that called it then put
    the loader's hook back for good: on the 1,000-instance install, half of the
    requests then ran the loader's hook and its environment scan.
    """
    lock = threading.Lock()
    last = [float("-inf")]
    current = [hook]

    def refresh(configuration: Any) -> None:
        with lock:
            now = clock()
            if now - last[0] < interval:
                return
            last[0] = now
            loader = current[0]
        keeper = _HookKeeper(configuration)
        loader(keeper)
        if keeper.hook is not None:
            with lock:
                current[0] = keeper.hook

    return refresh


class _HookKeeper:
    """A configuration as the kubeconfig loader's hook sees it: what the hook sets goes
    to the configuration, except the new hook it installs, which is kept here."""

    hook: Callable[[Any], None] | None
    _configuration: Any

    def __init__(self, configuration: Any) -> None:
        object.__setattr__(self, "_configuration", configuration)
        object.__setattr__(self, "hook", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._configuration, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "refresh_api_key_hook":
            object.__setattr__(self, "hook", value)
        else:
            setattr(self._configuration, name, value)


class KubeClient:
    """A thin JSON client over the official client's connection and auth handling.

    Build one with :meth:`connect`; share it for a whole pass (it caches discovery).
    """

    page_size = 500  # objects per list request (the ``limit`` of each chunk)

    def __init__(
        self, api: Any, *, retry: RetryPolicy | None = None, budget: RequestBudget | None = None
    ) -> None:
        self._api = api
        self.retry = retry or RetryPolicy()
        self.budget = budget or RequestBudget()
        self.discovery = Discovery(self._get_discovery)

    @property
    def max_requests_in_flight(self) -> int:
        """How many requests (and so how many instances) a pass may have in flight at once."""
        return self.budget.limit

    @classmethod
    def connect(
        cls,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        max_requests_in_flight: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT,
    ) -> KubeClient:
        """Connect like kubectl: explicit file, ``$KUBECONFIG``, ``~/.kube/config``, in-cluster.

        The connection pool holds a connection per request the budget lets fly at
        once (``max_requests_in_flight``), plus one for a leader elector.
        Raises ``UsageError`` when no configuration can be loaded (exit code 2).
        """
        budget = RequestBudget(max_requests_in_flight)
        cfg = k8s_client.Configuration()
        source = _config_source(kubeconfig)
        try:
            if source is None:
                k8s_config.load_incluster_config(client_configuration=cfg)
            else:
                k8s_config.load_kube_config(
                    config_file=source,
                    context=context,
                    client_configuration=cfg,
                    persist_config=False,
                )
        except (k8s_config.ConfigException, OSError, ValueError, TypeError) as e:
            where = source or "in-cluster configuration"
            raise UsageError(f"cannot load Kubernetes configuration from {where}: {e}") from e
        cfg.retries = False  # we retry ourselves, with backoff and visible errors
        hook = cfg.refresh_api_key_hook
        if hook is not None:
            cfg.refresh_api_key_hook = throttled_refresh(hook)
        # one connection per request in flight, and one for ``with_retry`` copies
        cfg.connection_pool_maxsize = budget.limit + 1
        return cls(k8s_client.ApiClient(cfg), retry=retry, budget=budget)

    def with_retry(self, retry: RetryPolicy) -> KubeClient:
        """The same connection with another retry policy (e.g. a leader elector's,
        which must give up well within its renew deadline rather than retry for
        minutes while another replica takes over).

        It gets a budget of its own (one request at a time; the pool keeps a
        connection for it): a Lease renewal must never wait behind a pass that
        uses every slot of the shared budget.
        """
        return KubeClient(self._api, retry=retry, budget=RequestBudget(1))

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw requests ---------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        subject: str,
        verb: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Response:
        """Send one request, retrying transient failures; errors name ``subject`` and ``verb``."""
        status, data, warnings = self._exchange(
            method,
            path,
            subject=subject,
            verb=verb,
            query=query,
            body=body,
            headers={"Accept": "application/json", "Content-Type": content_type},
        )
        return Response(status, _json_body(data, subject, verb), warnings)

    def read_text(
        self, path: str, *, subject: str, verb: str, query: Sequence[tuple[str, str]] = ()
    ) -> str:
        """GET a plain-text subresource (a pod's ``log``), with the retries of ``request``.

        Errors still come back as JSON ``Status`` bodies and raise like ``request``.
        """
        _, data, _ = self._exchange(
            "GET",
            path,
            subject=subject,
            verb=verb,
            query=query,
            body=None,
            headers={"Accept": "text/plain, application/json"},
        )
        return data.decode("utf-8", "replace")

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        subject: str,
        verb: str,
        query: Sequence[tuple[str, str]],
        body: Any,
        headers: dict[str, str],
    ) -> tuple[int, bytes, tuple[str, ...]]:
        """The retry loop: (status, raw body, warnings) of a 2xx answer, else raises.

        Failures (no answer, 5xx) use up ``retry.attempts``; throttling answers use
        up ``retry.throttle_attempts`` and wait what ``Retry-After`` says.
        """
        failures = throttles = 0
        while True:
            try:
                with self.budget.slot():
                    status, http_reason, data, retry_after, warnings = self._send(
                        method, path, query, headers, body
                    )
            except (urllib3.exceptions.HTTPError, ApiException, OSError) as e:
                record_request(method, NO_ANSWER)
                failures += 1
                if failures >= self.retry.attempts:
                    raise ClusterUnreachable(
                        f"{subject}: {verb} failed: cannot reach the API server at "
                        f"{self.host}: {_short(e)}"
                    ) from e
                log.debug("%s %s: %s; retrying", method, path, _short(e))
                record_retry(method, NO_ANSWER)
                time.sleep(self.retry.delay(failures - 1))
                continue
            if _throttled(status, retry_after):
                throttles += 1
                if throttles < self.retry.throttle_attempts:
                    self.budget.count_throttled()
                    record_retry(method, status)
                    log.debug("%s %s: HTTP %s (throttled); retrying", method, path, status)
                    time.sleep(self.retry.throttle_delay(throttles - 1, retry_after))
                    continue
            elif status in RETRY_STATUSES and not _permanent(status, data):
                failures += 1
                if failures < self.retry.attempts:
                    log.debug("%s %s: HTTP %s; retrying", method, path, status)
                    record_retry(method, status)
                    time.sleep(self.retry.delay(failures - 1, retry_after))
                    continue
            for text in warnings:
                log.warning("%s: %s: the API server warns: %s", subject, verb, text)
            if status >= 400:
                raise api_error(subject, verb, status, http_reason, data)
            return status, data, warnings

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
    ) -> tuple[int, str, bytes, str | None, tuple[str, ...]]:
        url, hdrs = self._prepare(method, path, query, headers)
        if body is not None and headers.get("Content-Type") == APPLY_PATCH:
            body = _encoded(body)
        resp: Any = self._api.call_api(
            method, url, header_params=hdrs, body=body, _request_timeout=self.retry.timeout
        )
        data = resp.read() or b""
        record_request(method, int(resp.status))
        headers = resp.headers
        values = headers.getlist("Warning") if hasattr(headers, "getlist") else []
        return (
            int(resp.status),
            str(resp.reason or ""),
            data,
            resp.getheader("Retry-After"),
            parse_warnings(values) if values else (),
        )

    def _prepare(
        self, method: str, path: str, query: Sequence[tuple[str, str]], headers: Mapping[str, str]
    ) -> tuple[str, dict[str, str]]:
        """The request's URL and headers, credentials included, as the official client's
        ``param_serialize`` makes them from the same strings.

        ``param_serialize`` first converts every header and query value through its
        model serialiser (a recursive walk meant for generated models); ours are plain
        strings already, and that walk, with its other conversions, cost about a tenth
        of each request's CPU on the 1,000-instance install (bench/scale.py), four
        requests per instance. The credentials still come from the client itself
        (``update_params_for_auth``: the kubeconfig's token, refreshed by its hook),
        and so do the host, its default headers (User-Agent) and any cookie.
        """
        api = self._api
        url = api.configuration.host + path
        if query:
            url += "?" + "&".join(f"{key}={quote(value)}" for key, value in query)
        hdrs = {**headers, **api.default_headers}
        if api.cookie:
            hdrs["Cookie"] = api.cookie
        api.update_params_for_auth(hdrs, None, _AUTH_SETTINGS, path, method, None)
        return url, hdrs

    def _get_discovery(self, path: str) -> JsonObject | None:
        try:
            return self.request("GET", path, subject=path, verb="discovery").body
        except NotFoundError:
            return None

    # -- object operations ----------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """The resource (plural, scope) of a kind, from discovery."""
        return self.discovery.resource(api_version, kind)

    def object_path(self, ref: ObjectRef) -> str:
        info = self.resource(ref.api_version, ref.kind)
        return info.path(ref.namespace if info.namespaced else "", ref.name)

    def get(self, ref: ObjectRef) -> JsonObject | None:
        """The live object, or None when it does not exist."""
        try:
            return self.request("GET", self.object_path(ref), subject=str(ref), verb="get").body
        except NotFoundError:
            return None

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        keep: Callable[[JsonObject], JsonObject] | None = None,
    ) -> list[JsonObject]:
        """Every object of a kind (across all namespaces unless ``namespace``), paged.

        As :meth:`list_snapshot`, without the list's ``resourceVersion``.
        """
        items, _ = self.list_snapshot(
            api_version, kind, namespace=namespace, label_selector=label_selector, keep=keep
        )
        return items

    def list_snapshot(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        keep: Callable[[JsonObject], JsonObject] | None = None,
        restart: Callable[[], None] | None = None,
        page_size: int | None = None,
    ) -> tuple[Items, str]:
        """Every object of a kind, paged, and the list's ``resourceVersion``.

        The list's ``metadata.resourceVersion`` is where a watch continues from
        without missing or repeating a change (``watchcache``):
        https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes

        Pages of ``page_size`` (default: the client's) keep each answer small; the
        server reads every page at the first one's resourceVersion, so the result is
        one consistent snapshot. A continue token can outlive the server's history
        (``410 Expired``, when the cluster changed faster than the pages were read);
        then the list starts over from its first page, a new snapshot, up to
        ``LIST_RESTARTS`` times, and only after that, like client-go's pager, is the
        whole list read in one request: at thousands of objects that one answer,
        decoded, is hundreds of MiB where a page is a few. ``keep`` turns each item
        into what the caller keeps (``live.pack``) as each page arrives, so a list of
        thousands never holds every full object at once; ``restart`` is called before
        the list starts over, so a caller that keeps items as they come drops those
        of the expired snapshot (an object deleted since must not stay).
        """
        info = self.resource(api_version, kind)
        path = info.path(namespace if info.namespaced else "")
        subject = f"{kind} ({api_version})"
        items: list[JsonObject] = []
        token = version = ""
        limit = page_size or self.page_size
        restarts = 0
        while True:
            query = [("limit", str(limit))] if limit else []
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            try:
                body = self.request("GET", path, subject=subject, verb="list", query=query).body
            except KubeApiError as e:
                if not token or e.status != 410:
                    raise
                restarts += 1
                if restarts > LIST_RESTARTS:
                    limit = 0
                log.debug(
                    "%s: continue token expired; listing again %s",
                    subject,
                    "from the first page" if limit else "without pages",
                )
                items, token = [], ""
                if restart is not None:
                    restart()
                continue
            for item in body.get("items") or ():
                # list items omit apiVersion/kind; restore them so items are full objects
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(keep(item) if keep is not None else item)
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "")
            version = str(meta.get("resourceVersion") or version)
            if not token:
                return items, version

    def streaming(self) -> KubeClient:
        """A client for long-running requests (watches): same host, auth and TLS, its
        own connection pool, outside the request budget.

        A watch holds its connection for minutes; in the shared pool it would take a
        connection the pass's requests count on, and in the budget a slot, while
        kube-apiserver itself exempts long-running requests from max-in-flight
        (https://kubernetes.io/docs/concepts/cluster-administration/flow-control/).
        """
        cfg = copy.copy(self._api.configuration)
        cfg.connection_pool_maxsize = 32  # one connection per watched kind
        streaming = KubeClient(k8s_client.ApiClient(cfg), retry=self.retry, budget=RequestBudget(1))
        streaming.discovery = self.discovery
        return streaming

    def open_stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> Any:
        """GET ``path`` and return the urllib3 response unread (a watch's event stream).

        Not retried and not in the budget: the caller (``watchcache``) reconnects
        with its own backoff. ``read_timeout`` bounds the silence between two reads.
        """
        url, hdrs = self._prepare("GET", path, query, {"Accept": "application/json"})
        connect = self.retry.timeout[0] if self.retry.timeout is not None else None
        resp: Any = self._api.call_api(
            "GET", url, header_params=hdrs, _request_timeout=(connect, read_timeout)
        )
        record_request("GET", int(resp.status))
        return resp.response  # the official client leaves it unread (preload_content=False)

    def apply(
        self, obj: Mapping[str, Any], *, force: bool = False, dry_run: bool = False
    ) -> Response:
        """Server-side apply ``obj`` as field manager ``reconciler``; 201 means created.

        What is sent is the object as the server stores it (``compare.comparable``):
        Secret ``stringData`` goes as base64 ``data``. The server folds ``stringData``
        into ``data`` after recording ownership of ``stringData``, so nobody would own
        the ``data`` keys and a key removed from Git would stay forever
        (kubernetes/kubernetes#108008).

        ``fieldValidation=Strict``: a field the kind does not declare (a typo in a
        manifest) fails the request, naming the field, instead of being dropped
        (https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).
        """
        ref = ObjectRef.of(obj)
        query = [
            ("fieldManager", FIELD_MANAGER),
            ("force", "true" if force else "false"),
            ("fieldValidation", "Strict"),
        ]
        if dry_run:
            query.append(("dryRun", "All"))
        return self.request(
            "PATCH",
            self.object_path(ref),
            subject=str(ref),
            verb="dry-run apply" if dry_run else "apply",
            query=query,
            body=comparable(obj),
            content_type=APPLY_PATCH,
        )

    def delete(self, ref: ObjectRef, *, uid: str = "", resource_version: str = "") -> bool:
        """Delete in the background; preconditions make sure we delete what we inspected.

        Returns False when the object was already gone.
        """
        preconditions: dict[str, str] = {}
        if uid:
            preconditions["uid"] = uid
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        body: JsonObject = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if preconditions:
            body["preconditions"] = preconditions
        try:
            self.request(
                "DELETE", self.object_path(ref), subject=str(ref), verb="delete", body=body
            )
        except NotFoundError:
            return False
        return True


def label_selector(labels: Mapping[str, Any]) -> str:
    """``matchLabels`` as the ``labelSelector`` query value (``a=1,b=2``, sorted)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


_EQUALITY = re.compile(r"^[A-Za-z0-9._/-]+=[A-Za-z0-9._-]*$")


def equality_selector(selector: str) -> dict[str, str] | None:
    """``a=b,c=d`` as a dict; None for anything else (set-based or negated selectors)."""
    if not selector:
        return {}
    pairs: dict[str, str] = {}
    for part in selector.split(","):
        if not _EQUALITY.match(part):
            return None
        key, _, value = part.partition("=")
        pairs[key] = value
    return pairs


def has_labels(obj: Mapping[str, Any], pairs: Mapping[str, str]) -> bool:
    """Whether ``obj`` carries every label of ``pairs`` (an ``equality_selector``)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in pairs.items())


def _config_source(kubeconfig: str | Path | None) -> str | None:
    """The kubeconfig path(s) to load, or None for in-cluster; kubectl's precedence."""
    if kubeconfig:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise UsageError(f"kubeconfig {kubeconfig}: no such file")
        return str(path)
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return env
    default = Path("~/.kube/config").expanduser()
    if default.is_file():
        return str(default)
    if os.environ.get(IN_CLUSTER_ENV):
        return None
    raise UsageError(
        "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, "
        "create ~/.kube/config or run in a cluster"
    )


def _json_body(data: bytes, subject: str, verb: str) -> JsonObject:
    if not data:
        return {}
    try:
        # orjson: a list of a namespace's pods decodes in less than half the time of
        # ``json.loads``, and decoding lists was a third of a busy pass's CPU
        parsed = orjson.loads(data)
    except ValueError as e:  # orjson.JSONDecodeError is a ValueError
        raise KubeApiError(
            f"{subject}: {verb} failed: the API server sent a non-JSON answer",
            status=0,
            api_reason="BadResponse",
        ) from e
    return parsed if isinstance(parsed, dict) else {"items": parsed}


def _encoded(body: Any) -> Any:
    """An apply body as the JSON bytes sent (orjson), or as it is when orjson cannot
    encode it (an integer past 64 bits): the official client then encodes it with
    ``json.dumps``, several times slower, as it does for every body it is given as
    an object. JSON is YAML, so an ``apply-patch+yaml`` body may be JSON bytes."""
    if isinstance(body, (bytes, str)):
        return body
    try:
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return body


def parse_warnings(values: Iterable[str]) -> tuple[str, ...]:
    """The texts of ``299`` warnings in ``Warning`` header values (client-go shows only
    those: 299 is "miscellaneous persistent warning", what the API server sends)."""
    texts: list[str] = []
    for value in values:
        for match in _WARNING.finditer(value):
            if match.group(1) == "299":
                texts.append(re.sub(r"\\(.)", r"\1", match.group(3)))
    return tuple(texts)


def _throttled(status: int, retry_after: str | None) -> bool:
    """The API server turned the request away for load, not for a fault: 429 (max
    in-flight, API Priority and Fairness) or a 503 that says when to come back."""
    return status == 429 or (status == 503 and retry_after is not None)


def _permanent(status: int, data: bytes) -> bool:
    """A 5xx that the same request would get again: not worth retrying."""
    return status == 500 and _TYPED_PATCH_REFUSAL in data


def _short(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."
