"""Helpers shared by the sandbox contract tests (raw HTTP, polling, manifests)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from reconciler.sandbox.testing import SandboxHandle

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 60.0) -> T:
    """Poll ``check`` until it returns a truthy value (controllers run after a delay;
    the bound is generous so a busy machine only makes it slower, never fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, "condition not reached"
            return value
        time.sleep(0.02)


def http(
    sandbox: SandboxHandle,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """A raw request (urllib) returning (status, decoded JSON body or text)."""
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    request = urllib.request.Request(sandbox.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


def watch_until(
    sandbox: SandboxHandle, path: str, query: str, last: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """The events of a watch on ``path`` up to the one ``last`` accepts (the stream's own
    timeout, in ``query``, is only the bound): a busy machine takes longer than a quiet
    one to send the same events, and a timeout that closes the stream first would drop
    the rest."""
    url = f"{sandbox.url}{path}?watch=true&{query}"
    events: list[dict[str, Any]] = []
    with urllib.request.urlopen(url, timeout=120) as response:
        for line in response:
            if line.strip():
                events.append(json.loads(line))
                if last(events[-1]):
                    break
    return events


def manifest(api_version: str, kind: str, name: str, **fields: Any) -> dict[str, Any]:
    """An object body as a user writes one: ``apiVersion``, ``kind``, a name, then
    ``fields`` (usually ``spec``); the tests' builders all start here."""
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **fields}


def deployment(name: str, replicas: int = 2, image: str = "nginx:1.25") -> dict[str, Any]:
    labels = {"app": name}
    spec = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": image}]},
        },
    }
    return manifest("apps/v1", "Deployment", name, spec=spec)


def job(name: str = "once", schedule: str | None = None) -> dict[str, Any]:
    """A Job running busybox once, or with ``schedule`` a CronJob making such Jobs."""
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}],
        }
    }
    if schedule is None:
        return manifest("batch/v1", "Job", name, spec={"template": template})
    spec = {"schedule": schedule, "jobTemplate": {"spec": {"template": template}}}
    return manifest("batch/v1", "CronJob", name, spec=spec)
