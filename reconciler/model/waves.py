"""Waves (``waves.yaml`` at the catalog root): the order in which a release crosses the fleet.

Pure data, built by ``reconciler.catalog`` and read by ``reconciler.waves`` (the gate),
the daemon and the ``wave`` commands. The loader resolves each wave's cluster selectors
against the catalog's clusters once, so every reader agrees on which wave a cluster is in
(``Waves.wave_of``) without matching globs or labels again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from reconciler.model.analysis import PrometheusAnalysis

if TYPE_CHECKING:  # model.status imports model.catalog, which imports this module
    from reconciler.model.status import InstanceStatus

WAVES_FILE = "waves.yaml"

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class DurationError(ValueError):
    """A duration that is not ``<number><unit>`` pieces such as ``1h30m``."""


def parse_duration(text: str) -> float:
    """``"1h30m"`` -> 5400.0 seconds; units ms, s, m, h, d; raises ``DurationError``.

    Go's duration syntax (without fractions), which Kubernetes users write in
    Flux and Argo CD: one grammar for every duration of the catalog.
    """
    if not isinstance(text, str) or not text:
        raise DurationError(f"{text!r} is not a duration (e.g. 30m, 1h, 1h30m, 2d)")
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION.match(text, pos)
        if match is None:
            raise DurationError(f'"{text}" is not a duration (e.g. 30m, 1h, 1h30m, 2d)')
        total += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total


def format_duration(seconds: float) -> str:
    """5400 -> ``1h30m``; 45 -> ``45s``: how messages say a soak and what remains."""
    whole = max(0, int(seconds + 0.999))  # what remains is never rounded down to nothing
    if whole == 0:
        return "0s"
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n)


@dataclass(frozen=True)
class Wave:
    """One wave: its clusters (as written), soak, approval and failure budget.

    ``soak``, ``approval`` and ``max_failures`` guard *entry* into this wave: its
    clusters start a version once every earlier wave proved it for ``soak``
    seconds, with at most ``max_failures`` earlier-wave instances failed on it, and
    (with ``approval``) once a commit approved this wave for that version.
    """

    name: str
    names: tuple[str, ...] = ()  # exact cluster names and globs, as written
    match_labels: tuple[Mapping[str, str], ...] = ()  # one entry per {matchLabels: ...}
    soak: float = 0.0  # seconds
    soak_text: str = ""  # as written, for messages
    approval: bool = False
    max_failures: int = 0
    line: int | None = None
    # measured against the earlier waves' clusters once they proved the version by
    # status, before this wave opens (``waves.analysis``)
    analysis: PrometheusAnalysis | None = None


@dataclass(frozen=True)
class Approval:
    """A commit's approval of one wave for one release of one app (never a later one)."""

    app: str
    version: str
    wave: str
    line: int | None = None


@dataclass(frozen=True)
class Waves:
    """The loaded ``waves.yaml``; ``valid`` False means it could not be trusted.

    ``members`` maps each catalog cluster to the index of its wave in ``waves``.
    A cluster no wave names follows all of them (``wave_of`` gives
    ``len(waves)``): a forgotten cluster never gets a release before the fleet
    proved it. ``error`` is the first problem of an invalid file, naming its line.
    """

    waves: tuple[Wave, ...] = ()
    approvals: tuple[Approval, ...] = ()
    members: Mapping[str, int] = field(default_factory=dict)
    file: str = WAVES_FILE
    valid: bool = True
    error: str = ""

    def wave_of(self, cluster: str) -> int:
        """The index of ``cluster``'s wave (``len(waves)``: after every wave)."""
        return self.members.get(cluster, len(self.waves))

    def name_of(self, index: int) -> str:
        return self.waves[index].name if index < len(self.waves) else "(after every wave)"

    def clusters_of(self, index: int) -> tuple[str, ...]:
        """The catalog clusters in wave ``index``, sorted."""
        return tuple(sorted(c for c in self.members if self.members[c] == index))

    def approved(self, app: str, version: str, wave: str) -> bool:
        return any(a.app == app and a.version == version and a.wave == wave for a in self.approvals)

    def earlier_clusters(self, index: int) -> tuple[str, ...]:
        """The catalog clusters of every wave before ``index``, in wave order."""
        return tuple(c for earlier in range(index) for c in self.clusters_of(earlier))

    def index_of(self, wave: str) -> int | None:
        for index, each in enumerate(self.waves):
            if each.name == wave:
                return index
        return None


@dataclass(frozen=True)
class SeenRecord:
    """Another cluster's status record, and since when its phase and version hold.

    ``since`` is the time of the oldest status commit of the unbroken run of commits
    that recorded this instance with this record's phase and version: how long it
    has been Ready on V, counted by Git, not by the reader's memory.
    """

    status: InstanceStatus
    since: datetime
