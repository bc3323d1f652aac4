"""Changes that loosen a guard, said up front in ``reconciler preview``.

A pull request that removes a rollout gate, moves it later, lowers the number of
batches or approves a version other than the one that would roll changes no
rendered object, so the object diff never shows it; yet it decides how far the
next release goes unattended (SPEC section 4, "gates re-arm"). ``compare`` in
``reconciler.preview.build`` adds these lines to the preview's warnings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.daemon.plan import InstancePlan
from reconciler.preview.scope import InstanceKey
from reconciler.rollout import PlanError, RolloutSettings, merge_plans


def gate_warnings(
    keys: Sequence[InstanceKey],
    base: Mapping[InstanceKey, InstancePlan],
    head: Mapping[InstanceKey, InstancePlan],
) -> list[str]:
    """One line per instance whose rollout guard the change loosens."""
    out: list[str] = []
    for key in keys:
        after = head.get(key)
        if after is None:
            continue
        before = base.get(key)
        old = _settings(before) if before is not None else None
        new = _settings(after)
        name = f"{key[0]}/{key[1]}"
        out.extend(f"{name}: {line}" for line in _loosened(old, new))
        target = after.version.key if after.version is not None else None
        promoted = new.promoted if new is not None else None
        was = old.promoted if old is not None else None
        if promoted is not None and promoted != was and promoted.to != target:
            out.append(
                f"{name}: the change approves {promoted.to} (rollout.promoted), but the "
                f"instance rolls to {target or 'no version'}: the approval is inert and "
                "that rollout stops at its partition"
            )
    return out


def _loosened(old: RolloutSettings | None, new: RolloutSettings | None) -> list[str]:
    if old is None:
        return []
    lines = []
    old_gate, new_gate = _policy(old), _policy(new)
    if old_gate is not None and new_gate is None:
        lines.append(
            f"the change removes the rollout gate (partition {old_gate}): every later "
            "release rolls through all its batches without a promotion"
        )
    elif old_gate is not None and new_gate is not None and new_gate > old_gate:
        lines.append(
            f"the change moves the rollout gate from after batch {old_gate} to after batch "
            f"{new_gate}: more replicas move before anyone approves"
        )
    old_n, new_n = len(old.batches), len(new.batches) if new is not None else 0
    if new_n < old_n:
        lines.append(
            f"the change lowers rollout.batches from {old_n} to "
            f"{new_n or 'none (every change applies at once)'}"
        )
    return lines


def _policy(settings: RolloutSettings | None) -> int | None:
    """The partition as policy: ``None`` when it gates nothing (absent or past the end)."""
    if settings is None or settings.partition is None:
        return None
    return settings.partition if settings.partition < len(settings.batches) else None


def _settings(plan: InstancePlan) -> RolloutSettings | None:
    version = plan.version.rollout if plan.version is not None else None
    try:
        return merge_plans(version, plan.instance.rollout)
    except PlanError:
        return None  # validation reports a broken plan
