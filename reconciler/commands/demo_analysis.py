"""The demo's metrics chapter: Prometheus decides a batch, and a bad release rolls back.

The demo runs a real Prometheus (Debian's ``prometheus`` package) on a free loopback
port, scraping the built-in exporter (``reconciler.analysis.local.Exporter``) every
second, which serves the app's ``http_requests_total{status}`` for each version as
podinfo would, here with 8% of the new version's requests failing. partner-api
moves from 6.5.0 to 6.6.0 with an analysis of its error rate: batch 1 is measured,
fails, and the release rolls back by itself; the status commit says why.

Without the prometheus binary (a machine without root or apt) the chapter is skipped
with a line saying how to get it; the rest of the demo does not need it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reconciler.analysis.client import PrometheusClient, PrometheusError
from reconciler.analysis.local import (
    INSTALL_HINT,
    PROMETHEUS_BINARY,
    Exporter,
    LocalPrometheus,
    PrometheusStartError,
    running_prometheus,
)
from reconciler.daemon.loop import PassOutcome
from reconciler.source.scaffold import CatalogRepo, commit_file

INSTANCE = "partner-api"
NAMESPACE = "partner"
ERROR_RATE = 0.08
QUERY = (
    'sum(rate(http_requests_total{namespace="${instance.namespace}",'
    'version="${rollout.to}",status=~"5.."}[5s]))'
    ' / sum(rate(http_requests_total{namespace="${instance.namespace}",'
    'version="${rollout.to}"}[5s]))'
)
ANALYSED_INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: partner-api
app: podinfo
version: 6.6.0
namespace: partner
parameters: {{replicas: 3, message: "partner API"}}
rollout:
  batches: [1, 100%]
  onFailure: rollback
  analysis:
    prometheus:
      address: {address}
      interval: 1s
      count: 2
      queries:
        - name: error-rate
          query: '{query}'
          successCondition: "< 0.01"
"""


@contextmanager
def demo_prometheus(
    directory: Path, say: Callable[[str], None]
) -> Iterator[tuple[LocalPrometheus, Exporter] | None]:
    """A real Prometheus scraping the built-in exporter, or None (said why)."""
    if not os.access(PROMETHEUS_BINARY, os.X_OK):
        say(
            f"prometheus   none: {PROMETHEUS_BINARY} is missing, so the metrics chapter is "
            f"skipped ({INSTALL_HINT})"
        )
        yield None
        return
    exporter = Exporter().start()
    try:
        with running_prometheus(directory, [exporter.target]) as prometheus:
            say(f"prometheus   {prometheus.url}  (scraping the exporter at {exporter.target})")
            yield prometheus, exporter
    except PrometheusStartError as e:
        say(f"prometheus   could not start ({e}); the metrics chapter is skipped")
        yield None
    finally:
        exporter.close()


def metrics_chapter(
    chapter: Callable[[str], None],
    say: Callable[[str], None],
    repo: CatalogRepo,
    found: tuple[LocalPrometheus, Exporter],
    roll: Callable[[str], PassOutcome],
) -> PassOutcome:
    """partner-api 6.5.0 -> 6.6.0 measured by Prometheus; 8% errors roll it back."""
    prometheus, exporter = found
    chapter("Metrics decide: a release serving 8% errors rolls back by itself")
    exporter.serve({"namespace": NAMESPACE, "version": "6.5.0"}, error_rate=0.0)
    exporter.serve({"namespace": NAMESPACE, "version": "6.6.0"}, error_rate=ERROR_RATE)
    say(f"the exporter serves partner-api's http_requests_total: 6.6.0 fails {ERROR_RATE:.0%}")
    _wait_for_rates(prometheus)
    commit_file(
        repo,
        f"clusters/prod/instances/{INSTANCE}.yaml",
        ANALYSED_INSTANCE.format(address=prometheus.url, query=QUERY),
        "partner-api: 6.6.0 in two batches, each measured by Prometheus",
    )
    say("each batch: the share of 5xx answers of 6.6.0 must stay < 0.01, measured twice")
    return roll(INSTANCE)


def _wait_for_rates(prometheus: LocalPrometheus, seconds: float = 30.0) -> None:
    """Until ``rate()`` has two samples to work with (a few scrapes), within a bound."""
    client = PrometheusClient(prometheus.url, timeout=2, retries=0)
    deadline = time.monotonic() + seconds
    query = f'sum(rate(http_requests_total{{namespace="{NAMESPACE}"}}[5s])) > 0'
    try:
        while time.monotonic() < deadline:
            try:
                if client.query(query).samples:
                    return
            except PrometheusError:
                pass
            time.sleep(0.2)
    finally:
        client.close()


__all__ = ["demo_prometheus", "metrics_chapter"]
