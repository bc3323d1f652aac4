"""May an instance start version V? The wave gate of SPEC section 4b, as a pure function.

The daemon (``daemon.waving``) calls ``change_waits`` and ``gate`` for each instance
whose version the catalog moved; ``wave status`` and the status page call ``gate``
for every wave to show what each one waits for. Nothing here reads Git or a cluster:
the other clusters' records come in as ``SeenRecord`` values (each with the time of
the status commit since which it says what it says), record freshness as a
predicate (does the record's ``sourceCommit`` contain the catalog commit that made V
desired?) and the time as ``now``. So a restarted daemon, another replica and the CLI
all reach the same answer from the same Git history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.model.rollout import RollingState, split_release
from reconciler.model.status import InstanceStatus, Phase
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.model.waves import SeenRecord, Waves, format_duration

WAITING_FOR_WAVE = "WaitingForWave"
WAVE_HALTED = "WaveHalted"
# reasons that say an earlier wave is itself held, not that V failed there
_NOT_FAILURES = frozenset({WAITING_FOR_WAVE, WAVE_HALTED})
_MORE = 3  # instances a message names before "and N more"


# (cluster, instance, record) -> does the record's sourceCommit contain the catalog
# commit where V became desired? False for a Ready left from an older release of V.
Freshness = Callable[[str, str, InstanceStatus], bool]


@dataclass(frozen=True)
class Open:
    """The instance may start V."""

    wave: str
    message: str = ""


@dataclass(frozen=True)
class Waiting:
    """Earlier waves have not proven V yet (or this wave's approval is missing).

    ``remaining`` is the soak still to run when that is all the gate waits for (for
    ``wave status`` and pages to show); None when it waits for other clusters or a commit.
    """

    wave: str
    message: str
    remaining: float | None = None
    # a soak's message around its elapsed time: (before, after)
    soak_frame: tuple[str, str] | None = None

    def same_wait(self, message: str) -> bool:
        """Does ``message`` (recorded earlier) say this very wait?

        A soak's message names the time Ready so far, which grows every pass; the wait
        it describes does not change, so the record keeps the message it was committed
        with instead of a commit per pass (``wave status`` shows the live figure).
        """
        if message == self.message:
            return True
        if self.soak_frame is None:
            return False
        before, after = self.soak_frame
        return (
            message.startswith(before)
            and message.endswith(after)
            and len(message) > len(before) + len(after)
        )


@dataclass(frozen=True)
class Halted:
    """Earlier waves failed V beyond ``maxFailures``: this wave never starts V."""

    wave: str
    message: str
    failed: tuple[str, ...] = ()  # "cluster/instance", sorted


Decision = Open | Waiting | Halted


def change_waits(
    source: str, deployed: str | None, target: str | None, rollback_to: str | None = None
) -> bool:
    """Does moving from ``deployed`` to ``target`` wait for the waves?

    Only changes that come from the catalog moving do: a channel move, or a new version
    matching a range or ``latest``. A first install, an instance file naming an exact
    version (``source == "exact"``), a return to the ``from`` of an unfinished rollout
    (``rollback_to``) and a move to a lower version (a channel moved back: a version
    the fleet ran before) start at once.
    """
    if deployed is None or target is None or deployed == target or source == "exact":
        return False
    if target == rollback_to:
        return False
    try:
        return parse_version(target) > parse_version(deployed)
    except VersionSyntaxError:
        return True  # cannot tell the direction: wait, as any release would


def gate(
    waves: Waves,
    index: int,
    app: str,
    version: str,
    instances: Mapping[str, Sequence[str]],
    records: Mapping[tuple[str, str], SeenRecord],
    fresh: Freshness,
    now: datetime,
) -> Decision:
    """May the clusters of wave ``index`` start ``app`` ``version``?

    ``instances`` maps each cluster of the catalog to its instances of ``app``;
    ``records`` holds the other clusters' records by (cluster, instance). Checked in
    the order a person fixes things: a halt (failures beyond ``maxFailures``), then
    instances not Ready on V yet (or Ready from an older release), then the soak,
    then this wave's approval. A wave with no instance of the app is passed through.
    """
    name = waves.name_of(index)
    wave = waves.waves[index] if index < len(waves.waves) else None
    soak = wave.soak if wave is not None else 0.0
    budget = wave.max_failures if wave is not None else 0
    failed: list[str] = []
    pending: list[tuple[str, str]] = []  # (who, why), first not proven: the message's
    waiting = 0  # instances not proven
    soaking: list[tuple[float, str, str]] = []  # (seconds Ready, who, earlier wave)
    for earlier in range(index):
        earlier_name = waves.name_of(earlier)  # once per wave: the loop runs per instance
        for cluster in waves.clusters_of(earlier):
            for instance in instances.get(cluster, ()):
                seen = records.get((cluster, instance))
                verdict = _verdict(seen, version, fresh, cluster, instance)
                if verdict == "failed":
                    failed.append(f"{cluster}/{instance}")
                elif verdict == "ready" and seen is not None:
                    ready_for = max(0.0, (now - seen.since).total_seconds())
                    soaking.append((ready_for, f"{cluster}/{instance}", earlier_name))
                else:
                    waiting += 1
                    if not pending:
                        pending.append((f"{earlier_name}: {cluster}/{instance}", verdict))
    if len(failed) > budget:
        listed = _listed(sorted(failed))
        return Halted(
            name,
            f"halted: {app} {version} failed in earlier waves on {listed} "
            f"({len(failed)} > maxFailures {budget}); a new version or a channel move "
            "back clears it",
            tuple(sorted(failed)),
        )
    if pending:
        where, why = pending[0]
        more = f" (and {waiting - 1} more)" if waiting > 1 else ""
        return Waiting(name, f"waiting for wave {where} {why}{more}")
    unsoaked = [s for s in soaking if s[0] < soak]
    if unsoaked:
        ready_for, who, earlier_name = min(unsoaked)
        before = f"waiting for wave {earlier_name}: {who} {version} Ready for "
        after = f" of {wave.soak_text if wave else '0s'}"
        return Waiting(
            name,
            f"{before}{format_duration(ready_for)}{after}",
            remaining=soak - ready_for,
            soak_frame=(before, after),
        )
    if wave is not None and wave.approval and not waves.approved(app, version, wave.name):
        return Waiting(
            name,
            f"waiting for an approval of wave {wave.name} for {app} {version} "
            f"(reconciler wave approve {app} {version} --wave {wave.name})",
        )
    return Open(name, _open_message(name, app, version, index, failed))


def _verdict(
    seen: SeenRecord | None, version: str, fresh: Freshness, cluster: str, instance: str
) -> str:
    """``ready``, ``failed``, or why the record does not prove ``version`` (for messages)."""
    if seen is None:
        return "has no status record yet"
    status = seen.status
    rollout = status.rollout
    rolled_back = (
        rollout is not None
        and split_release(rollout.to_version)[0] == version
        and rollout.state in (RollingState.ROLLED_BACK, RollingState.FAILED)
    )
    failing = (
        status.phase in (Phase.FAILED, Phase.STALLED)
        and version in (status.desired_version, status.version)
        and status.reason not in _NOT_FAILURES
    )
    if rolled_back or failing:
        return "failed" if fresh(cluster, instance, status) else _stale(status)
    if status.version != version:
        return f"runs {status.version or 'nothing'} ({status.phase})"
    if status.phase is not Phase.READY:
        return f"{version} is {status.phase}"
    if not fresh(cluster, instance, status):
        return _stale(status)
    return "ready"


def _stale(status: InstanceStatus) -> str:
    commit = status.source_commit[:12] or "an unknown commit"
    return (
        f"{status.version} {status.phase} is from an older release (catalog {commit} predates it)"
    )


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MORE])
    return shown + (f" and {len(names) - _MORE} more" if len(names) > _MORE else "")


def _open_message(name: str, app: str, version: str, index: int, failed: list[str]) -> str:
    if index == 0:
        return f"wave {name} is the first: {app} {version} may start"
    tolerated = f" ({len(failed)} failure(s) within maxFailures)" if failed else ""
    return f"earlier waves proved {app} {version}{tolerated}"
