"""A channel move's wave plan: which clusters start the release now, which wait for what.

``preview`` calls ``wave_plans`` with the version changes it found and the head's
catalog. Only changes the waves hold are counted (``reconciler.waves.change_waits``:
the catalog moved an instance to a higher version; an exact pin, a move back or a
first install starts at once). Each wave that has such instances becomes a step:
``now`` when no earlier wave runs the app (the gate passes it through), else after
the soak and the approval that guard it (an approval already in the head's
``waves.yaml`` is not waited for). The preview is offline: it says the order and
the gates, never how long the earlier waves will actually take.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.catalog import Catalog
from reconciler.model.waves import Waves
from reconciler.preview.model import VERSION, InstanceChange, WavePlan, WaveStep
from reconciler.waves import change_waits


def wave_plans(changes: Sequence[InstanceChange], head: Catalog) -> tuple[WavePlan, ...]:
    """A plan per (app, version) that the waves hold; none when the head has no waves."""
    waves = head.waves
    if waves is None:
        return ()
    held: dict[tuple[str, str], list[InstanceChange]] = {}
    for change in changes:
        if change.kind != VERSION or change.error or change.to_version is None:
            continue
        source = "exact" if change.via.startswith("version ") else change.via
        if change_waits(source, change.from_version, change.to_version):
            held.setdefault((change.app, change.to_version), []).append(change)
    plans = []
    for (app, version), moved in sorted(held.items()):
        if not waves.valid:
            plans.append(WavePlan(app, version, error=f"waves.yaml is invalid: {waves.error}"))
            continue
        plans.append(WavePlan(app, version, _steps(waves, head, app, version, moved)))
    return tuple(plans)


def _steps(
    waves: Waves, head: Catalog, app: str, version: str, moved: Sequence[InstanceChange]
) -> tuple[WaveStep, ...]:
    runs_app = {
        name
        for name, entry in head.clusters.items()
        if any(i.app == app for i in entry.instances.values())
    }
    by_wave: dict[int, list[InstanceChange]] = {}
    for change in moved:
        by_wave.setdefault(waves.wave_of(change.cluster), []).append(change)
    steps = []
    for index in sorted(by_wave):
        mine = by_wave[index]
        wave = waves.waves[index] if index < len(waves.waves) else None
        earlier = any(waves.wave_of(c) < index for c in runs_app)
        approval = (
            wave is not None and wave.approval and not waves.approved(app, version, wave.name)
        )
        steps.append(
            WaveStep(
                wave=waves.name_of(index),
                clusters=tuple(sorted({c.cluster for c in mine})),
                instances=len(mine),
                now=not earlier and not approval,
                soak=wave.soak_text if wave is not None and wave.soak else "",
                approval=approval,
            )
        )
    return tuple(steps)


__all__ = ["wave_plans"]
