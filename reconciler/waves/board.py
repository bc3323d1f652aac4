"""The fleet's waves for one release, as data: what ``wave status`` prints and pages draw.

``wave_board`` asks ``gate`` for every wave (and, for a wave with ``analysis``, what
its clusters recorded of it: ``analysis.as_recorded``) and lists each wave's clusters
with what their instances of the app run and since when. Pure, like the gate: the caller reads
the records (``source.FleetStatus``) and passes the freshness predicate and the time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.model.waves import SeenRecord, Waves
from reconciler.waves.analysis import as_recorded
from reconciler.waves.gate import Decision, Freshness, Halted, Open, gate


@dataclass(frozen=True)
class BoardInstance:
    cluster: str
    instance: str
    record: SeenRecord | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster": self.cluster, "instance": self.instance}
        if self.record is None:
            return {**out, "version": None, "phase": None, "since": None}
        status = self.record.status
        return {
            **out,
            "version": status.version,
            "desiredVersion": status.desired_version,
            "phase": str(status.phase),
            "reason": status.reason or None,
            "since": self.record.since.isoformat(),
            "message": status.message,
        }


@dataclass(frozen=True)
class BoardWave:
    name: str
    soak: str
    approval: bool
    max_failures: int
    decision: Decision
    instances: tuple[BoardInstance, ...]
    soak_seconds: float = 0.0  # ``soak`` in seconds: what pages measure progress against

    @property
    def state(self) -> str:
        if isinstance(self.decision, Open):
            return "open"
        return "halted" if isinstance(self.decision, Halted) else "waiting"

    def to_dict(self) -> dict[str, Any]:
        return {
            "wave": self.name,
            "soak": self.soak or None,
            "approval": "required" if self.approval else None,
            "maxFailures": self.max_failures,
            "gate": self.state,
            "message": self.decision.message,
            "instances": [i.to_dict() for i in self.instances],
        }


def wave_board(
    waves: Waves,
    app: str,
    version: str,
    instances: Mapping[str, Sequence[str]],
    records: Mapping[tuple[str, str], SeenRecord],
    fresh: Freshness,
    now: datetime,
) -> list[BoardWave]:
    """Every wave (and, when some cluster is in none, the clusters after them all)."""
    count = len(waves.waves) + (1 if any(c not in waves.members for c in instances) else 0)
    board = []
    for index in range(count):
        wave = waves.waves[index] if index < len(waves.waves) else None
        clusters = (
            waves.clusters_of(index)
            if wave is not None
            else tuple(sorted(c for c in instances if c not in waves.members))
        )
        board.append(
            BoardWave(
                name=waves.name_of(index),
                soak=wave.soak_text if wave is not None else "",
                soak_seconds=wave.soak if wave is not None else 0.0,
                approval=wave.approval if wave is not None else False,
                max_failures=wave.max_failures if wave is not None else 0,
                decision=as_recorded(
                    waves,
                    index,
                    app,
                    version,
                    instances,
                    records,
                    fresh,
                    gate(waves, index, app, version, instances, records, fresh, now),
                ),
                instances=tuple(
                    BoardInstance(c, i, records.get((c, i)))
                    for c in clusters
                    for i in instances.get(c, ())
                ),
            )
        )
    return board
