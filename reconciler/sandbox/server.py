"""HTTP routes of the sandbox API server (aiohttp), following the Kubernetes REST layout.

https://kubernetes.io/docs/reference/using-api/api-concepts/ describes the paths
(``/api/v1/namespaces/<ns>/<plural>/<name>[/<subresource>]``, ``/apis/<g>/<v>/...``),
the verbs, watch streams and the Status error body. This module only translates
HTTP to :class:`SandboxApi`/:class:`Lifecycle` calls and back; ``testing.py`` and
``reconciler sandbox`` build it with :func:`build_app`.

Requests are served concurrently on one event loop: a handler runs to its end
(or to an ``await``) before another starts, so the store is never touched by two
at once. Like a real API server the sandbox can be made to take time and to turn
requests away: ``request_latency`` delays every answer (a real one takes 5-10 ms),
and ``max_requests_in_flight`` answers ``429 Too Many Requests`` with
``Retry-After: 1`` to a request that would exceed that many in flight, as
kube-apiserver's ``--max-requests-inflight`` does (long-running requests such as
watches are not counted;
https://kubernetes.io/docs/concepts/cluster-administration/flow-control/).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from aiohttp import web
from aiohttp import web_app as _aiohttp_app

from reconciler.sandbox import discovery, metrics, openapi
from reconciler.sandbox.admission import install_admission
from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError, field_errors, not_allowed, unsupported_dry_run
from reconciler.sandbox.bootstrap import StandardObjects
from reconciler.sandbox.controllers import DEFAULT_DELAY, Controllers
from reconciler.sandbox.copying import to_json
from reconciler.sandbox.disruption import evict
from reconciler.sandbox.fieldschema import schema_for
from reconciler.sandbox.fieldvalidation import FieldValidation, parse_body
from reconciler.sandbox.gc import DeleteOptions, Lifecycle
from reconciler.sandbox.kinds import CRDS, CREATE_ONLY, PODS, Kind
from reconciler.sandbox.listing import list_collection
from reconciler.sandbox.namespaces import NamespaceDefaults
from reconciler.sandbox.patch import APPLY_PATCH, CUSTOM_RESOURCE_PATCHES, apply_patch
from reconciler.sandbox.pods import pod_log_of
from reconciler.sandbox.requestlog import RequestLog, RequestLogEntry, kube_verb
from reconciler.sandbox.reviews import review
from reconciler.sandbox.scale import scale_of, with_replicas
from reconciler.sandbox.selectors import (
    Matcher,
    parse_field_selector,
    parse_label_selector,
    supported_fields,
)
from reconciler.sandbox.store import DEFAULT_HISTORY_LIMIT
from reconciler.sandbox.tables import table_version, to_table
from reconciler.sandbox.timing import Timing
from reconciler.sandbox.watch import (
    DEFAULT_BOOKMARK_INTERVAL,
    Encode,
    event_line,
    serve_watch,
    table_lines,
)

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Target:
    """What a resource URL names."""

    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str


# metav1 validation's FieldManagerMaxLength
FIELD_MANAGER_MAX_LENGTH = 128
TARGET = web.RequestKey("target", Target)
FIELDS = web.RequestKey("fields", FieldValidation)


def json_response(body: Any, status: int = 200) -> web.Response:
    """Compact JSON, as the API server's encoder writes it (no spaces after separators)."""
    return web.Response(
        body=to_json(body),
        status=status,
        content_type="application/json",
    )


def error_response(error: ApiError, status: int | None = None) -> web.Response:
    """The ``Status`` of a refused request, ending in a newline: the API server writes
    it with Go's ``json.Encoder``, whose ``Encode`` ends every value with ``\n``
    (https://pkg.go.dev/encoding/json#Encoder.Encode); clients that compare or split
    the raw body see the same bytes as from a real server."""
    response = web.Response(
        body=to_json(error.to_status()) + b"\n",
        status=error.code if status is None else status,
        content_type="application/json",
    )
    if error.retry_after > 0:  # as ``responsewriters.ErrorNegotiated`` sets it
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def _field_selector(request: web.Request, kind: Kind) -> Matcher:
    """The request's ``fieldSelector``: a field ``kind`` cannot be selected by is a 400
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/)."""
    supported = supported_fields(kind.group, kind.kind, kind.crd)
    return parse_field_selector(request.query.get("fieldSelector"), supported)


