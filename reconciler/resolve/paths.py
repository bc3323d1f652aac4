"""Upgrade paths: how a deployed version reaches a target through ``upgradeFrom``.

A version may declare ``upgradeFrom`` (the deployed versions that can upgrade
straight to it), typically because a data migration only knows the previous
schema. When the deployed version is outside the target's range, the instance
must pass through intermediate catalog versions, like OLM's ``replaces``/
``skipRange`` graph. We take the highest possible step each time, so an
instance makes as few hops as the catalog allows, and backtrack when that
greedy step leads nowhere.

``upgradeFrom`` describes versions that are (or were) running, so prereleases
match it by precedence alone: the selection-time prerelease rule does not apply.

Called by ``reconciler.resolve.resolver`` when it knows the deployed version.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.model.catalog import AppVersion
from reconciler.model.errors import NoUpgradePath, ResolveError
from reconciler.model.version import Version, parse_version
from reconciler.resolve.ranges import Range, RangeSyntaxError, parse_range

__all__ = ["find_upgrade_path"]


@dataclass(frozen=True)
class _Step:
    """A version that may be deployed on the way, with its parsed ``upgradeFrom``."""

    version: AppVersion
    accepts_from: Range | None  # None: any lower version may upgrade to it

    def accepts(self, deployed: Version) -> bool:
        if self.accepts_from is None:
            return True
        return self.accepts_from.matches(deployed, include_prerelease=True)


def find_upgrade_path(
    versions: Iterable[AppVersion],
    deployed: Version | str,
    target: AppVersion,
    *,
    allow_prerelease: bool = False,
) -> tuple[str, ...]:
    """Versions to deploy one after the other, ending with ``target``.

    ``(target,)`` when the target accepts the deployed version directly.
    Intermediate steps are non-yanked catalog versions strictly between the
    two; prereleases only when the target is one or ``allow_prerelease``.
    Raises ``NoUpgradePath`` naming the gap, or ``ResolveError`` naming the
    version file whose ``upgradeFrom`` does not parse.
    """
    start = deployed if isinstance(deployed, Version) else parse_version(deployed)
    goal = _step(target)
    steps = [_step(v) for v in _intermediates(versions, start, target, allow_prerelease)]
    path = _search(steps, start, goal)
    if path is None:
        raise NoUpgradePath(_gap_message(steps, start, goal))
    return tuple(s.version.key for s in path)


def _intermediates(
    versions: Iterable[AppVersion], start: Version, target: AppVersion, allow_prerelease: bool
) -> list[AppVersion]:
    """Usable stepping stones, highest first (the greedy order)."""
    prereleases_ok = allow_prerelease or target.version.prerelease is not None
    usable = [
        v
        for v in versions
        if start < v.version < target.version
        and not v.yanked
        and (prereleases_ok or v.version.prerelease is None)
    ]
    return sorted(usable, key=lambda v: v.version, reverse=True)


def _step(version: AppVersion) -> _Step:
    if version.upgrade_from is None:
        return _Step(version, None)
    try:
        return _Step(version, parse_range(version.upgrade_from))
    except RangeSyntaxError as e:
        file = version.origin.file or f"{version.directory}/version.yaml"
        line = version.origin.line("upgradeFrom")
        where = file if line is None else f"{file}:{line}"
        raise ResolveError(
            f"{where}: upgradeFrom of {version.key} is not a valid range: {e}"
        ) from e


def _search(steps: list[_Step], start: Version, goal: _Step) -> list[_Step] | None:
    """Depth-first, highest step first, with an explicit stack (chains can be long).

    ``cursors[d]`` is the next step to try at depth ``d``; ``dead`` remembers
    versions whose every continuation failed, so each is explored once.
    """
    if goal.accepts(start):
        return [goal]
    dead: set[str] = set()
    path: list[_Step] = []
    cursors = [0]
    while cursors:
        current = path[-1].version.version if path else start
        found, cursors[-1] = _next_step(steps, cursors[-1], current, dead)
        if found is None:  # dead end here: back up one step
            cursors.pop()
            if path:
                dead.add(path.pop().version.key)
            continue
        if goal.accepts(found.version.version):
            return [*path, found, goal]
        path.append(found)
        cursors.append(0)
    return None


def _next_step(
    steps: list[_Step], index: int, current: Version, dead: set[str]
) -> tuple[_Step | None, int]:
    """The next untried step above ``current`` that accepts it, and where to resume."""
    while index < len(steps) and steps[index].version.version > current:
        step = steps[index]
        index += 1
        if step.version.key not in dead and step.accepts(current):
            return step, index
    return None, index


def _reachable(steps: list[_Step], start: Version) -> list[Version]:
    """Every version the deployed one can get to (itself included), lowest first."""
    seen = {start}
    frontier = [start]
    while frontier:
        current = frontier.pop()
        for step in steps:
            v = step.version.version
            if v > current and v not in seen and step.accepts(current):
                seen.add(v)
                frontier.append(v)
    return sorted(seen)


def _gap_message(steps: list[_Step], start: Version, goal: _Step) -> str:
    """Name the gap from the highest reachable version: nothing above it accepts it."""
    top = _reachable(steps, start)[-1]
    target = goal.version.key
    requires = f"{target} requires upgradeFrom {goal.accepts_from}"
    if top == start:
        return (
            f"no catalog version between {start} and {target} accepts an upgrade "
            f"from {start} ({requires})"
        )
    return (
        f"no catalog version between {top} and {target} accepts an upgrade from {top} "
        f"(the highest version reachable from {start}; {requires})"
    )
