"""Watch streams: newline-delimited JSON events over a chunked HTTP response.

Follows https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes:
without a resourceVersion (or with ``0``) the stream starts with an ADDED event per
existing object; with one it replays the history after it, and when that history
was compacted it sends a single ERROR event holding a ``410 Expired`` Status.
``timeoutSeconds`` ends the stream; so does the client going away. With
``allowWatchBookmarks=true`` a stream that has sent everything up to the store's
resourceVersion says so with a BOOKMARK event (an object holding only its kind and
``metadata.resourceVersion``) every ``bookmark_interval`` seconds (a real server:
about every minute, https://kubernetes.io/docs/reference/using-api/api-concepts/#watch-bookmarks),
so a client that re-watches resumes from there rather than from an old version that
may have been compacted meanwhile. Only events of
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
DEFAULT_BOOKMARK_INTERVAL = 60.0


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
    *,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
) -> web.StreamResponse:
    start, timeout = _start_rv(request), _timeout(request)
    bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
    watch_ns = namespace if kind.namespaced else None
    watcher = api.store.subscribe(kind.resource, watch_ns)
    try:
        if start is None:
            # the stored objects themselves: each is only serialized, never changed
            backlog = [
                StoredEvent(0, "ADDED", kind.resource, "", obj)
                for obj in api.store.view(kind.resource, watch_ns)
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
        every = bookmark_interval if bookmarks else None
        await _follow(response, watcher.queue, kind, labels, fields, timeout, every, api)
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
    bookmark_every: float | None,
    api: SandboxApi,
) -> None:
    """Stream live events until the timeout, with a BOOKMARK every ``bookmark_every``
    seconds (None: the client did not ask for them)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    bookmark_at = loop.time() + bookmark_every if bookmark_every is not None else deadline
    while (remaining := deadline - loop.time()) > 0:
        try:
            wait = min(remaining, max(0.0, bookmark_at - loop.time()))
            event = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            if bookmark_every is None or loop.time() >= deadline:
                return
            if queue.empty():  # every event up to the store's version was sent
                await response.write(_line("BOOKMARK", _bookmark(kind, api)))
            bookmark_at = loop.time() + bookmark_every
            continue
        if event.type == CLOSE:
            return
        await _send(response, kind, event, labels, fields)


def _bookmark(kind: Kind, api: SandboxApi) -> dict[str, Any]:
    """A BOOKMARK's object: the kind, and the resourceVersion the stream has reached."""
    return {
        "kind": kind.kind,
        "apiVersion": kind.api_version,
        "metadata": {"resourceVersion": str(api.store.resource_version)},
    }