def _patch_option_errors(request: web.Request, manager: str) -> list[tuple[str, str, str]]:
    """kube-apiserver's ValidatePatchOptions: ``force`` only for apply, which needs a
    ``fieldManager`` (a 422 of ``PatchOptions``, before the object is looked up;
    https://kubernetes.io/docs/reference/using-api/server-side-apply/#managers)."""
    errors = []
    if request.content_type != APPLY_PATCH:
        if "force" in request.query:
            why = "Forbidden: may not be specified for non-apply patch"
            errors.append(("FieldValueForbidden", "force", why))
    elif not manager:
        errors.append(
            ("FieldValueRequired", "fieldManager", "Required value: is required for apply patch")
        )
    if len(manager) > FIELD_MANAGER_MAX_LENGTH:
        why = f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"
        errors.append(("FieldValueTooLong", "fieldManager", why))
    return errors


def _counted(request: web.Request) -> bool:
    """Counts toward the in-flight limit: not the sandbox's own endpoints, and not
    long-running requests (watches, followed logs), which kube-apiserver exempts."""
    if request.path.startswith("/sandbox/"):
        return False
    return not (
        request.query.get("watch") in ("true", "1") or request.query.get("follow") in ("true", "1")
    )


def _too_many_requests() -> web.Response:
    """kube-apiserver's answer over its in-flight limit: plain text, ``Retry-After: 1``."""
    return web.Response(
        status=429,
        text="Too many requests, please try again later.\n",
        headers={"Retry-After": "1"},
    )


