"""The sandbox's request latency and in-flight limit, as kube-apiserver's max-in-flight filter.

Beyond ``--max-requests-inflight`` requests being served, kube-apiserver answers
429 with ``Retry-After``; long-running requests (watches) are not counted
(https://kubernetes.io/docs/concepts/cluster-administration/flow-control/).
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from tests.sandbox.helpers import eventually


def get(sandbox: SandboxHandle, path: str) -> tuple[int, str, str | None]:
    """(status, body text, Retry-After) of a GET."""
    try:
        with urllib.request.urlopen(sandbox.url + path, timeout=10) as response:
            return response.status, response.read().decode(), response.headers["Retry-After"]
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers["Retry-After"]


def test_a_request_beyond_the_limit_is_told_to_come_back() -> None:
    with running_sandbox(request_latency=0.5, max_requests_in_flight=1) as sandbox:
        watch = threading.Thread(
            target=get, args=(sandbox, "/api/v1/namespaces?watch=true&timeoutSeconds=1")
        )
        watch.start()  # long-running: never counted
        slow = threading.Thread(target=get, args=(sandbox, "/api/v1/namespaces"))
        slow.start()
        eventually(lambda: sandbox.call(lambda: sandbox._running.server._in_flight == 1))
        status, text, retry_after = get(sandbox, "/api/v1/namespaces/default")
        slow.join(timeout=60)
        watch.join(timeout=60)  # ends after its timeoutSeconds, however loaded the machine
        assert (status, retry_after) == (429, "1")
        assert text.startswith("Too many requests")
        eventually(lambda: any(e.verb == "watch" for e in sandbox.request_log()), timeout=60)
        log = sandbox.request_log()
        assert [(e.verb, e.status, e.in_flight) for e in log if e.verb != "watch"] == [
            ("get", 429, 2),
            ("list", 200, 1),
        ]
        assert [e.in_flight for e in log if e.verb == "watch"] == [0]
        assert get(sandbox, "/api/v1/namespaces/default")[0] == 200  # served again
