"""Log configuration: plain text for people, JSON lines for log pipelines.

JSON records carry ``cluster`` and ``instance`` when the caller passes them via
``extra=``, so a log pipeline can filter one instance's story (and a migration
run's name, phase, outcome and durations).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

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


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in _CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                data[key] = value
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return json.dumps(data, sort_keys=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ctx = " ".join(
            f"{key}={getattr(record, key)}"
            for key in _CONTEXT_FIELDS
            if getattr(record, key, None) is not None
        )
        base = f"{record.levelname.lower()}: {record.getMessage()}"
        return f"{base} [{ctx}]" if ctx else base


def configure_logging(level: str = "warning", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