class SandboxServer:
    """One sandbox cluster behind one aiohttp application."""

    def __init__(
        self,
        *,
        controller_delay: float = DEFAULT_DELAY,
        fail_images: Sequence[str] = (),
        history_limit: int = DEFAULT_HISTORY_LIMIT,
        timing: Timing | None = None,
        request_latency: float = 0.0,
        max_requests_in_flight: int = 0,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    ) -> None:
        self.request_latency = request_latency
        self.bookmark_interval = bookmark_interval  # seconds between a watch's BOOKMARKs
        self.max_requests_in_flight = max_requests_in_flight  # 0: no limit
        self._in_flight = 0  # counted requests being served (only the loop touches it)
        self.api = SandboxApi(history_limit)
        install_admission(self.api)
        self.lifecycle = Lifecycle(self.api)
        self.namespace_defaults = NamespaceDefaults(self.api)
        self.controllers = Controllers(
            self.api,
            timing=timing or Timing(controller_delay=controller_delay),
            fail_images=fail_images,
            delete=self.lifecycle.delete,
        )
        StandardObjects(self.api).create_standard_objects()  # after the nodes exist
        self.requests = RequestLog()

    def __getstate__(self) -> dict[str, Any]:
        """What a copy of a server not yet started carries (``testing.py`` copies one
        with pickle): everything but its request log, which holds a lock."""
        state = dict(self.__dict__)
        del state["requests"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.requests = RequestLog()

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._log_middleware], client_max_size=64 * 1024**2)
        app.router.add_get("/version", self._version)
        for probe in ("/healthz", "/livez", "/readyz"):
            app.router.add_get(probe, self._ok)
        app.router.add_get("/api", self._api_versions)
        app.router.add_get("/apis", self._api_groups)
        app.router.add_get("/api/{version}", self._resource_list)
        app.router.add_get("/apis/{group}", self._api_group)
        app.router.add_get("/apis/{group}/{version}", self._resource_list)
        app.router.add_get("/openapi/v3", self._openapi_index)
        app.router.add_get("/openapi/v3/{tail:.+}", self._openapi_document)
        app.router.add_get("/sandbox/requests", self._get_requests)
        app.router.add_delete("/sandbox/requests", self._reset_requests)
        app.router.add_post("/sandbox/compact", self._compact)
        app.router.add_route("*", f"/apis/{metrics.API_VERSION}/{{tail:.+}}", self._metrics)
        app.router.add_route("*", "/api/{version}/{tail:.+}", self._resource)
        app.router.add_route("*", "/apis/{group}/{version}/{tail:.+}", self._resource)
        app.on_shutdown.append(self._end_watches)
        app.on_cleanup.append(self._stop_controllers)
        app.on_cleanup.append(_forget_built_middlewares)
        return app

    async def _end_watches(self, app: web.Application) -> None:
        self.api.store.close_watches()

    async def _stop_controllers(self, app: web.Application) -> None:
        await self.controllers.stop()

    # --- logging and errors -------------------------------------------------------------

    @web.middleware
    async def _log_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.time()
        if not _counted(request):
            return await self._serve(request, handler, started, 0)
        if self.max_requests_in_flight and self._in_flight >= self.max_requests_in_flight:
            response = _too_many_requests()
            self.requests.append(self._entry(request, started, 429, self._in_flight + 1))
            return response
        self._in_flight += 1
        try:
            if self.request_latency > 0:
                await asyncio.sleep(self.request_latency)
            return await self._serve(request, handler, started, self._in_flight)
        finally:
            self._in_flight -= 1

    async def _serve(
        self, request: web.Request, handler: Handler, started: float, in_flight: int
    ) -> web.StreamResponse:
        try:
            response = await handler(request)
        except ApiError as e:
            response = error_response(e)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            error = ApiError(e.status, "the server could not find the requested resource")
            response = error_response(error, e.status)
        except Exception as e:
            # A sandbox bug must still answer like an API server, not drop the connection.
            log.exception("sandbox: %s %s failed", request.method, request.path)
            response = error_response(ApiError(500, f"internal error: {e}"))
        fields = request.get(FIELDS)
        if fields is not None and not response.prepared:
            for warning in fields.header_values():
                response.headers.add("Warning", warning)
        if not request.path.startswith("/sandbox/"):
            self.requests.append(self._entry(request, started, response.status, in_flight))
        return response

    def _entry(
        self, request: web.Request, started: float, status: int, in_flight: int = 0
    ) -> RequestLogEntry:
        target = request.get(TARGET)
        is_watch = request.query.get("watch") in ("true", "1")
        named = isinstance(target, Target) and target.name is not None
        return RequestLogEntry(
            time=started,
            method=request.method,
            verb=kube_verb(request.method, named, is_watch, isinstance(target, Target)),
            path=request.path,
            query=request.query_string,
            status=status,
            user_agent=request.headers.get("User-Agent", ""),
            in_flight=in_flight,
        )

    # --- non-resource endpoints ---------------------------------------------------------

    async def _version(self, request: web.Request) -> web.Response:
        return json_response(discovery.SERVER_VERSION)

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _api_versions(self, request: web.Request) -> web.Response:
        return json_response(discovery.api_versions(request.host))

    async def _api_groups(self, request: web.Request) -> web.Response:
        groups = discovery.api_group_list(self.api.kinds)
        groups["groups"].append(metrics.group())  # served beside, as an aggregated API
        return json_response(groups)

    async def _api_group(self, request: web.Request) -> web.Response:
        name = request.match_info["group"]
        if name == metrics.GROUP:
            return json_response({"kind": "APIGroup", "apiVersion": "v1", **metrics.group()})
        group = discovery.api_group(self.api.kinds, name)
        if group is None:
            raise ApiError(404, "the server could not find the requested resource")
        return json_response(group)

    async def _openapi_index(self, request: web.Request) -> web.Response:
        return json_response(openapi.index(self.api.kinds))

    async def _openapi_document(self, request: web.Request) -> web.Response:
        body = openapi.group_version_document(self.api.kinds, request.match_info["tail"])
        if body is None:
            raise ApiError(404, "the server could not find the requested resource")
        return json_response(body)

    async def _metrics(self, request: web.Request) -> web.Response:
        """The resource metrics API (metrics.py): get and list only."""
        if request.method != "GET":
            raise not_allowed(request.method)
        parts = [p for p in request.match_info["tail"].split("/") if p]
        namespace = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        if not parts or len(parts) > 2:
            raise ApiError(404, "the server could not find the requested resource")
        name = parts[1] if len(parts) == 2 else None
        labels = parse_label_selector(request.query.get("labelSelector"))
        return json_response(metrics.serve(self.api, parts[0], namespace, name, labels))

    async def _resource_list(self, request: web.Request) -> web.Response:
        group = request.match_info.get("group", "")
        version = request.match_info["version"]
        if (group, version) == (metrics.GROUP, metrics.VERSION):
            return json_response(metrics.resource_list())
        body = discovery.api_resource_list(self.api.kinds, group, version)
        if body is None:
            raise ApiError(404, "the server could not find the requested resource")
        return json_response(body)

    async def _get_requests(self, request: web.Request) -> web.Response:
        """The log, or the page of it ``offset`` and ``limit`` say, with its ``total``.

        A benchmark at thousands of instances logs tens of thousands of requests per
        step; read in pages, the reader never decodes them all at once (its own memory
        would count in the daemon's max RSS it measures in the same process).
        """
        try:
            offset = int(request.query.get("offset", "0"))
            limit = int(request.query.get("limit", "0"))
        except ValueError as e:
            raise ApiError(400, f"offset and limit must be whole numbers: {e}") from e
        if offset < 0 or limit < 0:
            raise ApiError(400, "offset and limit must not be negative")
        entries = self.requests.entries()
        page = entries[offset : offset + limit] if limit else entries[offset:]
        items = [e.to_dict() for e in page]
        return json_response({"kind": "RequestLog", "items": items, "total": len(entries)})

    async def _reset_requests(self, request: web.Request) -> web.Response:
        self.requests.reset()
        return json_response({"kind": "RequestLog", "items": []})

    async def _compact(self, request: web.Request) -> web.Response:
        self.api.store.compact()
        return json_response({"resourceVersion": str(self.api.store.resource_version)})

    # --- resources ----------------------------------------------------------------------

    def _target(self, request: web.Request) -> Target:
        group = request.match_info.get("group", "")
        version = request.match_info["version"]
        rest = [p for p in request.match_info["tail"].split("/") if p]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            nested = self.api.kinds.lookup(group, version, rest[2])
            if nested is not None and nested.namespaced:
                namespace, rest = rest[1], rest[2:]
        kind = self.api.kinds.lookup(group, version, rest[0])
        if kind is None or len(rest) > 3 or (namespace is not None and not kind.namespaced):
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and not (
            (subresource == "status" and kind.status)
            or (subresource == "scale" and kind.scale)
            or (subresource in ("log", "eviction") and kind.resource == PODS)
        ):
            raise ApiError(404, "the server could not find the requested resource")
        if kind.namespaced and name is not None and namespace is None:
            raise ApiError(404, "the server could not find the requested resource")
        return Target(kind, namespace, name, subresource)

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        target = self._target(request)
        request[TARGET] = target
        method = request.method
        is_watch = request.query.get("watch") in ("true", "1")
        if kube_verb(method, target.name is not None, is_watch, True) not in target.kind.verbs:
            raise not_allowed(method)
        if target.name is None:
            if method == "GET":
                return await self._list(request, target)
            if method == "POST":
                return await self._create(request, target)
            if method == "DELETE":
                return await self._delete_collection(request, target)
            raise not_allowed(method)
        if target.subresource == "eviction":
            if method != "POST":
                raise not_allowed(method)
            return await self._evict(request, target)
        handlers = {
            "GET": self._get,
            "PUT": self._replace,
            "PATCH": self._patch,
            "DELETE": self._delete,
        }
        handler = handlers.get(method)
        if handler is None:
            raise not_allowed(method)
        return await handler(request, target)

    def _opts(self, request: web.Request, options: str) -> WriteOptions:
        """Write options from the query; non-apply writes default the manager like k8s.

        A ``dryRun`` other than ``All`` is a 422 of ``options`` (``CreateOptions``, ...),
        before anything is written: taken as "not a dry run", it would persist what
        the client meant only to try."""
        values = request.query.getall("dryRun", [])
        manager = request.query.get("fieldManager", "")
        problems = _patch_option_errors(request, manager) if options == "PatchOptions" else []
        problem = unsupported_dry_run(values)
        if problem is not None:
            problems.append(problem)
        if problems:
            raise field_errors(("meta.k8s.io", options), "", problems)
        dry_run = bool(values)
        if self._is_apply(request):
            force = request.query.get("force") in ("true", "1")
            return WriteOptions(field_manager=manager, dry_run=dry_run, force=force)
        agent = request.headers.get("User-Agent", "").split("/")[0] or "unknown"
        return WriteOptions(field_manager=manager or agent, dry_run=dry_run)

    @staticmethod
    def _is_apply(request: web.Request) -> bool:
        return request.method == "PATCH" and request.content_type == APPLY_PATCH

    async def _body(self, request: web.Request, fields: FieldValidation | None = None) -> Any:
        raw = await request.read()
        if fields is not None:
            return fields.parse(raw, request.content_type)
        return parse_body(raw, request.content_type).value

    def _fields(self, request: web.Request, target: Target, options: str) -> FieldValidation:
        """The write's fieldValidation (422 when unsupported, before the body is read)."""
        kind, crd = target.kind, None
        if kind.crd:
            name = f"{kind.plural}.{kind.group}"
            crd = self.api.store.get(CRDS, "", name)
        schema = schema_for(kind, target.subresource, crd)
        query = request.query.get("fieldValidation")
        fields = FieldValidation.of(query, options, kind, target.subresource, schema)
        request[FIELDS] = fields
        return fields

    async def _list(self, request: web.Request, target: Target) -> web.StreamResponse:
        labels = parse_label_selector(request.query.get("labelSelector"))
        fields = _field_selector(request, target.kind)
        table = table_version(request.headers.get("Accept", ""))
        if request.query.get("watch") in ("true", "1"):
            return await serve_watch(
                request,
                self.api,
                target.kind,
                target.namespace,
                labels,
                fields,
                bookmark_interval=self.bookmark_interval,
                encode=self._watch_encoding(request, target.kind, table),
            )
        selective = bool(request.query.get("labelSelector") or request.query.get("fieldSelector"))
        listed = list_collection(
            self.api,
            target.kind,
            target.namespace,
            labels,
            fields,
            request.query,
            selective=selective,
        )
        return self._answer(request, target.kind, listed, table)

    def _answer(
        self, request: web.Request, kind: Kind, body: dict[str, Any], table: str | None
    ) -> web.Response:
        """``body`` as JSON, or as the Table (of ``meta.k8s.io/<table>``) the client asked for."""
        if table is None:
            return json_response(body)
        return json_response(self._table_of(request, kind, table)(body))

    def _table_of(
        self, request: web.Request, kind: Kind, table: str
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        crd = self.api.store.get(CRDS, "", f"{kind.plural}.{kind.group}") if kind.crd else None
        include = request.query.get("includeObject", "")
        return partial(to_table, kind, version=table, include_object=include, crd=crd)

    def _watch_encoding(self, request: web.Request, kind: Kind, table: str | None) -> Encode:
        """Watch events as they are, or as Tables (``kubectl get -w``)."""
        if table is None:
            return event_line
        return table_lines(self._table_of(request, kind, table))

    async def _create(self, request: web.Request, target: Target) -> web.Response:
        fields = self._fields(request, target, "CreateOptions")
        body = fields.decode(await self._body(request, fields))
        opts = self._opts(request, "CreateOptions")
        if target.kind.verbs == CREATE_ONLY:
            return json_response(review(self.api, target.kind, body), 201)
        created = self.api.create(target.kind, target.namespace or "", body, opts)
        return json_response(created, 201)

    async def _get(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        table = table_version(request.headers.get("Accept", ""))
        obj = self.api.get(target.kind, target.namespace or "", target.name)
        if target.subresource == "scale":
            return json_response(scale_of(target.kind, obj))
        if target.subresource == "log":
            return web.Response(text=pod_log_of(obj, request.query), content_type="text/plain")
        return self._answer(request, target.kind, obj, table)

    async def _replace(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        fields = self._fields(request, target, "UpdateOptions")
        body = fields.decode(await self._body(request, fields))
        ns, opts = target.namespace or "", self._opts(request, "UpdateOptions")
        if target.subresource == "scale":
            old = self.api.read(target.kind, ns, target.name)
            new = with_replicas(target.kind, old, body)
            self.api.commit(target.kind, old, new, opts, "scale")
            return json_response(scale_of(target.kind, self.api.get(target.kind, ns, target.name)))
        result = self.api.replace(target.kind, ns, target.name, body, opts, target.subresource)
        return json_response(result)

    async def _patch(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        if target.kind.crd and request.content_type not in CUSTOM_RESOURCE_PATCHES:
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                "include: " + ", ".join(CUSTOM_RESOURCE_PATCHES),
            )
        fields = self._fields(request, target, "PatchOptions")
        body = await self._body(request, fields)
        ns, opts = target.namespace or "", self._opts(request, "PatchOptions")
        if self._is_apply(request):
            if target.subresource == "scale":
                raise ApiError(415, "apply is not supported on the scale subresource")
            obj, created = self.api.apply(
                target.kind, ns, target.name, body, opts, target.subresource, fields.check_apply
            )
            return json_response(obj, 201 if created else 200)
        decode = partial(fields.decode_patched, request.content_type)
        if target.subresource == "scale":
            old = self.api.read(target.kind, ns, target.name)
            patched = decode(apply_patch(request.content_type, scale_of(target.kind, old), body))
            self.api.commit(
                target.kind, old, with_replicas(target.kind, old, patched), opts, "scale"
            )
            return json_response(scale_of(target.kind, self.api.get(target.kind, ns, target.name)))
        result = self.api.patch(
            target.kind,
            ns,
            target.name,
            request.content_type,
            body,
            opts,
            target.subresource,
            decode,
        )
        return json_response(result)

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        options = DeleteOptions.parse(await self._body(request), request.query)
        result = self.lifecycle.delete(target.kind, target.namespace or "", target.name, options)
        return json_response(result.body, result.code)

    async def _evict(self, request: web.Request, target: Target) -> web.Response:
        """``pods/NAME/eviction`` (``disruption.py``): 201 with a Success Status."""
        assert target.name is not None
        opts = self._opts(request, "CreateOptions")
        answer = evict(
            self.api,
            self.lifecycle,
            target.namespace or "",
            target.name,
            await self._body(request),
            dry_run=opts.dry_run,
        )
        return json_response(answer, 201)

    async def _delete_collection(self, request: web.Request, target: Target) -> web.Response:
        labels = parse_label_selector(request.query.get("labelSelector"))
        fields = _field_selector(request, target.kind)
        options = DeleteOptions.parse(await self._body(request), request.query)
        result = self.lifecycle.delete_collection(
            target.kind, target.namespace, labels, fields, options
        )
        return json_response(result)


async def _forget_built_middlewares(app: web.Application) -> None:
    """Drop aiohttp's cache of middleware chains, so a stopped server can be freed.

    aiohttp builds each route's chain of middlewares (here ``_log_middleware``) once and
    keeps it in a module-wide ``lru_cache`` of up to 1,024 entries, keyed by the route's
    handler and its applications: a bound method of this server, and its app. So every
    stopped server stayed alive, with its whole store, until a thousand others had
    pushed it out: in a test process that starts a sandbox per test, up to a thousand
    stores (593 MB and 1.1 million objects in one pytest worker, each full garbage
    collection walking them all). Clearing it costs the servers still running one
    rebuild of their chain on their next request. An aiohttp without that cache has
    nothing to clear.
    """
    cached = getattr(_aiohttp_app, "_cached_build_middleware", None)
    clear = getattr(cached, "cache_clear", None)
    if callable(clear):
        clear()
