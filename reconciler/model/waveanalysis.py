"""A wave's analysis as the waiting instance's status record keeps it (``wave: {...}``).

A wave with ``analysis`` measures the earlier waves' clusters before it opens
(``waves.analysis``), one measurement per look, ``interval`` apart, over several
passes. The measurements so far must outlive the daemon that took them, and a second
replica must reach the same answer, so they live where every other fact of the
fleet lives: in the status record of the instance that waits, on its status branch.
Each new measurement changes the record, so it is committed once.

The record names the wave, the version, the catalog commit where that release
began and a digest of the analysis settings: measurements of another wave, version,
release or query are never counted for this one (a fixed query measures afresh).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.model.analysis import (
    MAX_RECORDED,
    AnalysisFormatError,
    Measurement,
    PrometheusAnalysis,
)

WAVE_KEY = "wave"  # the status record's key for the block


def settings_digest(analysis: PrometheusAnalysis) -> str:
    """A short, stable digest of what the analysis measures and tolerates."""
    return hashlib.sha256(repr(analysis.fingerprint()).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class WaveAnalysisRecord:
    """The measurements one instance took for one wave, version and release.

    A wave has one series of looks, not batches: each ``Measurement`` keeps
    ``batch == 1`` in memory and the record writes no ``batch`` key.
    """

    wave: str
    version: str
    release: str = ""  # the catalog commit where the release of ``version`` began
    settings: str = ""  # ``settings_digest`` of the analysis measured
    measurements: tuple[Measurement, ...] = ()

    def matches(self, wave: str, version: str, release: str, settings: str) -> bool:
        return (self.wave, self.version, self.release, self.settings) == (
            wave,
            version,
            release,
            settings,
        )

    def with_measurements(self, new: Sequence[Measurement]) -> WaveAnalysisRecord:
        kept = (*self.measurements, *new)[-MAX_RECORDED:]
        return WaveAnalysisRecord(self.wave, self.version, self.release, self.settings, kept)

    def to_dict(self) -> dict[str, Any]:
        measured = []
        for m in self.measurements:
            entry = m.to_dict()
            entry.pop("batch", None)
            measured.append(entry)
        return {
            "name": self.wave,
            "version": self.version,
            "release": self.release,
            "settings": self.settings,
            "analysis": measured,
        }

    @classmethod
    def from_dict(cls, data: object) -> WaveAnalysisRecord:
        """Parse the block; raises ``AnalysisFormatError`` naming what is wrong."""
        if not isinstance(data, Mapping):
            raise AnalysisFormatError(f"{WAVE_KEY} must be a mapping")
        texts = {}
        for key in ("name", "version", "release", "settings"):
            value = data.get(key, "")
            if not isinstance(value, str):
                raise AnalysisFormatError(f"{WAVE_KEY}.{key} must be a string, got {value!r}")
            texts[key] = value
        if not texts["name"] or not texts["version"]:
            raise AnalysisFormatError(f"{WAVE_KEY} needs name and version")
        raw = data.get("analysis", [])
        if not isinstance(raw, list):
            raise AnalysisFormatError(f"{WAVE_KEY}.analysis must be a list")
        measured = tuple(
            Measurement.from_dict({**item, "batch": 1} if isinstance(item, Mapping) else item)
            for item in raw[-MAX_RECORDED:]
        )
        return cls(texts["name"], texts["version"], texts["release"], texts["settings"], measured)


def read_wave_record(extra: Mapping[str, Any]) -> WaveAnalysisRecord | None:
    """The block of a status record's unknown keys, or None (absent or unreadable).

    An unreadable block counts as none: the wave measures again rather than trust it.
    """
    raw = extra.get(WAVE_KEY)
    if raw is None:
        return None
    try:
        return WaveAnalysisRecord.from_dict(raw)
    except AnalysisFormatError:
        return None


__all__ = ["WAVE_KEY", "WaveAnalysisRecord", "read_wave_record", "settings_digest"]
