"""A real Prometheus on 127.0.0.1, and an exporter it scrapes, for tests and the demo.

``running_prometheus`` runs Debian's ``prometheus`` package (``/usr/bin/prometheus``)
with its storage in a directory, on a free loopback port, scraping the given targets
every second; it waits (bounded) for ``/-/ready``. Nothing here skips: a server that
cannot start raises ``PrometheusStartError`` with its own output.

``Exporter`` serves what an app's ``/metrics`` would: per ``labels`` set (a version,
a namespace...), a counter ``http_requests_total`` that grows on every scrape, split
between ``status="200"`` and ``status="500"`` (podinfo's label) by the error rate the
caller sets, a gauge ``http_error_ratio`` with that rate and a gauge
``http_request_duration_seconds`` with the latency. The caller changes the numbers
while Prometheus scrapes, so a test or the demo controls what the release "serves".
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import urllib3

from reconciler.localserver import Readiness, free_port, server_process, wait_ready

PROMETHEUS_BINARY = "/usr/bin/prometheus"
INSTALL_HINT = "apt-get install -y prometheus (or `make prometheus` as root)"
REQUESTS_PER_SCRAPE = 100
Labels = tuple[tuple[str, str], ...]


class PrometheusStartError(RuntimeError):
    """The local Prometheus could not be started; the message says why."""


@dataclass(frozen=True)
class LocalPrometheus:
    """A running Prometheus: ``url`` is what ``--prometheus-url`` takes."""

    url: str
    directory: Path


@contextmanager
def running_prometheus(
    directory: Path, targets: Sequence[str], *, timeout: float = 60.0
) -> Iterator[LocalPrometheus]:
    """Prometheus scraping ``targets`` (``host:port``) every second, until the block ends."""
    binary = shutil.which("prometheus") or PROMETHEUS_BINARY
    if not Path(binary).is_file():
        raise PrometheusStartError(f"{PROMETHEUS_BINARY} is missing: {INSTALL_HINT}")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    listed = ", ".join(f'"{t}"' for t in targets)
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: app\n    static_configs: [{{targets: [{listed}]}}]\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1h",
        "--log.level=warn",
    ]
    log = directory / "prometheus.log"
    with server_process(argv, log=log, cwd=directory) as process:
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=1, read=2), retries=False)

        def ready() -> bool:
            try:
                return bool(http.request("GET", url + "/-/ready").status == 200)
            except urllib3.exceptions.HTTPError:
                return False

        readiness = wait_ready(process, ready, timeout=timeout, interval=0.1)
        if readiness is not Readiness.READY:
            output = log.read_text(errors="replace")[-2000:]
            exited = readiness is Readiness.EXITED
            state = "exited" if exited else f"not ready within {timeout:.0f}s"
            raise PrometheusStartError(f"prometheus {state}: {output}")
        yield LocalPrometheus(url, directory)


class Exporter:
    """An app's metrics, as numbers the caller sets (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rates: dict[Labels, tuple[float, float]] = {}  # labels -> (error rate, latency)
        self._counts: dict[tuple[Labels, str], float] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def target(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> Exporter:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def serve(self, labels: Mapping[str, str], *, error_rate: float, latency: float = 0.05) -> None:
        """From the next scrape on, the series of ``labels`` serve this error rate and latency."""
        with self._lock:
            self._rates[_key(labels)] = (error_rate, latency)

    def stop_serving(self, labels: Mapping[str, str]) -> None:
        """The series of ``labels`` disappear (Prometheus marks them stale)."""
        with self._lock:
            self._rates.pop(_key(labels), None)

    def exposition(self) -> str:
        """The text format, counters advanced by one scrape's worth of requests."""
        lines = [
            "# TYPE http_requests_total counter",
            "# TYPE http_error_ratio gauge",
            "# TYPE http_request_duration_seconds gauge",
        ]
        with self._lock:
            for labels, (errors, latency) in sorted(self._rates.items()):
                failed = REQUESTS_PER_SCRAPE * errors
                for status, amount in (("200", REQUESTS_PER_SCRAPE - failed), ("500", failed)):
                    total = self._counts.get((labels, status), 0.0) + amount
                    self._counts[(labels, status)] = total
                    lines.append(f"http_requests_total{_text(labels, status=status)} {total}")
                lines.append(f"http_error_ratio{_text(labels)} {errors}")
                lines.append(f"http_request_duration_seconds{_text(labels)} {latency}")
        return "\n".join(lines) + "\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with suppress(BrokenPipeError, ConnectionResetError):
                    # a Prometheus stopped mid-scrape (a test ending): nothing to report
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # one request a second per Prometheus: not worth a line

        return Handler


def _key(labels: Mapping[str, str]) -> Labels:
    return tuple(sorted(labels.items()))


def _text(labels: Labels, **more: str) -> str:
    pairs = [*labels, *sorted(more.items())]
    inner = ",".join(f'{k}="{v}"' for k, v in pairs)
    return "{" + inner + "}"


__all__ = [
    "INSTALL_HINT",
    "PROMETHEUS_BINARY",
    "Exporter",
    "LocalPrometheus",
    "PrometheusStartError",
    "free_port",
    "running_prometheus",
]
