"""Prometheus measurements inside a pass's rollout step (SPEC section 4c).

The rollout machine is pure: it says when a measurement is due
(``reconciler.rollout.measurement_due``) and decides from what was measured. This
module does the asking: ``MeasuringDriver`` wraps the kube driver of one instance
and, on an observation where a measurement is due, asks Prometheus each query once
(``reconciler.analysis.measure``) and hands the answers to the machine in the
observation. It never sleeps: the machine schedules the next look ``interval`` later.

The address is the analysis's own, or ``run --prometheus-url``; without either, or
with credentials the environment gets wrong, every query is an inconclusive
measurement that says so, and the rollout holds once ``inconclusiveLimit`` is used up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from reconciler.analysis.client import PrometheusClient
from reconciler.analysis.measure import measure
from reconciler.model.analysis import INCONCLUSIVE, Measurement, PrometheusAnalysis
from reconciler.model.catalog import AppVersion, Instance
from reconciler.model.errors import UsageError
from reconciler.model.rollout import RolloutRecord
from reconciler.rollout import Action, Observation, RolloutDriver, RolloutSettings, measurement_due

NO_ADDRESS = (
    "no Prometheus address: set rollout.analysis.prometheus.address or run --prometheus-url"
)


def placeholder_values(
    instance: Instance, version: AppVersion, from_version: str, to_version: str
) -> dict[str, str]:
    """What a query's ``${...}`` stand for in this rollout (manifests' and ``rollout.*``)."""
    values = {
        "instance.name": instance.name,
        "instance.namespace": instance.namespace,
        "app.name": instance.app,
        "app.version": to_version,
        "rollout.from": from_version,
        "rollout.to": to_version,
    }
    for name, param in version.parameters.items():
        value = instance.parameters.get(name, param.default)
        values[f"params.{name}"] = "" if value is None else str(value)
    for name, image in version.images.items():
        values[f"images.{name}"] = str(image)
    return values


def measure_now(
    analysis: PrometheusAnalysis,
    default_address: str,
    *,
    batch: int,
    values: Mapping[str, str],
    at: str,
) -> tuple[Measurement, ...]:
    """Every query of ``analysis`` asked once, now; a connection problem is inconclusive."""
    address = analysis.address or default_address
    reason = NO_ADDRESS
    if address:
        try:
            client = PrometheusClient.from_environment(address)
        except UsageError as e:
            reason = f"prometheus settings: {e}"
        else:
            try:
                return measure(client, analysis, batch=batch, values=values, at=at)
            finally:
                client.close()
    return tuple(
        Measurement(batch, q.name, None, False, at, INCONCLUSIVE, reason, str(q.condition))
        for q in analysis.queries
    )


@dataclass
class MeasuringDriver:
    """A rollout driver that also measures, when the record being stepped says it is due."""

    inner: RolloutDriver
    settings: RolloutSettings
    analysis: PrometheusAnalysis
    default_address: str
    values: Mapping[str, str]
    record: RolloutRecord | None = None  # the record the next ``observe`` is for

    def observe(self, desired_version: str, now: datetime) -> Observation:
        obs = self.inner.observe(desired_version, now)
        if self.record is None or not measurement_due(self.record, self.settings, now):
            return obs
        at = now.isoformat().replace("+00:00", "Z")
        taken = measure_now(
            self.analysis,
            self.default_address,
            batch=self.record.batch,
            values=self.values,
            at=at,
        )
        return replace(obs, measurements=taken)

    def execute(self, actions: Sequence[Action]) -> None:
        self.inner.execute(actions)


__all__ = ["NO_ADDRESS", "MeasuringDriver", "measure_now", "placeholder_values"]
