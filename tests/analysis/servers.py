"""The analysis tests' exporter and Prometheus: one pair per test process, started early.

Debian's Prometheus (2.42) scrapes a configured target for the first time about 5 s
after it starts: its scrape manager takes targets in on a 5 s tick. The first test
of each process to use it waited that out (5.7 s of a 5.9 s test, with 0.1 s of
CPU). A process that will run tests of ``tests/analysis`` starts the pair in a thread
as its session starts (``start``, from tests/conftest.py), so the tick passes while
the process collects its tests; the fixtures take the pair once its first scrape is
in (``EarlyServers.get``), within a generous bound. Any other process starts nothing
until a fixture asks (``start`` then starts the pair and the fixture waits).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from contextlib import ExitStack, closing
from pathlib import Path

import pytest

from reconciler.analysis.client import PrometheusClient
from reconciler.analysis.local import Exporter, LocalPrometheus, running_prometheus

ANALYSIS = Path(__file__).resolve().parent
# a busy machine may take long to start Prometheus and to scrape the first time
STARTED_SECONDS = 120.0
FIRST_SCRAPE = 'up{job="app"} == 1'


class EarlyServers:
    """An exporter and a Prometheus scraping it, started in a thread at construction."""

    def __init__(self) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="reconciler-test-prometheus-"))
        self._stack = ExitStack()
        self._done = threading.Event()
        self._pair: tuple[Exporter, LocalPrometheus] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._start, name="analysis-servers", daemon=True).start()

    def _start(self) -> None:
        try:
            exporter = self._stack.enter_context(closing(Exporter().start()))
            prom = self._stack.enter_context(
                running_prometheus(self._directory, [exporter.target], timeout=STARTED_SECONDS)
            )
            _first_scrape(prom)
            self._pair = (exporter, prom)
        except BaseException as e:  # said by ``get``, in the test that asks
            self._error = e
        finally:
            self._done.set()

    def get(self) -> tuple[Exporter, LocalPrometheus]:
        """The pair, once Prometheus has scraped the exporter (raises what went wrong)."""
        if not self._done.wait(2 * STARTED_SECONDS):
            raise AssertionError(f"Prometheus not started within {2 * STARTED_SECONDS:.0f}s")
        if self._error is not None:
            raise self._error
        assert self._pair is not None
        return self._pair

    def close(self) -> None:
        """Stop both (after a start still under way ends), and remove Prometheus's data."""
        self._done.wait(2 * STARTED_SECONDS)
        try:
            self._stack.close()
        finally:
            shutil.rmtree(self._directory, ignore_errors=True)


def _first_scrape(prom: LocalPrometheus) -> None:
    client = PrometheusClient(prom.url, timeout=5, retries=0)
    try:
        deadline = time.monotonic() + STARTED_SECONDS
        while not client.query(FIRST_SCRAPE).samples:
            if time.monotonic() > deadline:
                raise AssertionError(f"no scrape of the exporter within {STARTED_SECONDS:.0f}s")
            time.sleep(0.05)
    finally:
        client.close()


_servers: list[EarlyServers] = []  # this process's pair, once started


def start() -> EarlyServers:
    """This process's pair, started now if it was not yet."""
    if not _servers:
        _servers.append(EarlyServers())
    return _servers[0]


def stop() -> None:
    while _servers:
        _servers.pop().close()


def runs_analysis_tests(config: pytest.Config) -> bool:
    """Will this process run tests of ``tests/analysis``? (It asked for a path that holds
    or is inside that folder, it runs tests itself, and not ``--collect-only``.)"""
    if config.option.collectonly:
        return False
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return False  # the xdist controller hands the tests out; its workers run them
    here = Path(config.invocation_params.dir)
    for arg in config.args:
        path = (here / arg.split("::")[0]).resolve()
        if path == ANALYSIS or ANALYSIS in path.parents or path in ANALYSIS.parents:
            return True
    return False
