"""Log configuration: plain text for people, JSON lines for log pipelines.

JSON records carry ``cluster`` and ``instance`` when the caller passes them via
``extra=``, so a log pipeline can filter one instance's story (and a migration
run's name, phase, outcome and durations). Both formats start with a UTC
timestamp to the millisecond: a pass makes several lines within one second, and
their order across replicas is read from it.

A pass has an ID (``pass_scope``): every line logged while it runs carries it
(``pass`` in JSON, ``pass=`` in text), and so do its status commits (the
``Reconciler-Pass`` trailer) and its Events (the ``reconciler.dev/pass``
annotation), so one pass can be followed from the logs to Git and to the
cluster. It is a context variable, so a thread started during a pass sees it
only when started in a copy of the context (``contextvars.copy_context``).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from reconciler.model.printable import printable

_CONTEXT_FIELDS = (
    "cluster",
    "instance",
    "app",
    "version",
    "phase",
    "reason",
    # a migration run (reconciler.daemon.migration_steps.log_run)
    "migration",
    "migration_phase",
    "outcome",
    "duration",
    "check_duration",
)

# The field (JSON) and key (text) of the pass ID in a log line.
PASS_FIELD = "pass"

_pass_id: ContextVar[str | None] = ContextVar("reconciler_pass_id", default=None)


def new_pass_id() -> str:
    """Eight hex digits: short enough to type, random so replicas and restarts never
    reuse one (a counter would start again at 1 after every restart)."""
    return secrets.token_hex(4)


def current_pass_id() -> str | None:
    """The ID of the pass running in this context, None outside a pass."""
    return _pass_id.get()


@contextmanager
def pass_scope() -> Iterator[str]:
    """The current pass's ID, or a new one for the duration of the block.

    The service opens it around a pass (so its ``pass (trigger)`` line has the
    ID); ``Daemon.run_pass`` opens it too, for ``run --once`` and tests, and then
    reuses the service's.
    """
    current = _pass_id.get()
    if current is not None:
        yield current
        return
    token = _pass_id.set(new_pass_id())
    try:
        yield _pass_id.get() or ""
    finally:
        _pass_id.reset(token)


def _install_record_factory() -> None:
    """Stamp each log record with the pass ID of the context that creates it.

    Done when the record is made, not when it is formatted, so a handler that
    formats later or elsewhere (a queue, pytest's capture) still sees the pass the
    line belongs to. Installed once, on import: the daemon imports this module
    before it logs anything.
    """
    base = logging.getLogRecordFactory()
    if getattr(base, "reconciler_pass_ids", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        pass_id = _pass_id.get()
        if pass_id is not None:
            record.pass_id = pass_id
        return record

    factory.reconciler_pass_ids = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


_install_record_factory()


def timestamp(created: float) -> str:
    """``2026-11-23T15:46:37.123Z``: RFC 3339 in UTC with milliseconds."""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _pass_of(record: logging.LogRecord) -> str | None:
    """The pass ID given with the record, else the one of the context that logs it
    (handlers format in the logging thread, as ``StreamHandler`` does)."""
    given = getattr(record, "pass_id", None)
    return str(given) if given else current_pass_id()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        pass_id = _pass_of(record)
        if pass_id:
            data[PASS_FIELD] = pass_id
        for key in _CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                data[key] = value
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return json.dumps(data, sort_keys=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        pairs = [(PASS_FIELD, _pass_of(record))]
        pairs += [(key, getattr(record, key, None)) for key in _CONTEXT_FIELDS]
        ctx = " ".join(f"{key}={value}" for key, value in pairs if value is not None)
        base = f"{timestamp(record.created)} {record.levelname.lower()}: {record.getMessage()}"
        text = f"{base} [{ctx}]" if ctx else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        # a message may quote a catalog, a registry or a status record: no raw escapes
        return printable(text)


def configure_logging(level: str = "warning", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
