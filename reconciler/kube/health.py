"""Is an applied object healthy? Poll the API until it is, as kstatus judges it.

:func:`evaluate` (``kstatus.py``) reads one live object dict (no I/O) with the
rules of sigs.k8s.io/cli-utils kstatus. :func:`wait_healthy` polls the API until
every object is current, one fails, or a timeout passes; the daemon and rollouts
call it after apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.kube.kstatus import Health, Verdict, evaluate
from reconciler.model.changeset import ObjectRef

if TYPE_CHECKING:
    from reconciler.kube.client import KubeClient

__all__ = ["Health", "HealthReport", "ObjectHealth", "Verdict", "evaluate", "wait_healthy"]


@dataclass(frozen=True, slots=True)
class ObjectHealth:
    ref: ObjectRef
    health: Health
    message: str = ""

    def __str__(self) -> str:
        return f"{self.ref}: {self.health}" + (f" ({self.message})" if self.message else "")


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The last observation of every watched object; ``timed_out`` when time ran out."""

    objects: tuple[ObjectHealth, ...] = field(default=())
    timed_out: bool = False

    @property
    def healthy(self) -> bool:
        return all(o.health is Health.CURRENT for o in self.objects)

    @property
    def failed(self) -> tuple[ObjectHealth, ...]:
        return tuple(o for o in self.objects if o.health is Health.FAILED)

    @property
    def pending(self) -> tuple[ObjectHealth, ...]:
        return tuple(o for o in self.objects if o.health is not Health.CURRENT)

    def message(self) -> str:
        if self.healthy:
            return f"{len(self.objects)} objects healthy"
        prefix = "timed out waiting for health: " if self.timed_out else ""
        return prefix + "; ".join(str(o) for o in self.pending)


def wait_healthy(
    client: KubeClient,
    objects: Iterable[ObjectRef | Mapping[str, Any]],
    timeout: float,
    *,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[HealthReport], None] | None = None,
) -> HealthReport:
    """Poll until every object is Current, one Failed, or ``timeout`` seconds pass.

    ``objects`` are references or object dicts (such as the applied manifests).
    ``progress`` sees each round's observation (``apply --wait`` draws it).
    """
    refs = [o if isinstance(o, ObjectRef) else ObjectRef.of(o) for o in objects]
    order = list(dict.fromkeys(refs))
    pending = list(order)
    done: dict[ObjectRef, ObjectHealth] = {}
    deadline = clock() + timeout
    delay = min(interval, 0.1)
    while True:
        for ref in list(pending):
            obj = client.get(ref)
            if obj is None:
                done[ref] = ObjectHealth(ref, Health.NOT_FOUND, "not found")
                continue
            health, message = evaluate(obj)
            done[ref] = ObjectHealth(ref, health, message)
            if health is Health.CURRENT:
                pending.remove(ref)
        report = tuple(done[r] for r in order if r in done)
        if progress is not None:
            progress(HealthReport(report))
        if not pending or any(o.health is Health.FAILED for o in report):
            return HealthReport(report)
        if clock() >= deadline:
            return HealthReport(report, timed_out=True)
        time.sleep(delay)
        delay = min(delay * 2, interval)
