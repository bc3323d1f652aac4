"""Where the client reports each API answer and retry, for whoever counts them.

``kube/`` sits below the daemon (ARCHITECTURE's layers), so the client cannot
import the daemon's metrics; instead it calls ``record_request`` for every
answer and ``record_retry`` for every request it sends again, and the daemon's
``DaemonMetrics`` subscribes with ``add_listener``. Listeners are held weakly: a
daemon that goes away (tests build many in one process) stops counting without
having to unsubscribe. Counting is process-wide, like client-go's
``rest_client_requests_total``: every ``KubeClient`` of the process is counted,
which in ``reconciler run`` is the daemon's own.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Protocol

log = logging.getLogger(__name__)

# The code of a request that got no answer (connection refused, timeout, TLS).
NO_ANSWER = "error"


class RequestListener(Protocol):
    def count_request(self, verb: str, code: str) -> None: ...

    def count_retry(self, verb: str, code: str) -> None: ...


_lock = threading.Lock()
# Weak references to the listeners, replaced whole on every change: a request reads
# the tuple as it is, without a lock or a copy (one per request before: the weak set
# was copied under the lock for every answer of a 4,000-request install).
_listeners: tuple[weakref.ref[RequestListener], ...] = ()


def add_listener(listener: RequestListener) -> None:
    """Count every request and retry of this process in ``listener`` from now on."""
    global _listeners
    with _lock:
        _listeners = (*_others(listener), weakref.ref(listener))


def remove_listener(listener: RequestListener) -> None:
    global _listeners
    with _lock:
        _listeners = _others(listener)


def record_request(verb: str, code: int | str) -> None:
    """One answer (or ``NO_ANSWER``) of the API server to an HTTP ``verb`` (GET, PATCH...)."""
    for listener in _live():
        _call(listener.count_request, verb, code)


def record_retry(verb: str, code: int | str) -> None:
    """A request sent again after ``code`` (429, a 5xx, or ``NO_ANSWER``)."""
    for listener in _live():
        _call(listener.count_retry, verb, code)


def _live() -> Iterator[RequestListener]:
    """The listeners still alive, from the tuple as it is now (no lock, no copy)."""
    for ref in _listeners:
        listener = ref()
        if listener is not None:
            yield listener


def _others(listener: RequestListener) -> tuple[weakref.ref[RequestListener], ...]:
    """The references of the live listeners but ``listener``; the caller holds ``_lock``."""
    return tuple(r for r in _listeners if r() is not None and r() is not listener)


def _call(method: Callable[[str, str], None], verb: str, code: int | str) -> None:
    """A listener's failure must never fail the request it counts."""
    try:
        method(verb.upper(), str(code))
    except Exception as e:  # counting is best effort
        log.debug("request listener failed: %s", e)
