"""A wave's Prometheus analysis inside a pass: the asking, for the pure judge.

``daemon.waving`` calls ``WaveAnalyst.analyse`` for an instance whose wave has
``analysis`` once the status gate (``waves.gate``) opened it. The measurements so far
come from the instance's own last record (its ``wave:`` block,
``model.waveanalysis``); ``waves.analysis.judge`` says whether one is due; if so this
asks Prometheus each query once (``daemon.analysing.measure_now``: the address is
``run --prometheus-url`` and a connection problem is an inconclusive measurement),
adds the answers and asks ``judge`` again. The block goes back into the record, so
each measurement is one status commit and the next pass (of this daemon, a restarted
one or another replica) goes on from it. A pass never waits for the next one: the
answer says how long until it is due.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from reconciler.daemon.analysing import measure_now
from reconciler.model.analysis import Measurement
from reconciler.model.catalog import Instance
from reconciler.model.status import InstanceStatus
from reconciler.model.waveanalysis import WaveAnalysisRecord, read_wave_record, settings_digest
from reconciler.model.waves import Waves
from reconciler.waves import Decision, Open, Waiting
from reconciler.waves.analysis import Measure, judge, wave_values


@dataclass(frozen=True)
class WaveAnalysed:
    """The gate's answer after the analysis, and what the waiting record keeps.

    ``record`` is None when nothing is kept: no analysis, the status gate still
    waits, or the wave opened (the instance starts the version).
    """

    decision: Decision
    record: WaveAnalysisRecord | None = None
    measured: tuple[Measurement, ...] = ()  # asked of Prometheus for this instance this pass
    next_look: float | None = None  # seconds until the next measurement is due


@dataclass
class WaveAnalyst:
    """Measures for one pass; instances that ask the same queries share one measurement."""

    prometheus_url: str
    now: datetime
    _taken: dict[tuple[object, ...], tuple[Measurement, ...]] = field(default_factory=dict)

    def analyse(
        self,
        waves: Waves,
        index: int,
        instance: Instance,
        version: str,
        release: str,
        proven: Decision,
        previous: InstanceStatus | None,
        *,
        measures: bool = True,
    ) -> WaveAnalysed:
        """``proven`` (the status gate's answer) with the wave's analysis applied.

        ``measures`` False (another replica's shard holds the instance): judged from
        its record, never measured here, so a due measurement only waits.
        """
        wave = waves.waves[index] if index < len(waves.waves) else None
        if wave is None or wave.analysis is None or not isinstance(proven, Open):
            return WaveAnalysed(proven)
        app = instance.app
        digest = settings_digest(wave.analysis)
        block = read_wave_record(previous.extra) if previous is not None else None
        if block is None or not block.matches(wave.name, version, release, digest):
            block = WaveAnalysisRecord(wave.name, version, release, digest)
        verdict = judge(wave, app, version, block.measurements, self.now)
        taken: tuple[Measurement, ...] = ()
        if isinstance(verdict, Measure) and measures:
            values = wave_values(waves, index, app, version, instance.name, instance.namespace)
            key = (wave.name, digest, tuple(sorted(values.items())))
            shared = self._taken.get(key)
            if shared is None:
                at = self.now.isoformat().replace("+00:00", "Z")
                taken = measure_now(
                    wave.analysis, self.prometheus_url, batch=1, values=values, at=at
                )
                self._taken[key] = shared = taken
            block = block.with_measurements(shared)
            verdict = judge(wave, app, version, block.measurements, self.now)
        if isinstance(verdict, Measure):  # not this replica's to measure
            return WaveAnalysed(Waiting(wave.name, f"waiting for wave {wave.name}: analysis due"))
        if isinstance(verdict, Open):
            return WaveAnalysed(verdict, None, taken)
        remaining = verdict.remaining if isinstance(verdict, Waiting) else None
        return WaveAnalysed(verdict, block, taken, remaining)


__all__ = ["WaveAnalysed", "WaveAnalyst"]
