"""Batch targets and the effective rollout settings of an instance (SPEC section 4).

Pure arithmetic, kept apart from the state machine so it can be property-tested on
its own: the targets are what every invariant is stated against ("at batch k
exactly the planned number of replicas run ``to``").
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.model.analysis import PrometheusAnalysis
from reconciler.model.catalog import Batch, Promotion, RolloutPlan

ON_FAILURE = ("hold", "rollback")


class PlanError(ValueError):
    """A batch plan that cannot be followed (a bad count or percentage)."""


def plan_batches(replicas: int, batches: tuple[Batch, ...]) -> tuple[int, ...]:
    """Cumulative replica targets, one per batch.

    SPEC's example fixes the arithmetic: ``[1, 50%, 50%]`` on 5 replicas gives
    ``(1, 3, 5)``. So percentages add up to a cumulative share of ``replicas``
    (50% then 100%), and a batch's target is that share rounded up; a count adds
    that many replicas to the previous target. A target never goes down (``[3,
    20%]`` on 10 is 3, 3 before the last batch) and never exceeds ``replicas``; the
    last batch always reaches every replica, so a plan below 100% still finishes.
    Batches that move nobody are kept so batch numbers stay those of the file;
    they verify at once. No replicas means nothing to move: ``()``.
    """
    if replicas < 0:
        raise PlanError(f"replicas must be >= 0, got {replicas}")
    if replicas == 0 or not batches:
        return ()
    targets: list[int] = []
    target = 0
    percent = 0
    for step in batches:
        if step.value < 0 or (step.percent and step.value > 100):
            raise PlanError(f"batch {step} is not a count >= 0 or a percentage 0..100")
        if step.percent:
            percent += step.value
            target = max(target, -(-replicas * percent // 100))
        else:
            target += step.value
        target = min(replicas, target)
        targets.append(target)
    targets[-1] = replicas
    return tuple(targets)


@dataclass(frozen=True)
class RolloutSettings:
    """The plan an instance follows: the version's, overridden key by key by the instance's."""

    batches: tuple[Batch, ...]
    partition: int | None = None
    paused: bool = False
    on_failure: str = "hold"
    health_timeout_seconds: int = 300
    pause_seconds: int = 0
    analysis: str | PrometheusAnalysis | None = None
    promoted: Promotion | None = None

    @property
    def analysis_job(self) -> str | None:
        """The analysis Job file, None when there is none."""
        return self.analysis if isinstance(self.analysis, str) else None

    @property
    def prometheus(self) -> PrometheusAnalysis | None:
        """The Prometheus queries measured after each batch, if any."""
        return self.analysis if isinstance(self.analysis, PrometheusAnalysis) else None

    def targets(self, replicas: int) -> tuple[int, ...]:
        return plan_batches(replicas, self.batches)

    def gate(self, to_version: str) -> int | None:
        """The batch a rollout to ``to_version`` stops after, ``None`` when it runs to the end.

        ``partition`` is policy for every rollout; an approval (``promoted``) opens
        batches up to its ``through`` only for the rollout to the version it names,
        so the next release stops at the partition again (SPEC section 4, "gates
        re-arm"). A gate at or past the last batch gates nothing.
        """
        if self.partition is None:
            return None
        stop = self.partition
        if self.promoted is not None and self.promoted.to == to_version:
            stop = max(stop, self.promoted.through)
        return None if stop >= len(self.batches) else stop


_FIELDS = {
    "batches": "batches",
    "partition": "partition",
    "paused": "paused",
    "onFailure": "on_failure",
    "healthTimeoutSeconds": "health_timeout_seconds",
    "pauseSeconds": "pause_seconds",
    "analysis": "analysis",
    "promoted": "promoted",
}


def merge_plans(
    version: RolloutPlan | None, instance: RolloutPlan | None
) -> RolloutSettings | None:
    """The effective settings, or ``None`` when neither file plans batches (apply at once).

    The instance file wins key by key: a version saying ``batches: [1, 50%, 50%]``
    and an instance saying ``partition: 1`` roll in three batches and stop after the
    first. Only keys a file set count (``RolloutPlan.given``), so a default in one
    file never hides a value in the other. The gates (``partition``, ``paused``)
    normally come from the instance file, where promotion commits edit them.
    """
    values: dict[str, object] = {}
    for plan in (version, instance):
        if plan is None:
            continue
        for key, attr in _FIELDS.items():
            if key in plan.given or not plan.given:
                values[attr] = getattr(plan, attr)
    batches = values.get("batches")
    if not isinstance(batches, tuple) or not batches:
        return None
    on_failure = values.get("on_failure", "hold")
    if on_failure not in ON_FAILURE:
        raise PlanError(f"onFailure must be hold or rollback, got {on_failure!r}")
    return RolloutSettings(**values)  # type: ignore[arg-type]
