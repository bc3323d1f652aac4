"""Turn one instance's pass results into its ``InstanceStatus`` record (pure).

Every stage failure becomes a named reason on kstatus conditions, as
kustomize-controller does: a plan that cannot proceed is ``Stalled`` (it needs a
commit to fix it: ``CatalogInvalid``, ``ResolveFailed``, ``DowngradeBlocked``,
``NoUpgradePath``), an apply or health failure is ``Failed`` (it may pass on a
retry: ``ApplyFailed``, ``HealthCheckFailed``), an upgrade that goes through
intermediate versions is ``Progressing`` until it reaches its target, and
``suspend: true`` is ``Suspended``. The record names what runs now (``version``)
and what Git asks for (``desiredVersion``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from reconciler.daemon.plan import CATALOG_INVALID, NO_IMAGES, InstancePlan
from reconciler.kube import EMPTY_RENDER, PRUNE_REFUSED, HealthReport, InstanceResult
from reconciler.model.changeset import Action
from reconciler.model.status import TRUE, Condition, ConditionType, InstanceStatus, Phase
from reconciler.model.words import plural
from reconciler.waves import WAITING_FOR_WAVE

HEALTH_CHECK_FAILED = "HealthCheckFailed"
HEALTH_CHECK_PENDING = "Progressing"  # kstatus's reason while objects come up (SPEC section 3)
APPLY_FAILED = "ApplyFailed"
UPGRADE_IN_PROGRESS = "UpgradeInProgress"
CONFLICTING_WRITER = "ConflictingWriter"
MIGRATION_FAILED = "MigrationFailed"  # the same reason as daemon.migrating's


@dataclass(frozen=True)
class InstanceOutcome:
    """Everything a pass learned about one instance, from plan to health."""

    plan: InstancePlan
    deployed: str | None = None  # version running before this pass (from the inventory)
    deployed_app: str = ""  # app of the inventory: names the app when the file is unreadable
    result: InstanceResult | None = None  # None when nothing was applied
    health: HealthReport | None = None
    health_timeout: float = 0.0
    waiting: bool = False  # not healthy yet, within the timeout: Progressing, looked at again
    gated: bool = False  # the next step of an upgrade path waits for this step's health
    deployed_images: Mapping[str, str] = field(default_factory=dict)  # builds running before
    deployed_objects: int = 0  # objects its inventory held before this pass


def build_status(cluster: str, outcome: InstanceOutcome, source_commit: str) -> InstanceStatus:
    plan = outcome.plan
    inst, res = plan.instance, plan.resolution
    phase, reason, message, version = _verdict(outcome)
    objects = len(plan.objects)
    if not objects and outcome.result is not None and outcome.result.inventory is not None:
        objects = len(outcome.result.inventory.objects)
    if not objects and (outcome.result is None or not outcome.result.ok):
        # nothing rendered or applied (CatalogInvalid, EmptyRender, a refused apply):
        # what ran before still runs, and the record must not say 0
        objects = outcome.deployed_objects
    if res.warnings and phase is Phase.READY:
        message = f"{message}; " + "; ".join(res.warnings)
    # interned: the instances of one app version at rest say the same thing, and each
    # record is kept for the life of the daemon (its last records, the memo, the ledger)
    message = sys.intern(message)
    status = InstanceStatus(
        cluster=cluster,
        instance=inst.name,
        app=inst.app or outcome.deployed_app,
        phase=phase,
        version=version,
        desired_version=res.version,
        source=res.source,
        source_commit=source_commit,
        objects=objects,
        reason=reason,
        message=message,
        images=_images(outcome, version),
        applied=outcome.result is not None
        and any(e.changed for e in outcome.result.changes.entries),
    )
    status = status.with_default_conditions()
    other = outcome.result.other_writer if outcome.result is not None else ""
    if other:
        status = replace(status, conditions=(*status.conditions, conflicting_writer(other)))
    return status


def _images(o: InstanceOutcome, version: str | None) -> Mapping[str, str]:
    """The builds that run with ``version``: the plan's once it was applied, else the
    ones the inventory recorded before this pass (a failed apply changed nothing)."""
    plan = o.plan
    applied = (
        plan.ok
        and plan.version is not None
        and version == plan.version.key
        and not plan.instance.suspend
        and not o.gated
        and o.result is not None
        and o.result.ok
    )
    return (dict(plan.images) if applied else dict(o.deployed_images)) or NO_IMAGES


def conflicting_writer(other: str) -> Condition:
    """The condition that says another reconciler applied this instance before this pass.

    Two daemons following different branches for one cluster flip its objects
    back and forth every pass without an error anywhere; this condition (and its
    Warning Event) is how the status branch and ``kubectl describe`` tell.
    """
    return Condition(
        ConditionType.CONFLICTING_WRITER,
        TRUE,
        CONFLICTING_WRITER,
        f"the inventory was last written by another reconciler ({other}); two daemons may "
        "be applying this cluster from different sources (use one, or --leader-elect "
        "with one source); after a deliberate hand-over this clears at the next pass",
    )


def _verdict(o: InstanceOutcome) -> tuple[Phase, str, str, str | None]:
    plan = o.plan
    inst, res = plan.instance, plan.resolution
    if inst.suspend:
        return (
            Phase.SUSPENDED,
            "Suspended",
            f"suspend: true in {inst.origin.file}; nothing is changed",
            o.deployed,
        )
    if not plan.ok:
        # held by the waves: it runs what it runs and moves on once the fleet proved V
        phase = Phase.PROGRESSING if plan.reason == WAITING_FOR_WAVE else Phase.STALLED
        return phase, plan.reason or "ReconcileFailed", plan.message or "", o.deployed
    applied = plan.version.key if plan.version is not None and not o.gated else o.deployed
    if o.result is not None and o.result.reason == EMPTY_RENDER:
        # a commit must fix it (or allow it): like a broken catalog, not a retryable failure
        return Phase.STALLED, EMPTY_RENDER, o.result.message, o.deployed
    if o.result is not None and not o.result.ok:
        message = o.result.message or _first_failure(o.result)
        # SPEC section 5: a failed pre migration is Stalled (retried with backoff)
        phase = Phase.STALLED if o.result.reason == MIGRATION_FAILED else Phase.FAILED
        return phase, o.result.reason or APPLY_FAILED, message, o.deployed
    if o.health is not None and not o.health.healthy and o.waiting:
        what = f"{inst.app} {applied}" if inst.app else str(applied)
        then = f"; then on to {res.version}" if applied != res.version else ""
        message = (
            f"{what} applied; waiting for its objects to become healthy "
            f"(up to {o.health_timeout:g}s){then}"
        )
        return Phase.PROGRESSING, HEALTH_CHECK_PENDING, message, applied
    if o.health is not None and not o.health.healthy:
        if o.health.failed:
            detail = "; ".join(str(h) for h in o.health.failed)
        else:
            pending = "; ".join(str(h) for h in o.health.pending)
            detail = f"not healthy within {o.health_timeout:g}s: {pending}"
        return Phase.FAILED, HEALTH_CHECK_FAILED, detail, applied
    if applied is not None and res.version is not None and applied != res.version:
        path = " -> ".join(res.upgrade_path)
        return (
            Phase.PROGRESSING,
            UPGRADE_IN_PROGRESS,
            f"{inst.app} {applied} is ready; upgrading to {res.version} through {path}",
            applied,
        )
    return (
        Phase.READY,
        "Succeeded",
        f"{inst.app} {applied} is ready ({plural(len(plan.objects), 'object')})",
        applied,
    )


def build_removed_status(
    cluster: str, result: InstanceResult, source_commit: str
) -> InstanceStatus:
    """The record of an instance whose file was deleted from Git (SPEC section 3).

    Uninstalled: phase ``Removed``, one commit ``prod/web: removed (3 objects
    deleted)``, and ``status`` stops listing it. Refused by the cluster guard:
    ``Stalled``/``PruneRefused``; by errors in the cluster's directory,
    ``Stalled``/``CatalogInvalid``. A delete that failed: ``Failed``/``PruneFailed``.
    """
    inventory = result.inventory
    app = inventory.app if inventory is not None else ""
    version = inventory.version if inventory is not None and inventory.version else None
    deleted = result.changes.count(Action.DELETED)
    if result.ok:
        noun = "object" if deleted == 1 else "objects"
        phase, reason, message = Phase.REMOVED, "Removed", f"removed ({deleted} {noun} deleted)"
        version = None
    elif result.reason in (PRUNE_REFUSED, CATALOG_INVALID):
        phase, reason, message = Phase.STALLED, result.reason, result.message
    else:
        phase = Phase.FAILED
        reason = result.reason or "PruneFailed"
        message = result.message or _first_failure(result)
    status = InstanceStatus(
        cluster=cluster,
        instance=result.instance,
        app=app,
        phase=phase,
        version=version,
        source="removed from Git",
        source_commit=source_commit,
        objects=0 if phase is Phase.REMOVED else len(inventory.objects if inventory else ()),
        reason=reason,
        message=message,
    )
    return status.with_default_conditions()


def _first_failure(result: InstanceResult) -> str:
    for entry in result.changes.entries:
        if entry.action is Action.FAILED:
            return str(entry)
    return "apply failed"
