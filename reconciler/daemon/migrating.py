"""Migration hooks in a pass (SPEC section 5): when they run, and what the pass records.

The daemon's pass and ``apply`` call :class:`MigrationHooks` at four points:

1. ``MigrationHooks.begin``: before any instance changes, the ``global`` ``pre``
   migrations of the versions this pass moves instances to (once per cluster, with
   every instance about to change in ``RECONCILER_COMPONENTS``). A failed one
   stops every upgrade of the pass; unchanged instances are still kept in sync.
2. ``before_apply(plan)``: just before an instance's version changes (an install or
   one step of an upgrade path), its version's ``app`` ``pre`` migrations. A failed
   one applies nothing of the new version: the instance is ``Stalled`` with reason
   ``MigrationFailed`` and the migration's message, backs off like any failure, and
   is retried after the backoff or when its inputs change. Other instances go on.
3. ``after_health(...)``: once the instance is healthy at its version, the
   ``post`` migrations of that version its ledger has not settled (``app``, then
   ``global``): in the pass that moved it there, or a later one when it was not
   healthy in time. A failed one leaves the new version running and the instance
   ``Stalled``/``MigrationFailed``, retried after the backoff.
4. ``before_prune``/``after_prune`` (an :class:`~reconciler.daemon.applying.Uninstaller`):
   an instance whose file was deleted runs its version's ``uninstall`` migrations,
   then the ``undo`` of every migration its ledger records as applied, newest first,
   each from the catalog version that applied it; a failure keeps every object for
   a retry. After the prune its ledger ConfigMap goes too: a later install of the
   same name starts afresh, since everything was undone.

Nothing waits in line: in the daemon a pass gives Job migrations a short grace
shared by the whole pass (``job_grace``, the pass's ``--health-grace``). A Job that
ends within it is handled as above; one still running leaves its instance as it is
this pass, ``Progressing``/``Migrating`` with a message naming the Job (a global
``pre`` one: every instance this pass would change; an ``uninstall`` one: the
removal stays pending, ``Progressing``/``Uninstalling``), nothing is written to
the ledger for it, and :attr:`MigrationHooks.next_look` asks for a pass soon. That
pass takes the Job over without running its state check again, and records it
with the Job's own duration when it ends. Other instances are applied meanwhile.
``reconciler apply`` gives no grace: it waits for each Job to its end.

Once only: every outcome is appended to the instance's ledger (a ``global`` one to
the cluster's, and copied to the ledger of the instance whose change ran it, so its
status shows it) and written to the cluster at once (``migration_steps``).
``recorded`` puts each instance's ledger into its ``InstanceStatus.migrations`` and
gives every run its own status to commit, so each run is one status commit
(``Reconciler-Migration`` trailer) before the change it served.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.daemon.applying import INSTANCE_KIND, kept_as_is
from reconciler.daemon.migration_steps import DEFAULT_LEDGER_NAMESPACE, MigrationSteps
from reconciler.daemon.plan import InstancePlan
from reconciler.daemon.rendered import refs_of
from reconciler.kube import (
    HealthReport,
    InstanceResult,
    Inventory,
    KubeClient,
    KubeJobRunner,
    Limits,
    LiveState,
    wait_healthy,
)
from reconciler.migrations import (
    Component,
    JobRunner,
    MigrationRun,
    Registry,
    StillRunning,
    pending,
    plan_uninstall,
)
from reconciler.model.builds import pinned_images
from reconciler.model.catalog import AppVersion, Catalog, Instance
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.migrations import FAILED, LedgerFormatError, MigrationLedger, MigrationRecord
from reconciler.model.status import ConditionType, InstanceStatus, Phase, conditions_for
from reconciler.status import describe_migration


def pinned_images_of(catalog: Catalog, version: AppVersion) -> Mapping[str, str] | None:
    """``version``'s images with the builds its app's builds.yaml pins (SPEC section 8).

    A migration Job that names ``${images.app}`` must run the very build the version
    runs, not whatever its intermediate tag points at today. None: nothing pinned.
    """
    builds = catalog.builds_of(version)
    return pinned_images(version.images, builds) if builds else None


log = logging.getLogger("reconciler.daemon")

MIGRATION_FAILED = "MigrationFailed"
MIGRATING = "Migrating"
UNINSTALLING = "Uninstalling"
MIGRATION_LOOK = 1.0  # seconds until the next pass while a migration Job runs


@dataclass(frozen=True)
class _Running:
    """An instance held this pass by a migration Job that has not ended."""

    stage: str  # pre, post or uninstall
    message: str


@dataclass(frozen=True)
class MigrationEvent:
    """One run of a pass: for the log, the metric, and its own status commit.

    ``stage`` is when it ran (``pre``, ``post`` or ``uninstall``, undo steps
    included; a global run says so in ``record.scope``); ``upto`` is the
    instance's ledger right after it; ``statuses`` are the records to commit for
    it, in order (filled by :meth:`MigrationHooks.recorded`); ``resumed``: its Job
    was started by an earlier pass, which already recorded the instance as
    migrating.
    """

    instance: str
    record: MigrationRecord
    stage: str
    upto: tuple[MigrationRecord, ...]
    statuses: tuple[InstanceStatus, ...] = ()
    resumed: bool = False

    @property
    def seconds(self) -> float:
        return self.record.duration + self.record.check_duration


class MigrationHooks:
    """The migration side of one pass over one cluster (see the module docstring)."""

    def __init__(
        self,
        steps: MigrationSteps,
        catalog: Catalog,
        deployed: Mapping[str, str],
        changing: Mapping[str, InstancePlan],
        *,
        health_timeout: float = 120.0,
        runs_global: bool = True,
    ) -> None:
        self.steps = steps
        self.runs_global = runs_global  # False: another shard's replica runs global ones
        self.catalog = catalog
        self.cluster = steps.cluster
        self.deployed = dict(deployed)  # what each instance ran before this pass
        self.changing = dict(changing)  # instances whose version this pass changes
        self.health_timeout = health_timeout
        self.events: list[MigrationEvent] = []
        self.post_failed: dict[str, str] = {}  # instance -> why it is Stalled
        self.running: dict[str, _Running] = {}  # instance -> the Job it waits for
        self.global_failure = ""
        self.global_running = ""
        self._removed: dict[str, Inventory] = {}

    @classmethod
    def begin(
        cls,
        client: KubeClient,
        live: LiveState,
        catalog: Catalog,
        plans: Sequence[InstancePlan],
        deployed: Mapping[str, str],
        *,
        cluster: str,
        held: Iterable[str] = (),
        registry: Registry | None = None,
        limits: Limits | None = None,
        job_runner: JobRunner | None = None,
        ledger_namespace: str = DEFAULT_LEDGER_NAMESPACE,
        health_timeout: float = 120.0,
        job_grace: float | None = None,
        runs_global: bool = True,
    ) -> MigrationHooks:
        """The hooks of a pass, after running the global ``pre`` migrations it needs.

        ``held`` instances (backing off) change nothing this pass; ``limits`` are
        ``cluster.yaml``'s: a migration Job obeys them like a manifest.
        ``job_grace``: seconds the whole pass waits for Jobs (the daemon); None
        waits for each to its end (``apply``). ``runs_global`` False (a replica not
        holding shard 0 of ``--shards``): global migrations are never run here; an
        upgrade whose version ships a global ``pre`` one not yet in the cluster's
        ledger waits for the replica that holds shard 0 to run it.
        """
        steps = MigrationSteps(
            client,
            live,
            cluster,
            registry=registry or Registry.installed(),
            job_runner=job_runner or KubeJobRunner(client),
            limits=limits or Limits(),
            ledger_namespace=ledger_namespace,
            job_grace=job_grace,
            images=lambda version: pinned_images_of(catalog, version),
        )
        skip = set(held)
        changing = {
            p.name: p
            for p in plans
            if p.name not in skip
            and p.ok
            and not p.instance.suspend
            and p.version is not None
            and p.version.key != deployed.get(p.name)
        }
        present = catalog.clusters[cluster].instances if cluster in catalog.clusters else {}
        steps.components = tuple(
            Component(p.name, p.instance.app, deployed.get(p.name), p.version.key)
            for p in changing.values()
            if p.version is not None
        ) + tuple(
            Component(name, inv.app, inv.version or None, None)
            for name, inv in sorted(
                (n, i) for n, i in live.inventories().items() if n not in present
            )
        )
        hooks = cls(
            steps,
            catalog,
            deployed,
            changing,
            health_timeout=health_timeout,
            runs_global=runs_global,
        )
        hooks._run_global("pre", list(changing.values()))
        return hooks

    @property
    def next_look(self) -> float | None:
        """Seconds until a pass should look at a migration Job again (None: none runs)."""
        return MIGRATION_LOOK if self.running else None

    # -- the hooks ----------------------------------------------------------------------

    def before_apply(self, plan: InstancePlan) -> InstanceResult | None:
        """Run ``plan``'s pre migrations; a result stops its apply.

        Stalled/MigrationFailed when one failed; left as it is (recorded
        Progressing/Migrating) while one's Job runs.
        """
        if plan.name not in self.changing:
            return None
        if self.global_failure:
            return self._stop(plan, self.global_failure)
        if self.global_running:
            return self._hold(plan, "pre", self.global_running)
        assert plan.version is not None
        outcome = self._run_app(plan, plan.version, "pre", self.deployed.get(plan.name))
        if isinstance(outcome, StillRunning):
            version = plan.version
            until = f"nothing of {version.app} {version.key} is applied until it ends"
            text = f"{outcome.message}; {until}"
            return self._hold(plan, "pre", text)
        return self._stop(plan, outcome) if outcome else None

    def after_health(
        self,
        plans: Sequence[InstancePlan],
        results: Sequence[InstanceResult],
        healths: Sequence[HealthReport | None] | None = None,
    ) -> None:
        """Post migrations due of every healthy instance (see :meth:`_post_due`).

        Without ``healths`` (``apply`` checks no health otherwise) an instance with
        post migrations due is waited for here, up to ``health_timeout``.
        """
        for i, (plan, result) in enumerate(zip(plans, results, strict=True)):
            version = plan.version
            if version is None or not version.migrations:  # the usual case: none at all
                continue
            if not result.ok or plan.instance.suspend or not plan.ok:
                continue
            due, before = self._post_due(plan, version)
            if not due:
                continue
            health = healths[i] if healths is not None else self._wait(plan)
            if health is None or not health.healthy:
                continue
            outcome = self._run_app(plan, version, "post", before) or self._run_global(
                "post", [plan], before
            )
            if isinstance(outcome, StillRunning):
                text = f"{outcome.message}; {version.app} {version.key} runs meanwhile"
                self.running[plan.name] = _Running("post", text)
            elif outcome:
                self.post_failed[plan.name] = outcome

    def before_prune(self, inventory: Inventory) -> InstanceResult | None:
        """Uninstall migrations, then undo steps; a failure keeps the instance for a retry.

        The instance file is gone, so Jobs are rendered with its name, app and
        namespace from the inventory and the version's parameter defaults.
        """
        name, namespace = inventory.instance, inventory.namespace
        self._removed[name] = inventory
        instance = Instance(name, self.cluster, inventory.app, namespace)
        try:
            ledger = self.steps.ledger(name, namespace)
        except LedgerFormatError as e:
            return self._stop_removal(inventory, str(e))
        entry = self.catalog.apps.get(inventory.app)
        versions = entry.versions if entry is not None else {}
        current = versions.get(inventory.version)
        own = MigrationLedger("app", name, tuple(r for r in ledger.records if r.scope == "app"))
        if current is None and not own.applied():
            return None  # nothing to undo, and the uninstall migrations are unknowable
        plan = plan_uninstall(current, own, versions)
        if not plan.ok:
            return self._stop_removal(inventory, "cannot uninstall: " + "; ".join(plan.errors))
        deployed = inventory.version or None
        if current is not None:
            dists = self.steps.registry.distributions()
            for p in pending(current, "uninstall", "app", own, dists)[0]:
                run = self.steps.execute(
                    p.migration, current, instance, "uninstall", p.checksum, deployed
                )
                stopped = self._removal_step(inventory, run)
                if stopped is not None:
                    return stopped
        for step in plan.undo:
            done = self.steps.undo(step.migration, step.version, step.record, instance, deployed)
            stopped = self._removal_step(inventory, done)
            if stopped is not None:
                return stopped
        return None

    def _removal_step(
        self, inventory: Inventory, run: MigrationRun | MigrationRecord | StillRunning
    ) -> InstanceResult | None:
        if isinstance(run, StillRunning):
            return self._pending_removal(inventory, run)
        record = run.record if isinstance(run, MigrationRun) else run
        resumed = isinstance(run, MigrationRun) and run.resumed
        trouble = self._record(
            inventory.instance, inventory.namespace, record, "uninstall", resumed
        )
        if record.outcome == FAILED:
            return self._stop_removal(inventory, _failure_text(record))
        return self._stop_removal(inventory, trouble) if trouble else None

    def after_prune(self, result: InstanceResult) -> None:
        """The instance is gone: so is its ledger ConfigMap (everything was undone)."""
        inventory = self._removed.get(result.instance)
        if result.ok and inventory is not None:
            self.steps.forget(result.instance, inventory.namespace)

    # -- what the pass records --------------------------------------------------------

    def recorded(
        self, statuses: Sequence[InstanceStatus], held: Iterable[str] = ()
    ) -> tuple[InstanceStatus, ...]:
        """``statuses`` with their ledgers and migration verdicts; fills each event's statuses.

        ``held`` instances keep their previous record untouched.
        """
        skip = set(held)
        finals: dict[str, InstanceStatus] = {}
        healthy: dict[str, InstanceStatus] = {}
        ledgers = self.steps.any_recorded_ledger()
        for status in statuses:
            if status.instance not in skip:
                if ledgers:
                    status = self._with_ledger(status)
                healthy[status.instance] = status
                if status.instance in self.post_failed:
                    status = _stalled(status, self.post_failed[status.instance])
                elif status.instance in self.running:
                    status = self._migrating(status, self.running[status.instance])
            finals[status.instance] = status
        for i, event in enumerate(self.events):
            if event.instance in finals:
                statuses_of = self._statuses_for(event, finals, healthy, self.events[:i])
                self.events[i] = replace(event, statuses=statuses_of)
        return tuple(finals[s.instance] for s in statuses)

    def _statuses_for(
        self,
        event: MigrationEvent,
        finals: Mapping[str, InstanceStatus],
        healthy: Mapping[str, InstanceStatus],
        earlier: Sequence[MigrationEvent],
    ) -> tuple[InstanceStatus, ...]:
        """The record(s) to commit for one run: the instance as it was right after it."""
        upto = tuple(r.to_dict() for r in event.upto)
        out: tuple[InstanceStatus, ...] = ()
        first_post = not any(e.instance == event.instance and e.stage == "post" for e in earlier)
        if event.stage == "post" and first_post and not event.resumed:
            # the change itself, healthy, before its post migrations ran
            before = tuple(r.to_dict() for r in event.upto[:-1])
            out = (replace(healthy[event.instance], migrations=before or None),)
        if event.record.outcome == FAILED:
            return (*out, replace(finals[event.instance], migrations=upto))
        if event.stage == "post":
            return (*out, replace(healthy[event.instance], migrations=upto))
        return (*out, self._in_progress(finals[event.instance], event, upto))

    def _in_progress(
        self, final: InstanceStatus, event: MigrationEvent, upto: tuple[Mapping[str, Any], ...]
    ) -> InstanceStatus:
        """The instance while a change is under way: still at what ran before it."""
        removed = self._removed.get(event.instance) if event.stage == "uninstall" else None
        if removed is not None:
            version, reason, objects = removed.version or None, UNINSTALLING, len(removed.objects)
        else:
            version, reason, objects = self.deployed.get(event.instance), MIGRATING, final.objects
        return replace(
            final,
            phase=Phase.PROGRESSING,
            version=version,
            reason=reason,
            message=describe_migration(event.record.to_dict()),
            objects=objects,
            conditions=(),
            migrations=upto,
            rollout=None,  # the change has not started: its first step gets its own commit
        )

    def _migrating(self, status: InstanceStatus, running: _Running) -> InstanceStatus:
        """``status`` while a migration Job holds it: Progressing, at what runs now."""
        version, reason, objects = status.version, MIGRATING, status.objects
        removed = self._removed.get(status.instance)
        if running.stage == "uninstall" and removed is not None:
            version, reason = removed.version or None, UNINSTALLING
            objects = len(removed.objects)
        elif running.stage == "pre":
            version = self.deployed.get(status.instance)
        kept = tuple(c for c in status.conditions if c.type == ConditionType.CONFLICTING_WRITER)
        return replace(
            status,
            phase=Phase.PROGRESSING,
            version=version,
            reason=reason,
            message=running.message,
            objects=objects,
            conditions=conditions_for(Phase.PROGRESSING, reason, running.message) + kept,
        )

    def _with_ledger(self, status: InstanceStatus) -> InstanceStatus:
        namespace = self._namespace_of(status.instance)
        try:
            ledger = self.steps.recorded_ledger(status.instance, namespace) if namespace else None
        except LedgerFormatError:
            return status  # reported where it stops a change; the record keeps what it had
        if ledger is None or not ledger.records:
            return status
        return replace(status, migrations=tuple(r.to_dict() for r in ledger.records))

    def _namespace_of(self, instance: str) -> str:
        if instance in self._removed:
            return self._removed[instance].namespace
        entry = self.catalog.clusters.get(self.cluster)
        found = entry.instances.get(instance) if entry is not None else None
        if found is not None and found.namespace:
            return found.namespace
        inventory = self.steps.live.inventory(instance)
        return inventory.namespace if inventory is not None else ""

    # -- running ----------------------------------------------------------------------

    def _run_app(
        self, plan: InstancePlan, version: AppVersion, phase: str, deployed: str | None
    ) -> str | StillRunning:
        """Run ``phase`` app migrations of ``version`` for ``plan``.

        "" when all are settled, a failure's message, or the Job still running.
        """
        inst = plan.instance
        try:
            ledger = self.steps.ledger(inst.name, inst.namespace)
        except LedgerFormatError as e:
            return f"the migration ledger cannot be read: {e}"
        dists = self.steps.registry.distributions()
        for p in pending(version, phase, "app", ledger, dists)[0]:
            trouble = self.steps.prepare(inst.namespace)
            if trouble:
                return trouble
            run = self.steps.execute(p.migration, version, inst, phase, p.checksum, deployed)
            if isinstance(run, StillRunning):
                return run
            record = run.record
            trouble = self._record(inst.name, inst.namespace, record, phase, run.resumed)
            if record.outcome == FAILED:
                return _failure_text(record, version)
            if trouble:
                return trouble
        return ""

    def _run_global(
        self, phase: str, plans: Sequence[InstancePlan], deployed: str | None = None
    ) -> str | StillRunning:
        """Run ``phase`` global migrations shipped by ``plans``' versions, each once.

        Each runs for (and is recorded with) the first instance whose version ships it.
        A global ``pre`` Job still running holds every upgrade of the pass (recorded
        in ``global_running``), as a failed one would, but fails nothing.
        """
        seen: set[str] = set()
        for plan in plans:
            version, inst = plan.version, plan.instance
            if version is None or not any(
                m.scope == "global" and m.phase == phase for m in version.migrations
            ):
                continue
            try:
                ledger = self.steps.global_ledger()
            except LedgerFormatError as e:
                return self._global_failed(phase, f"the cluster's ledger cannot be read: {e}")
            dists = self.steps.registry.distributions()
            for p in pending(version, phase, "global", ledger, dists)[0]:
                if p.migration.name in seen:
                    continue
                seen.add(p.migration.name)
                if not self.runs_global:
                    return self._left_to_shard_zero(phase, p.migration.name)
                trouble = self.steps.prepare(inst.namespace)
                if trouble:
                    return self._global_failed(phase, trouble)
                before = deployed if phase == "post" else self.deployed.get(plan.name)
                run = self.steps.execute(p.migration, version, inst, phase, p.checksum, before)
                if isinstance(run, StillRunning):
                    if phase == "pre":
                        self.global_running = f"global {run.message}; no upgrade runs until it ends"
                    return run
                record = run.record
                trouble = self.steps.append_global(record) or self._record(
                    inst.name, inst.namespace, record, phase, run.resumed
                )
                if record.outcome == FAILED:
                    return self._global_failed(phase, _failure_text(record, version))
                if trouble:
                    return self._global_failed(phase, trouble)
        return ""

    def _left_to_shard_zero(self, phase: str, name: str) -> str:
        """A global migration due in a replica that does not run them (``--shards``).

        A ``pre`` one holds every upgrade of this pass, as a running one does, until
        the ledger records it; a ``post`` one is left to the owner of shard 0.
        """
        if phase == "pre":
            self.global_running = (
                f"global pre migration {name} is run by the replica holding shard 0; "
                "no upgrade runs until the cluster's ledger records it"
            )
        return ""

    def _global_failed(self, phase: str, message: str) -> str:
        if phase != "pre":
            return message
        self.global_failure = f"global {message}; no upgrade runs in this pass"
        return self.global_failure

    def _record(
        self,
        instance: str,
        namespace: str,
        record: MigrationRecord,
        stage: str,
        resumed: bool = False,
    ) -> str:
        trouble = self.steps.append(instance, namespace, record)
        upto = self.steps.ledger(instance, namespace).records
        self.events.append(MigrationEvent(instance, record, stage, upto, resumed=resumed))
        return trouble

    def _post_due(self, plan: InstancePlan, version: AppVersion) -> tuple[bool, str | None]:
        """Whether ``plan``'s post migrations are due, and what ran before the change.

        Due whenever the instance is at ``version`` and one of its post migrations
        is not settled in the ledger: in the pass that moved it there, and in any
        later one (it was not healthy in time, a run failed, or it predates the
        hooks: then its checks decide). The version the change started from is
        this pass's, else the one a record of this version kept.
        """
        posts = [m for m in version.migrations if m.phase == "post"]
        if not posts:
            return False, None
        if plan.name in self.changing:
            return True, self.deployed.get(plan.name)
        try:
            ledger = self.steps.ledger(plan.name, plan.instance.namespace)
            shared = self.steps.global_ledger() if any(m.scope == "global" for m in posts) else None
        except LedgerFormatError as e:
            self.post_failed[plan.name] = f"the migration ledger cannot be read: {e}"
            return False, None
        books = {"app": ledger, "global": shared or ledger}
        if all(books[m.scope].settled(m.name) for m in posts):
            return False, None
        started = [r.from_version for r in ledger.records if r.version == version.key]
        return True, next((v for v in reversed(started) if v), self.deployed.get(plan.name))

    def _wait(self, plan: InstancePlan) -> HealthReport:
        refs = refs_of(plan.objects)
        return wait_healthy(self.steps.client, refs, self.health_timeout, interval=0.5)

    # -- results ----------------------------------------------------------------------

    def _stop(self, plan: InstancePlan, message: str) -> InstanceResult:
        kept = kept_as_is(self.steps.live, plan, Action.FAILED, message)
        return replace(kept, reason=MIGRATION_FAILED)

    def _hold(self, plan: InstancePlan, stage: str, message: str) -> InstanceResult:
        """``plan`` left as it is this pass: a migration Job it waits for still runs."""
        self.running[plan.name] = _Running(stage, message)
        return kept_as_is(self.steps.live, plan, Action.SKIPPED, message)

    def _pending_removal(self, inventory: Inventory, run: StillRunning) -> InstanceResult:
        """The removal waits for an uninstall (or undo) Job: every object stays, no failure.

        The result is not a failure (no backoff: the next pass looks again soon);
        ``recorded`` makes its status Progressing/Uninstalling.
        """
        name = inventory.instance
        message = f"{run.message}; {name} is removed once it ends"
        self.running[name] = _Running("uninstall", message)
        kept = f"left as it is ({UNINSTALLING}: {run.job} runs)"
        entries = [
            ChangeSetEntry.for_ref(name, r, Action.SKIPPED, kept) for r in sorted(inventory.objects)
        ]
        return InstanceResult(name, ChangeSet.of(entries), None, message, inventory)

    def _stop_removal(self, inventory: Inventory, message: str) -> InstanceResult:
        name = inventory.instance
        ref = ObjectRef(*INSTANCE_KIND, inventory.namespace, name)
        kept = f"left as it is (uninstall stopped: {MIGRATION_FAILED})"
        entries = [ChangeSetEntry.for_ref(name, ref, Action.FAILED, message)] + [
            ChangeSetEntry.for_ref(name, r, Action.SKIPPED, kept) for r in sorted(inventory.objects)
        ]
        return InstanceResult(name, ChangeSet.of(entries), MIGRATION_FAILED, message, inventory)


def _failure_text(record: MigrationRecord, version: AppVersion | None = None) -> str:
    text = describe_migration(record.to_dict())
    if record.phase == "pre" and version is not None:
        return f"{text}; nothing of {version.app} {version.key} was applied"
    if record.phase == "post":
        return f"{text}; {record.version} keeps running"
    return text


def _stalled(status: InstanceStatus, message: str) -> InstanceStatus:
    """``status`` Stalled by a failed post migration, keeping a ConflictingWriter condition."""
    kept = tuple(c for c in status.conditions if c.type == ConditionType.CONFLICTING_WRITER)
    return replace(
        status,
        phase=Phase.STALLED,
        reason=MIGRATION_FAILED,
        message=message,
        conditions=conditions_for(Phase.STALLED, MIGRATION_FAILED, message) + kept,
    )


__all__ = [
    "DEFAULT_LEDGER_NAMESPACE",
    "MIGRATING",
    "MIGRATION_FAILED",
    "MIGRATION_LOOK",
    "UNINSTALLING",
    "MigrationEvent",
    "MigrationHooks",
]
