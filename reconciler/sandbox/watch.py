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

A watch list (https://kubernetes.io/docs/reference/using-api/api-concepts/#streaming-lists):
``sendInitialEvents=true`` (which needs ``resourceVersionMatch=NotOlderThan`` and
``allowWatchBookmarks=true``, else ``422``) starts with an ADDED event per existing
object and then a BOOKMARK annotated ``k8s.io/initial-events-end: "true"`` at the
resourceVersion of that state; ``sendInitialEvents=false`` starts from now. With
bookmarks allowed, one more comes 2 s before ``timeoutSeconds`` ends the stream (as
kube-apiserver's watch cache sends it, so the client resumes from the newest version).
Asked for ``as=Table`` (``kubectl get -w``), each object is sent as a one-row Table,
the column definitions only in the first (the server omits headers after it).
``server.py`` calls :func:`serve_watch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from reconciler.sandbox.api import SandboxApi, present
from reconciler.sandbox.apierrors import ApiError, field_errors
from reconciler.sandbox.copying import clone, to_json
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.selectors import Matcher
from reconciler.sandbox.store import CLOSE, StoredEvent

DEFAULT_TIMEOUT = 1800.0
DEFAULT_BOOKMARK_INTERVAL = 60.0
# kube-apiserver's watch cache sends its last BOOKMARK this long before the timeout
PRE_TIMEOUT_BOOKMARK = 2.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# at most this many queued events go out in one write of a watch stream
WRITE_BATCH = 256

# (event type, object) -> one line of the stream
Encode = Callable[[str, Any], bytes]


def event_line(event_type: str, obj: Any) -> bytes:
    return to_json({"type": event_type, "object": obj}) + b"\n"


def table_lines(as_table: Callable[[dict[str, Any]], dict[str, Any]]) -> Encode:
    """Lines whose objects are Tables; column definitions only in the first (a
    BOOKMARK's Table has no rows, an ERROR stays a Status)."""
    headers = [True]

    def encode(event_type: str, obj: Any) -> bytes:
        if event_type == "ERROR":
            return event_line(event_type, obj)
        if event_type == "BOOKMARK":  # a Table of no rows, at the bookmark's version
            table = as_table({"items": [], "metadata": obj["metadata"]})
            table["metadata"] = obj["metadata"]
        else:
            table = as_table(obj)
        if not headers[0]:
            table["columnDefinitions"] = None
        headers[0] = False
        return event_line(event_type, table)

    return encode


def _initial_events(request: web.Request, bookmarks: bool) -> bool | None:
    """``sendInitialEvents`` (None: not given), refused as kube-apiserver's
    ValidateListOptions refuses it: it needs ``resourceVersionMatch=NotOlderThan`` and
    bookmarks, and a ``resourceVersionMatch`` needs it."""
    raw = request.query.get("sendInitialEvents")
    match = request.query.get("resourceVersionMatch", "")
    errors = []
    if raw is not None:
        if match != "NotOlderThan":
            why = "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            errors.append(("resourceVersionMatch", why))
        if not bookmarks:
            why = "sendInitialEvents requires setting allowWatchBookmarks to true"
            errors.append(("allowWatchBookmarks", why))
    elif match:
        why = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        errors.append(("resourceVersionMatch", why))
    if errors:
        causes = [("FieldValueForbidden", f, f"Forbidden: {why}") for f, why in errors]
        raise field_errors(("meta.k8s.io", "ListOptions"), "", causes)
    return None if raw is None else raw in ("true", "1")


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
    encode: Encode = event_line,
) -> web.StreamResponse:
    start, timeout = _start_rv(request), _timeout(request)
    bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
    initial = _initial_events(request, bookmarks)
    watch_ns = namespace if kind.namespaced else None
    watcher = api.store.subscribe(kind.resource, watch_ns)
    initial_end = None
    try:
        if initial is False:
            backlog = (
                [] if start is None else api.store.events_since(start, kind.resource, watch_ns)
            )
        elif start is None or initial:
            # the stored objects themselves: each is only serialized, never changed
            backlog = [
                StoredEvent(0, "ADDED", kind.resource, "", obj)
                for obj in api.store.view(kind.resource, watch_ns)
            ]
            if initial:
                initial_end = _bookmark(kind, api)
                initial_end["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
        else:
            backlog = api.store.events_since(start, kind.resource, watch_ns)
    except ApiError as e:
        api.store.unsubscribe(watcher)
        response = await _open(request)
        await response.write(encode("ERROR", e.to_status()))
        await response.write_eof()
        return response
    response = await _open(request)
    try:
        for at in range(0, len(backlog), WRITE_BATCH):
            batch = backlog[at : at + WRITE_BATCH]
            await _write(response, [_line(kind, e, labels, fields, encode) for e in batch])
        if initial_end is not None:
            await response.write(encode("BOOKMARK", initial_end))
        every = bookmark_interval if bookmarks else None
        await _follow(response, watcher.queue, kind, labels, fields, timeout, every, api, encode)
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


async def _write(response: web.StreamResponse, lines: list[bytes]) -> None:
    """Lines of the stream in one write (none when no line is left: an empty chunk
    would end a chunked response)."""
    chunk = b"".join(lines)
    if chunk:
        await response.write(chunk)


class SharedLines:
    """The lines of the latest events, encoded once for every watch that sends them.

    Every watch of a resource gets the same :class:`StoredEvent` (the store queues that
    one object to each); with several watches of one kind open (informers of the
    reconciler, kubectl, a test's client) each encoded it again. Keyed by the event's
    and the kind's identity (both held here, so neither id is reused while cached)
    and the type shown; at most ``limit`` lines, the oldest forgotten first.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lines: dict[tuple[int, str, int], tuple[StoredEvent, Kind, bytes]] = {}

    def line(self, kind: Kind, event: StoredEvent, shown: str) -> bytes:
        key = (id(event), shown, id(kind))
        found = self._lines.get(key)
        if found is not None:
            return found[2]
        line = event_line(shown, present(kind, event.obj))
        self._lines[key] = (event, kind, line)
        if len(self._lines) > self.limit:
            del self._lines[next(iter(self._lines))]
        return line

    def __len__(self) -> int:
        return len(self._lines)


# the lines every watch stream of this process shares (the latest events' only)
SHARED_LINES = SharedLines(4096)


def _line(
    kind: Kind, event: StoredEvent, labels: Matcher, fields: Matcher, encode: Encode
) -> bytes:
    """What ``event`` shows this watch: an object entering its selectors is ADDED, one
    leaving them DELETED (at the new resourceVersion); nothing when it never matched."""
    matches = labels(event.obj) and fields(event.obj)
    if event.type != "MODIFIED" or event.old is None:
        return _shown(kind, event, event.type, encode) if matches else b""
    matched = labels(event.old) and fields(event.old)
    if matches:
        return _shown(kind, event, "MODIFIED" if matched else "ADDED", encode)
    if matched:
        gone = clone(event.old)
        gone["metadata"]["resourceVersion"] = event.obj["metadata"]["resourceVersion"]
        return encode("DELETED", present(kind, gone))
    return b""


def _shown(kind: Kind, event: StoredEvent, shown: str, encode: Encode) -> bytes:
    """``event``'s object as a line of type ``shown``: the shared line for plain JSON
    (a Table stream's encoder keeps state of its own and encodes each itself)."""
    if encode is event_line and event.rv:
        return SHARED_LINES.line(kind, event, shown)
    return encode(shown, present(kind, event.obj))


async def _follow(
    response: web.StreamResponse,
    queue: asyncio.Queue[StoredEvent],
    kind: Kind,
    labels: Matcher,
    fields: Matcher,
    timeout: float,
    bookmark_every: float | None,
    api: SandboxApi,
    encode: Encode = event_line,
) -> None:
    """Stream live events until the timeout, with a BOOKMARK every ``bookmark_every``
    seconds and one 2 s before the timeout (None: the client did not ask for them)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout

    def next_bookmark(now: float) -> float:
        """The watch cache's nextBookmarkTime: the sooner of a period from now and
        2 s before the deadline; none (the deadline) once that moment is past."""
        if bookmark_every is None:
            return deadline
        at = min(now + bookmark_every, deadline - PRE_TIMEOUT_BOOKMARK)
        return at if at > now else deadline

    bookmark_at = next_bookmark(loop.time())
    while (remaining := deadline - loop.time()) > 0:
        try:
            wait = min(remaining, max(0.0, bookmark_at - loop.time()))
            event = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            if bookmark_every is None or loop.time() >= deadline:
                return
            if loop.time() < bookmark_at:
                continue
            if queue.empty():  # every event up to the store's version was sent
                await response.write(encode("BOOKMARK", _bookmark(kind, api)))
            bookmark_at = next_bookmark(loop.time())
            continue
        if event.type == CLOSE:
            return
        # the events already queued behind it go in the same write: one chunk and one
        # send for a burst (a Deployment's status writes, a namespace's objects)
        # instead of one each; the bytes the client reads are the same
        lines = [_line(kind, event, labels, fields, encode)]
        while len(lines) < WRITE_BATCH and not queue.empty():
            queued = queue.get_nowait()
            if queued.type == CLOSE:
                await _write(response, lines)
                return
            lines.append(_line(kind, queued, labels, fields, encode))
        await _write(response, lines)


def _bookmark(kind: Kind, api: SandboxApi) -> dict[str, Any]:
    """A BOOKMARK's object: the kind, and the resourceVersion the stream has reached."""
    return {
        "kind": kind.kind,
        "apiVersion": kind.api_version,
        "metadata": {"resourceVersion": str(api.store.resource_version)},
    }
