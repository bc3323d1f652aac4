"""Measurements against a real Prometheus: every verdict of SPEC section 4c from real PromQL.

The exporter serves per-series error rates; Prometheus scrapes it every second; the
queries below go over HTTP to Prometheus's ``/api/v1/query``, never to a mock.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reconciler.analysis.client import (
    Credentials,
    PrometheusClient,
    PrometheusUnreachable,
    QueryError,
)
from reconciler.analysis.local import Exporter, LocalPrometheus, free_port
from reconciler.analysis.measure import measure, measure_query
from reconciler.model.analysis import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    AnalysisQuery,
    PrometheusAnalysis,
    parse_condition,
)
from reconciler.model.errors import UsageError
from tests.analysis.conftest import wait_for_value

AT = "2026-01-01T00:00:00Z"


def _query(query: str, condition: str = "< 0.01", name: str = "error-rate") -> AnalysisQuery:
    return AnalysisQuery(name, query, parse_condition(condition))


def _one(prom: LocalPrometheus, query: AnalysisQuery, **values: str) -> object:
    client = PrometheusClient(prom.url, timeout=5, retries=0)
    return measure_query(client, query, batch=2, values=values, at=AT)


@pytest.mark.slow
def test_a_one_series_answer_is_compared_with_the_condition(
    prometheus: LocalPrometheus, exporter: Exporter, series: str
) -> None:
    exporter.serve({"series": series, "version": "1.1.0"}, error_rate=0.002)
    exporter.serve({"series": series, "version": "1.0.0"}, error_rate=0.5)
    wait_for_value(prometheus, f'http_error_ratio{{series="{series}",version="1.1.0"}}')
    query = _query('http_error_ratio{series="${instance.name}",version="${rollout.to}"}')
    good = _one(prometheus, query, **{"instance.name": series, "rollout.to": "1.1.0"})
    assert good.value == 0.002 and good.ok and good.result == PASSED  # type: ignore[attr-defined]
    assert good.describe() == "error-rate 0.002 < 0.01"  # type: ignore[attr-defined]
    bad = _one(prometheus, query, **{"instance.name": series, "rollout.to": "1.0.0"})
    assert (bad.value, bad.ok, bad.result) == (0.5, False, FAILED)  # type: ignore[attr-defined]
    assert bad.describe() == "error-rate 0.5 not < 0.01"  # type: ignore[attr-defined]


def test_a_rate_over_the_request_counter(
    prometheus: LocalPrometheus, exporter: Exporter, series: str
) -> None:
    """The worked query of the docs: failed requests over all requests, from counters."""
    exporter.serve({"series": series, "version": "1.1.0"}, error_rate=0.25)
    total = f'sum(rate(http_requests_total{{series="{series}"}}[5s]))'
    wait_for_value(prometheus, f"{total} > 0")
    query = _query(
        'sum(rate(http_requests_total{series="${instance.name}",status=~"5.."}[5s]))'
        ' / sum(rate(http_requests_total{series="${instance.name}"}[5s]))',
        "< 0.3",
    )
    got = _one(prometheus, query, **{"instance.name": series})
    assert got.ok and got.value == pytest.approx(0.25)  # type: ignore[attr-defined]


def test_scalar_no_data_several_series_nan_and_non_numbers(
    prometheus: LocalPrometheus, exporter: Exporter, series: str
) -> None:
    exporter.serve({"series": series, "version": "a"}, error_rate=0.0)
    exporter.serve({"series": series, "version": "b"}, error_rate=0.0)
    wait_for_value(prometheus, f'count(http_error_ratio{{series="{series}"}}) == 2')
    scalar = _one(prometheus, _query("scalar(vector(0.5)) * 2", "== 1"))
    assert scalar.ok and scalar.value == 1.0  # type: ignore[attr-defined]
    empty = _one(prometheus, _query(f'http_error_ratio{{series="{series}",version="zz"}}'))
    assert (empty.result, empty.reason, empty.ok) == (INCONCLUSIVE, "no data", False)  # type: ignore[attr-defined]
    several = _one(prometheus, _query(f'http_error_ratio{{series="{series}"}}'))
    assert several.result == FAILED  # type: ignore[attr-defined]
    assert several.reason.startswith("2 series, expected one: {")  # type: ignore[attr-defined]
    nan = _one(prometheus, _query(f'sum(http_error_ratio{{series="{series}"}}) / 0 * 0'))
    assert nan.result == FAILED and math.isnan(nan.value)  # type: ignore[attr-defined]
    assert nan.reason == "the value is NaN, not a number"  # type: ignore[attr-defined]
    matrix = _one(prometheus, _query(f'http_error_ratio{{series="{series}"}}[5s]'))
    assert matrix.reason == "the query returns a matrix, not a number"  # type: ignore[attr-defined]
    text = _one(prometheus, _query('"words"'))
    assert text.reason == "the query returns a string, not a number"  # type: ignore[attr-defined]


def test_a_query_prometheus_refuses_is_a_failed_measurement_with_its_reason(
    prometheus: LocalPrometheus,
) -> None:
    client = PrometheusClient(prometheus.url, timeout=5, retries=0)
    with pytest.raises(QueryError) as caught:
        client.query("sum(rate(x[5m])")
    assert "bad_data" in caught.value.reason
    got = _one(prometheus, _query("sum(rate(x[5m])"))
    assert got.result == FAILED and got.reason.startswith("query failed: bad_data: ")  # type: ignore[attr-defined]


def test_an_unreachable_prometheus_is_inconclusive_after_its_retries() -> None:
    client = PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout=1, retries=2, backoff=0)
    with pytest.raises(PrometheusUnreachable, match="connection refused"):
        client.query("up")
    analysis = PrometheusAnalysis((_query("up", ">= 1", "up"), _query("vector(1)", "== 1", "one")))
    got = measure(client, analysis, batch=1, values={}, at=AT)
    assert [(m.name, m.result, m.reason) for m in got] == [
        ("up", INCONCLUSIVE, "prometheus unreachable: connection refused"),
        ("one", INCONCLUSIVE, "prometheus unreachable: connection refused"),
    ]


class _Recorder(BaseHTTPRequestHandler):
    """A stand-in server that only records the Authorization header and answers 503 first."""

    seen: list[str] = []
    failures = 0

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization", ""))
        if type(self).failures > 0:
            type(self).failures -= 1
            self.send_response(503)
            self.end_headers()
            return
        body = b'{"status":"success","data":{"resultType":"scalar","result":[1,"7"]}}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen, _Recorder.failures = [], 0
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_credentials_come_from_the_environment_or_a_mounted_file(
    recorder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bearer token from a file (a mounted Secret), basic auth from variables; a 503
    is retried within the budget."""
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    monkeypatch.setenv("RECONCILER_PROMETHEUS_TOKEN_FILE", str(token))
    _Recorder.failures = 1
    client = PrometheusClient.from_environment(recorder, retries=1, backoff=0)
    assert client.query("x").samples[0].value == 7
    assert _Recorder.seen == ["Bearer s3cret-token", "Bearer s3cret-token"]
    monkeypatch.delenv("RECONCILER_PROMETHEUS_TOKEN_FILE")
    monkeypatch.setenv("RECONCILER_PROMETHEUS_USERNAME", "reader")
    monkeypatch.setenv("RECONCILER_PROMETHEUS_PASSWORD", "pw")
    PrometheusClient.from_environment(recorder).query("x")
    assert _Recorder.seen[-1] == "Basic cmVhZGVyOnB3"
    _Recorder.failures = 5
    with pytest.raises(PrometheusUnreachable, match="HTTP 503") as caught:
        PrometheusClient.from_environment(recorder, retries=1, backoff=0).query("x")
    assert "pw" not in str(caught.value) and "reader" not in str(caught.value)


def test_bad_connection_settings_are_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError, match="not an http"):
        PrometheusClient("prometheus:9090")
    with pytest.raises(UsageError, match="not in its URL"):
        PrometheusClient("http://u:p@prometheus:9090")
    with pytest.raises(UsageError, match="go together"):
        Credentials.from_environment({"RECONCILER_PROMETHEUS_USERNAME": "u"})
    with pytest.raises(UsageError, match="not both"):
        Credentials.from_environment(
            {"RECONCILER_PROMETHEUS_TOKEN": "t", "RECONCILER_PROMETHEUS_PASSWORD": "p"}
        )
    with pytest.raises(UsageError, match="TOKEN_FILE"):
        Credentials.from_environment({"RECONCILER_PROMETHEUS_TOKEN_FILE": str(tmp_path / "no")})
    monkeypatch.setenv("RECONCILER_PROMETHEUS_CA_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(UsageError, match="CA_FILE"):
        PrometheusClient.from_environment("https://prometheus:9090")
