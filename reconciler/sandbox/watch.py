"""Watch streams: newline-delimited JSON events over a chunked HTTP response.

Follows https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes:
without a resourceVersion (or with ``0``) the stream starts with an ADDED event per
existing object; with one it replays the history after it, and when that history
was compacted it sends a single ERROR event holding a ``410 Expired`` Status.
``timeoutSeconds`` ends the stream; so does the client going away. Only events of
objects that match the selectors are sent; as on a real API server, a change that
makes an object start matching is sent as ADDED and one that makes it stop matching
as DELETED (carrying the object as it was, at the event's resourceVersion).
``server.py`` calls :func:`serve_watch`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from reconciler.sandbox.api import SandboxApi, present
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import clone, to_json
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.selectors import Matcher
from reconciler.sandbox.store import CLOSE, StoredEvent

DEFAULT_TIMEOUT = 1800.0


def _line(event_type: str, obj: Any) -> bytes:
    return to_json({"type": event_type, "object": obj}) + b"\n"


def _start_rv(request: web.Request) -> int | None:
    raw = request.query.get("resourceVersion", "")
    if raw in ("", "0"):
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise ApiError(400, f"invalid resourceVersion {raw!r}") from e


def _timeout(request: web.Request) -> float:
    raw = request.query.get("timeoutSeconds")
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError as e:
        raise ApiError(400, f"invalid timeoutSeconds {raw!r}") from e


async def serve_watch(
    request: web.Request,
    api: SandboxApi,
    kind: Kind,
    namespace: str | None,
    labels: Matcher,
    fields: Matcher,
) -> web.StreamResponse:
    start, timeout = _start_rv(request), _timeout(request)
    watch_ns = namespace if kind.namespaced else None
    watcher = api.store.subscribe(kind.resource, watch_ns)
    try:
        if start is None:
            backlog = [
                StoredEvent(0, "ADDED", kind.resource, "", obj)
                for obj in api.store.list(kind.resource, watch_ns)
            ]
        else:
            backlog = api.store.events_since(start, kind.resource, watch_ns)
    except ApiError as e:
        api.store.unsubscribe(watcher)
        response = await _open(request)
        await response.write(_line("ERROR", e.to_status()))
        await response.write_eof()
        return response
    response = await _open(request)
    try:
        for event in backlog:
            await _send(response, kind, event, labels, fields)
        await _follow(response, watcher.queue, kind, labels, fields, timeout)
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        api.store.unsubscribe(watcher)
    return response


async def _open(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    return response


async def _send(
    response: web.StreamResponse, kind: Kind, event: StoredEvent, labels: Matcher, fields: Matcher
) -> None:
    matches = labels(event.obj) and fields(event.obj)
    if event.type != "MODIFIED" or event.old is None:
        if matches:
            await response.write(_line(event.type, present(kind, event.obj)))
        return
    matched = labels(event.old) and fields(event.old)
    if matches:
        await response.write(_line("MODIFIED" if matched else "ADDED", present(kind, event.obj)))
    elif matched:
        gone = clone(event.old)
        gone["metadata"]["resourceVersion"] = event.obj["metadata"]["resourceVersion"]
        await response.write(_line("DELETED", present(kind, gone)))


async def _follow(
    response: web.StreamResponse,
    queue: asyncio.Queue[StoredEvent],
    kind: Kind,
    labels: Matcher,
    fields: Matcher,
    timeout: float,
) -> None:
    """Stream live events until the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (remaining := deadline - loop.time()) > 0:
        try:
            event = await asyncio.wait_for(queue.get(), remaining)
        except TimeoutError:
            return
        if event.type == CLOSE:
            return
        await _send(response, kind, event, labels, fields)
