"""A real Prometheus (Debian's ``prometheus``) and the exporter it scrapes, per test session.

Prometheus must start: ``running_prometheus`` raises, never skips, so a machine
without ``/usr/bin/prometheus`` fails these tests with the install command (``make
test`` installs it). Tests share one server and one exporter; each test serves its
series under a label of its own (``series``), so no test sees another's data. The
pair is started as the session starts when it will run these tests, and stopped as
it ends (``tests/analysis/servers.py``, tests/conftest.py).
"""

from __future__ import annotations

import itertools
import time

import pytest

from reconciler.analysis.client import PrometheusClient
from reconciler.analysis.local import Exporter, LocalPrometheus
from tests.analysis import servers

_ids = itertools.count()
FIRST_SAMPLE_SECONDS = 60.0  # a busy machine may take long to scrape the first time


@pytest.fixture(autouse=True)
def _no_prometheus_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's settings must not change what the tests send."""
    for name in ("TOKEN", "USERNAME", "PASSWORD", "CA_FILE"):
        monkeypatch.delenv(f"RECONCILER_PROMETHEUS_{name}", raising=False)
        monkeypatch.delenv(f"RECONCILER_PROMETHEUS_{name}_FILE", raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def exporter() -> Exporter:
    return servers.start().get()[0]


@pytest.fixture(scope="session")
def prometheus(exporter: Exporter) -> LocalPrometheus:
    return servers.start().get()[1]


@pytest.fixture
def series() -> str:
    """A label value no other test uses: this test's series in the shared Prometheus."""
    return f"t{next(_ids)}"


def wait_for_value(prom: LocalPrometheus, query: str, *, want: float | None = None) -> float:
    """The first value ``query`` returns (``want``: that value), within a generous bound."""
    client = PrometheusClient(prom.url, timeout=5, retries=0)
    deadline = time.monotonic() + FIRST_SAMPLE_SECONDS
    seen: list[float] = []
    while time.monotonic() < deadline:
        answer = client.query(query)
        seen = [s.value for s in answer.samples]
        if len(seen) == 1 and (want is None or seen[0] == want):
            return seen[0]
        time.sleep(0.05)  # the next scrape is due within a second
    raise AssertionError(f"{query} gave {seen}, not {want}, within {FIRST_SAMPLE_SECONDS}s")
