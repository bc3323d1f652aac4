"""A wave's Prometheus analysis: measured before the wave opens. Pure.

``gate`` (``waves.gate``) says whether the earlier waves proved a version by their
status records (Ready, soak, ``maxFailures``) and this wave's approval. A wave with
``analysis`` then asks the metrics too: the daemon (``daemon.waveanalysing``) calls
``judge`` with the measurements the waiting instance's record holds and the time,
and ``judge`` answers:

- ``Measure``: a measurement is due (none yet, or ``interval`` passed since the last);
  the daemon asks Prometheus once, records the answers and asks ``judge`` again;
- ``Open`` after ``count`` measurements within ``failureLimit`` and ``inconclusiveLimit``;
- ``Halted`` when a query failed more often than ``failureLimit``: this wave never
  starts the version, and later waves halt with it (``analysis_halt`` reads the
  halted instance's record);
- ``Waiting`` until the next measurement is due, or for good when a query was
  inconclusive (no data, Prometheus out of reach) more often than
  ``inconclusiveLimit``: missing metrics never open a wave.

Nothing here reads Git, a cluster or Prometheus, and nothing sleeps: the inputs are
the recorded measurements and ``now``, so a restarted daemon or another replica that
reads the same record reaches the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.model.analysis import FAILED, INCONCLUSIVE, Measurement, PrometheusAnalysis
from reconciler.model.waveanalysis import read_wave_record, settings_digest
from reconciler.model.waves import SeenRecord, Wave, Waves
from reconciler.waves.gate import WAVE_HALTED, Decision, Freshness, Halted, Open, Waiting

_CLEARS = "a new version, a channel move back or a change of the analysis clears it"


@dataclass(frozen=True)
class Measure:
    """The earlier waves proved the version by status: the analysis measures now."""

    wave: str


Judgement = Open | Waiting | Halted | Measure


def judge(
    wave: Wave, app: str, version: str, measured: Sequence[Measurement], now: datetime
) -> Judgement:
    """What ``wave``'s analysis says, from the measurements so far and the time.

    Limits first (a failure beyond ``failureLimit`` halts even before ``count``
    measurements, as a batch's analysis fails at once), then the count, then
    whether the next measurement is due.
    """
    analysis = wave.analysis
    if analysis is None:
        return Open(wave.name)
    failed = _failure(analysis, measured)
    if failed is not None:
        return Halted(
            wave.name,
            f"halted: the analysis of wave {wave.name} failed {app} {version}: {failed}; {_CLEARS}",
        )
    for query in analysis.queries:
        of_query = [m for m in measured if m.name == query.name]
        vague = [m for m in of_query if m.result == INCONCLUSIVE]
        if len(vague) > analysis.inconclusive_limit:
            last = vague[-1]
            return Waiting(
                wave.name,
                f"waiting for wave {wave.name}: analysis inconclusive: {last.name} "
                f"{last.reason or 'no data'}, {len(vague)}/{len(of_query)} > inconclusiveLimit "
                f"{analysis.inconclusive_limit}; holding: {_CLEARS}",
            )
    looks = _looks(analysis, measured)
    if looks >= analysis.count:
        return Open(
            wave.name,
            f"the analysis of wave {wave.name} passed {app} {version}: "
            f"{summary(analysis, measured)} ({looks}/{analysis.count})",
        )
    if not measured:
        return Measure(wave.name)
    remaining = analysis.interval_seconds - _elapsed(measured[-1].at, now)
    if remaining <= 0:
        return Measure(wave.name)
    return Waiting(
        wave.name,
        f"waiting for wave {wave.name}: analysis {summary(analysis, measured)} "
        f"({looks}/{analysis.count})",
        remaining=remaining,
    )


def summary(analysis: PrometheusAnalysis, measured: Sequence[Measurement]) -> str:
    """``error-rate 0.002 < 0.01``: each query's last measurement, in the file's order."""
    parts = []
    for query in analysis.queries:
        mine = [m for m in measured if m.name == query.name]
        if mine:
            parts.append(mine[-1].describe())
    return ", ".join(parts)


def _failure(analysis: PrometheusAnalysis, measured: Sequence[Measurement]) -> str | None:
    """``error-rate 0.08 not < 0.01 (2/3 failed > failureLimit 1)``, or None."""
    for query in analysis.queries:
        of_query = [m for m in measured if m.name == query.name]
        failed = [m for m in of_query if m.result == FAILED]
        if len(failed) > analysis.failure_limit:
            return (
                f"{failed[-1].describe()} ({len(failed)}/{len(of_query)} failed > failureLimit "
                f"{analysis.failure_limit})"
            )
    return None


def _looks(analysis: PrometheusAnalysis, measured: Sequence[Measurement]) -> int:
    """How many looks every query has had (a look measures each query once)."""
    return min(sum(1 for m in measured if m.name == q.name) for q in analysis.queries)


def _elapsed(stamp: str, now: datetime) -> float:
    """Seconds from an RFC 3339 ``at`` to ``now``; an unreadable one is long ago."""
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        return (now - then).total_seconds()
    except (ValueError, TypeError):
        return float("inf")


def wave_values(
    waves: Waves, index: int, app: str, version: str, instance: str, namespace: str
) -> dict[str, str]:
    """What a wave's query placeholders stand for (``analysis.WAVE_KEYS``).

    ``${wave.clusters}`` is a regular-expression alternation of the earlier waves'
    clusters (``staging|prod-canary``) for ``cluster=~"${wave.clusters}"``: cluster
    names are DNS labels, so no character needs escaping.
    """
    return {
        "app": app,
        "version": version,
        "app.name": app,
        "app.version": version,
        "instance.name": instance,
        "instance.namespace": namespace,
        "wave.name": waves.name_of(index),
        "wave.previous": waves.name_of(index - 1) if index > 0 else "",
        "wave.clusters": "|".join(waves.earlier_clusters(index)),
    }


def analysis_halt(
    waves: Waves,
    index: int,
    app: str,
    version: str,
    instances: Mapping[str, Sequence[str]],
    records: Mapping[tuple[str, str], SeenRecord],
    fresh: Freshness,
) -> Halted | None:
    """Halted when an earlier wave's analysis failed ``version`` on one of its instances.

    That instance is ``WaveHalted`` and never runs the version, so ``gate`` would only
    say that later waves wait for it; this says why, naming the query and its value.
    The verdict is recomputed from the measurements in its record with the earlier
    wave's analysis settings (as written now): a record of other settings, another
    version or an older release (``fresh``) halts nothing.
    """
    halted: list[tuple[str, str, str]] = []  # (who, wave, what failed)
    for earlier in range(min(index, len(waves.waves))):
        wave = waves.waves[earlier]
        if wave.analysis is None:
            continue
        digest = settings_digest(wave.analysis)
        for cluster in waves.clusters_of(earlier):
            for instance in instances.get(cluster, ()):
                seen = records.get((cluster, instance))
                if seen is None or seen.status.reason != WAVE_HALTED:
                    continue
                block = read_wave_record(seen.status.extra)
                if (
                    block is None
                    or (block.wave, block.version, block.settings) != (wave.name, version, digest)
                    or not fresh(cluster, instance, seen.status)
                ):
                    continue
                failed = _failure(wave.analysis, block.measurements)
                if failed is not None:
                    halted.append((f"{cluster}/{instance}", wave.name, failed))
    if not halted:
        return None
    who, name, failed = halted[0]
    more = f" (and {len(halted) - 1} more)" if len(halted) > 1 else ""
    return Halted(
        waves.name_of(index),
        f"halted: {app} {version} failed the analysis of wave {name} on {who}{more}: "
        f"{failed}; {_CLEARS}",
        tuple(sorted(w for w, _, _ in halted)),
    )


def as_recorded(
    waves: Waves,
    index: int,
    app: str,
    version: str,
    instances: Mapping[str, Sequence[str]],
    records: Mapping[tuple[str, str], SeenRecord],
    fresh: Freshness,
    proven: Decision,
) -> Decision:
    """``proven`` (the status gate's answer for wave ``index``) as the analyses recorded it.

    For ``wave status`` and pages, which read every cluster's records but measure
    nothing: an earlier wave's failed analysis halts this wave (``analysis_halt``);
    once the status gate is open, a wave with ``analysis`` is halted when one of its
    own instances recorded a failed analysis, and waits while one of them has not
    started the version (measuring, or not measured yet). Each cluster of the wave
    measures for itself, so one may open while another still measures.
    """
    if isinstance(proven, Halted):
        return proven
    halt = analysis_halt(waves, index, app, version, instances, records, fresh)
    if halt is not None:
        return halt
    wave = waves.waves[index] if index < len(waves.waves) else None
    if wave is None or wave.analysis is None or not isinstance(proven, Open):
        return proven
    digest = settings_digest(wave.analysis)
    waiting: list[str] = []
    for cluster in waves.clusters_of(index):
        for instance in instances.get(cluster, ()):
            seen = records.get((cluster, instance))
            if seen is not None and seen.status.version == version:
                continue  # its analysis passed: it started the version
            who = f"{cluster}/{instance}"
            block = read_wave_record(seen.status.extra) if seen is not None else None
            if (
                seen is None
                or block is None
                or (block.wave, block.version, block.settings) != (wave.name, version, digest)
                or not fresh(cluster, instance, seen.status)
            ):
                waiting.append(f"{who}: the analysis of wave {wave.name} has not measured yet")
                continue
            failed = _failure(wave.analysis, block.measurements)
            if failed is not None:
                return Halted(
                    wave.name,
                    f"halted: the analysis of wave {wave.name} failed {app} {version} on {who}: "
                    f"{failed}; {_CLEARS}",
                    (who,),
                )
            waiting.append(f"{who}: {seen.status.message}")
    if waiting:
        more = f" (and {len(waiting) - 1} more)" if len(waiting) > 1 else ""
        return Waiting(wave.name, waiting[0] + more)
    return proven


__all__ = [
    "Judgement",
    "Measure",
    "analysis_halt",
    "as_recorded",
    "judge",
    "summary",
    "wave_values",
]
