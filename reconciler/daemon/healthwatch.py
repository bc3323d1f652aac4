"""Health observed across passes, never waited for: when each instance's wait began.

SPEC section 4, "the daemon never waits": a pass applies every instance, looks at
health (with one short grace shared by the whole pass, so a change that is ready
in a second still makes one status commit, not two) and moves on. An instance
whose objects are not healthy yet is ``Progressing`` and gets another look in a
second; only when it has stayed unhealthy for ``--health-timeout`` since the
change that started the wait is it ``Failed``/``HealthCheckFailed``. Before this,
one instance with slow pods held the whole pass, and every other instance's
change and status commit, for up to the timeout.

``HealthWatch`` is the daemon's memory of those waits: per instance, the version
being waited for, the desired version the wait belongs to, and when it began. It
lives in the daemon process: after a restart a wait starts again at the first
pass (the deadline is extended, never shortened, so nothing fails early). It also
keeps an upgrade path honest without waiting: the next step of a path starts
only once the step before it is healthy.

``on_end(instance, outcome, seconds)`` hears how long each wait lasted, once per
wait: ``healthy``, or ``failed``/``timeout`` when the pass gave up on it (the
daemon's ``reconciler_health_wait_seconds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from reconciler.daemon.plan import InstancePlan

DEFAULT_HEALTH_GRACE = 2.0  # seconds a pass polls, in total, before moving on
HEALTH_LOOK = 1.0  # seconds until the next look while an instance is not healthy yet


@dataclass
class Waiting:
    """One instance's open wait for health."""

    desired: str | None  # the version Git asked for then (the end of an upgrade path)
    version: str | None  # the version that was applied and is being waited for
    since: float  # clock() when the wait began
    ended: bool = False  # its end (failed, timeout) was reported; it stays open


@dataclass
class HealthWatch:
    """Per instance, since when its objects have not been healthy (see the module docstring)."""

    clock: Callable[[], float] = time.monotonic
    on_end: Callable[[str, str, float], None] | None = None
    _waits: dict[str, Waiting] = field(default_factory=dict)

    def changed(self, plan: InstancePlan, version: str | None) -> None:
        """The pass changed ``plan``'s objects: a wait (re)starts now, whatever came before."""
        self._waits[plan.name] = Waiting(plan.resolution.version, version, self.clock())

    def unhealthy(self, plan: InstancePlan, version: str | None) -> float:
        """Seconds ``plan`` has been unhealthy (a wait starts now if none was open)."""
        wait = self._waits.get(plan.name)
        if wait is None:
            wait = Waiting(plan.resolution.version, version, self.clock())
            self._waits[plan.name] = wait
        return self.clock() - wait.since

    def healthy(self, name: str) -> None:
        wait = self._waits.pop(name, None)
        if wait is not None and not wait.ended:
            self._report(name, "healthy", wait)

    def gave_up(self, name: str, outcome: str) -> None:
        """The pass records ``name`` as failed (``failed``, or ``timeout``): its wait
        ends for the metrics, once, but stays open (a later healthy look still ends it)."""
        wait = self._waits.get(name)
        if wait is not None and not wait.ended:
            wait.ended = True
            self._report(name, outcome, wait)

    def _report(self, name: str, outcome: str, wait: Waiting) -> None:
        if self.on_end is not None:
            self.on_end(name, outcome, self.clock() - wait.since)

    def waiting_for(self, name: str) -> Waiting | None:
        return self._waits.get(name)

    def holds_next_step(self, plan: InstancePlan, deployed: str | None) -> bool:
        """Whether ``plan`` is the next step of an upgrade path whose last step is not healthy.

        A path passes through each version so that each one's state is reached
        (migrations, schema changes); starting step 2 while step 1's pods still come
        up would skip that. A new desired version (a channel move, an edited
        instance file) is a new intention and is applied at once.
        """
        wait = self._waits.get(plan.name)
        if wait is None or plan.version is None or deployed is None:
            return False
        moves = plan.version.key != deployed
        same_goal = wait.desired == plan.resolution.version and wait.version == deployed
        return moves and same_goal

    def forget_except(self, names: Iterable[str]) -> None:
        keep = set(names)
        for name in [n for n in self._waits if n not in keep]:
            del self._waits[name]
