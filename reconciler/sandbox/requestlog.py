"""The request log: what clients asked of the sandbox, for tests and benchmarks.

Tests assert "an unchanged apply sent no write" and benchmarks count requests by
reading this log in-process (``SandboxHandle.request_log()``) or over HTTP
(``GET /sandbox/requests``, in pages with ``?offset=N&limit=M``; ``DELETE
/sandbox/requests`` to reset). The server
thread appends while the test thread reads, hence the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RequestLogEntry:
    """One served request; ``verb`` is the Kubernetes verb (list, watch, patch, ...)."""

    time: float
    method: str
    verb: str
    path: str
    query: str
    status: int
    user_agent: str
    # requests being served when this one began, itself included (0: not counted,
    # e.g. a watch); more than 1 shows a client sending requests concurrently
    in_flight: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestLogEntry:
        return cls(
            time=float(data["time"]),
            method=str(data["method"]),
            verb=str(data["verb"]),
            path=str(data["path"]),
            query=str(data["query"]),
            status=int(data["status"]),
            user_agent=str(data["user_agent"]),
            in_flight=int(data.get("in_flight", 0)),
        )


class RequestLog:
    """A bounded, thread-safe list of :class:`RequestLogEntry`."""

    def __init__(self, limit: int = 100_000) -> None:
        self._entries: list[RequestLogEntry] = []
        self._limit = limit
        self._lock = threading.Lock()

    def append(self, entry: RequestLogEntry) -> None:
        with self._lock:
            self._entries.append(entry)
            if len(self._entries) > self._limit:
                del self._entries[: len(self._entries) - self._limit]

    def entries(self) -> list[RequestLogEntry]:
        with self._lock:
            return list(self._entries)

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()


def kube_verb(method: str, has_name: bool, is_watch: bool, is_resource: bool) -> str:
    """The Kubernetes verb of a request (``get`` for non-resource paths like /api)."""
    if not is_resource:
        return method.lower()
    if method == "GET":
        if is_watch:
            return "watch"
        return "get" if has_name else "list"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
