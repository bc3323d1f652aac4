"""Migration hooks in a pass (SPEC section 5): when they run, and what the pass records.

The daemon's pass and ``apply`` call :class:`MigrationHooks` at four points:

1. ``MigrationHooks.begin``: before any instance changes, the ``global`` ``pre``
   migrations of the versions this pass moves instances to (once per cluster, with
   the list of every instance about to change in ``RECONCILER_COMPONENTS``). A
   failed one stops every upgrade of the pass; unchanged instances are still synced.
2. ``before_apply(plan)``: just before an instance's version changes (an install or
   one step of an upgrade path), its version's ``app`` ``pre`` migrations. A failed
   one applies nothing of the new version: the instance is ``Failed`` with reason
   ``MigrationFailed`` and the migration's message, backs off like any failure, and
   is retried after the backoff or when its inputs change. Other instances go on.
3. ``after_health(...)``: once the instance is healthy at the version this pass
   moved it to, its ``post`` migrations (``app``, then ``global``); a failed one
   leaves the new version running and the instance ``Stalled``/``MigrationFailed``
   (retried after the backoff: the ledger shows it failed).
4. ``before_prune``/``after_prune`` (an :class:`~reconciler.daemon.applying.Uninstaller`):
   an instance whose file was deleted runs its version's ``uninstall`` migrations,
   then the ``undo`` of every migration its ledger records as applied, newest first,
   each from the catalog version that applied it; any failure keeps every object
   for a retry. After the prune its ledger ConfigMap goes too, so a later install
   starts afresh (everything was undone).

Once only: each outcome is appended to the instance's ledger (``global`` ones to the
cluster's, and copied to the ledger of the instance whose change ran them, so its
status shows them) and the ledger ConfigMap is written after every run; ledgers are
read from the pass's ``LiveState`` (no extra request). ``recorded`` puts each
instance's ledger into its ``InstanceStatus.migrations`` and returns the events:
one per run, each with the status to commit for it, so every run is its own status
commit (``Reconciler-Migration`` trailer) before the change it served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.daemon.applying import INSTANCE_KIND, kept_as_is
from reconciler.daemon.plan import InstancePlan
from reconciler.kube import (
    ClusterUnreachable,
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
    GLOBAL_NAME,
    Component,
    JobOutcome,
    JobRunner,
    MigrationContext,
    Registry,
    Runtime,
    execute_migration,
    ledger_configmap,
    ledger_from_configmap,
    ledger_name,
    pending,
    plan_uninstall,
    undo_migration,
    utc_now,
)
from reconciler.migrations.ledger import CLUSTER_LABEL, LEDGER_LABEL
from reconciler.model.catalog import AppVersion, Catalog, Instance, Migration
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.errors import KubeError
from reconciler.model.migrations import (
    FAILED,
    SUCCEEDED,
    UNDO,
    LedgerFormatError,
    MigrationLedger,
    MigrationRecord,
)
from reconciler.model.status import (
    ConditionType,
    InstanceStatus,
    Phase,
    conditions_for,
)
from reconciler.status import describe_migration

log = logging.getLogger("reconciler.daemon")

MIGRATION_FAILED = "MigrationFailed"
MIGRATING = "Migrating"
UNINSTALLING = "Uninstalling"
DEFAULT_LEDGER_NAMESPACE = "reconciler-system"  # where the cluster's global ledger lives
_NAMESPACE_LABELS = {"app.kubernetes.io/managed-by": "reconciler"}


@dataclass(frozen=True)
class MigrationEvent:
    """One run of a pass: for the log, the metric, and its own status commit.

    ``stage`` is when it ran (``pre``, ``post``, ``uninstall``; ``global`` runs are
    told by ``record.scope``); ``statuses`` are the records to commit for it, in
    order (filled by :meth:`MigrationHooks.recorded`).
    """

    instance: str
    record: MigrationRecord
    stage: str
    upto: tuple[MigrationRecord, ...]  # the instance's ledger right after this run
    statuses: tuple[InstanceStatus, ...] = ()

    @property
    def seconds(self) -> float:
        return self.record.duration + self.record.check_duration


@dataclass
class _Uninstall:
    inventory: Inventory
    instance: Instance


@dataclass
class MigrationHooks:
    """The migration side of one pass over one cluster (see the module docstring)."""

    client: KubeClient
    live: LiveState
    catalog: Catalog
    cluster: str
    limits: Limits = field(default_factory=Limits)
    registry: Registry = field(default_factory=Registry.installed)
    job_runner: JobRunner | None = None
    ledger_namespace: str = DEFAULT_LEDGER_NAMESPACE
    health_timeout: float = 120.0
    deployed: Mapping[str, str] = field(default_factory=dict)
    changing: dict[str, InstancePlan] = field(default_factory=dict)
    components: tuple[Component, ...] = ()
    events: list[MigrationEvent] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # instance -> why its change stopped
    post_failed: dict[str, str] = field(default_factory=dict)  # instance -> message
    global_failure: str = ""
    _ledgers: dict[str, MigrationLedger] = field(default_factory=dict)
    _global: MigrationLedger | None = None
    _global_namespace: str = ""
    _ready_namespaces: set[str] = field(default_factory=set)
    _uninstalls: dict[str, _Uninstall] = field(default_factory=dict)

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
    ) -> MigrationHooks:
        """The hooks of a pass, after running the global ``pre`` migrations it needs.

        ``held`` instances (backing off) change nothing this pass; ``limits`` are
        ``cluster.yaml``'s (a migration Job obeys them like a manifest).
        """
        hooks = cls(
            client,
            live,
            catalog,
            cluster,
            limits=limits or Limits(),
            registry=registry or Registry.installed(),
            job_runner=job_runner or KubeJobRunner(client),
            ledger_namespace=ledger_namespace,
            health_timeout=health_timeout,
            deployed=dict(deployed),
        )
        skip = set(held)
        hooks.changing = {
            p.name: p
            for p in plans
            if p.name not in skip
            and p.ok
            and not p.instance.suspend
            and p.version is not None
            and p.version.key != deployed.get(p.name)
        }
        present = catalog.clusters[cluster].instances if cluster in catalog.clusters else {}
        hooks.components = tuple(
            Component(p.name, p.instance.app, deployed.get(p.name), p.version.key)
            for p in hooks.changing.values()
            if p.version is not None
        ) + tuple(
            Component(name, inv.app, inv.version or None, None)
            for name, inv in sorted(live.inventories().items())
            if name not in present
        )
        hooks._run_global("pre", list(hooks.changing.values()))
        return hooks

    # -- the four hooks -----------------------------------------------------------------

    def before_apply(self, plan: InstancePlan) -> InstanceResult | None:
        """Run ``plan``'s pre migrations; a result (Failed, MigrationFailed) stops its apply."""
        if plan.name not in self.changing:
            return None
        if self.global_failure:
            return self._stop(plan, self.global_failure)
        assert plan.version is not None
        message = self._run_app(plan, plan.version, "pre", self.deployed.get(plan.name))
        if message:
            return self._stop(plan, message)
        return None

    def after_health(
        self,
        plans: Sequence[InstancePlan],
        results: Sequence[InstanceResult],
        healths: Sequence[HealthReport | None] | None = None,
    ) -> None:
        """Post migrations of every instance this pass moved and found healthy.

        Without ``healths`` (``apply`` waits for nothing else) the instances that have
        post migrations to run are waited for here, up to ``health_timeout``.
        A failed post migration is also retried in a later pass, once the instance
        is healthy and its backoff is over.
        """
        for i, (plan, result) in enumerate(zip(plans, results, strict=True)):
            version = plan.version
            if version is None or not result.ok or plan.instance.suspend or not plan.ok:
                continue
            due, before = self._post_due(plan, version)
            if not due:
                continue
            health = healths[i] if healths is not None else self._wait(plan)
            if health is None or not health.healthy:
                continue
            message = self._run_app(plan, version, "post", before)
            if not message:
                message = self._run_global("post", [plan], before)
            if message:
                self.post_failed[plan.name] = message

    def before_prune(self, inventory: Inventory) -> InstanceResult | None:
        """Uninstall migrations, then undo steps; a failure keeps the instance for a retry."""
        name = inventory.instance
        instance = Instance(name, self.cluster, inventory.app, inventory.namespace)
        self._uninstalls[name] = _Uninstall(inventory, instance)
        try:
            ledger = self._ledger(name, inventory.namespace)
        except LedgerFormatError as e:
            return self._stop_removal(inventory, str(e))
        entry = self.catalog.apps.get(inventory.app)
        versions = entry.versions if entry is not None else {}
        current = versions.get(inventory.version)
        mine = MigrationLedger("app", name, tuple(r for r in ledger.records if r.scope == "app"))
        if current is None and not mine.applied():
            if inventory.version:
                log.warning(
                    "uninstalling %s: %s %s is not in the catalog; its uninstall migrations "
                    "are unknown and its ledger has nothing to undo",
                    name,
                    inventory.app,
                    inventory.version,
                    extra={"cluster": self.cluster, "instance": name},
                )
            return None
        plan = plan_uninstall(current, mine, versions)
        if not plan.ok:
            return self._stop_removal(inventory, "cannot uninstall: " + "; ".join(plan.errors))
        deployed = inventory.version or None
        if current is not None:
            runs, _ = pending(current, "uninstall", "app", mine, self.registry.distributions())
            for p in runs:
                record = self._execute(
                    p.migration, current, instance, "uninstall", p.checksum, deployed
                )
                self._append(name, instance.namespace, record, "uninstall")
                if record.outcome == FAILED:
                    return self._stop_removal(inventory, _failure_text(record, "uninstall"))
        for step in plan.undo:
            record = self._undo(step.migration, step.version, step.record, instance, deployed)
            self._append(name, instance.namespace, record, "uninstall")
            if record.outcome == FAILED:
                return self._stop_removal(inventory, _failure_text(record, "uninstall"))
        return None

    def after_prune(self, result: InstanceResult) -> None:
        """The instance is gone: so is its ledger ConfigMap (everything was undone)."""
        removal = self._uninstalls.get(result.instance)
        if not result.ok or removal is None:
            return
        ref = ObjectRef(
            "v1", "ConfigMap", removal.inventory.namespace, _app_ledger_name(result.instance)
        )
        try:
            if self.live.get(ref) is not None:
                self.client.delete(ref)
                self.live.forget(ref)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            log.warning("cannot delete %s: %s", ref, e, extra={"cluster": self.cluster})

    # -- what the pass records -------------------------------------------------------

    def recorded(
        self, statuses: Sequence[InstanceStatus], held: Iterable[str] = ()
    ) -> tuple[InstanceStatus, ...]:
        """``statuses`` with their ledgers and migration verdicts; fills each event's statuses."""
        skip = set(held)
        finals: dict[str, InstanceStatus] = {}
        healthy: dict[str, InstanceStatus] = {}
        out = []
        for status in statuses:
            if status.instance not in skip:
                status = self._with_ledger(status)
                healthy[status.instance] = status
                if status.instance in self.post_failed:
                    status = _verdict(status, Phase.STALLED, self.post_failed[status.instance])
            finals[status.instance] = status
            out.append(status)
        self._fill_events(finals, healthy)
        return tuple(out)

    def _fill_events(
        self, finals: Mapping[str, InstanceStatus], healthy: Mapping[str, InstanceStatus]
    ) -> None:
        first_post: set[str] = set()
        for i, event in enumerate(self.events):
            final = finals.get(event.instance)
            if final is None:
                continue
            upto = tuple(r.to_dict() for r in event.upto)
            statuses: tuple[InstanceStatus, ...] = ()
            if event.stage == "post" and event.instance not in first_post:
                # the change itself, healthy, before its post migrations ran
                first_post.add(event.instance)
                before = tuple(r.to_dict() for r in event.upto[:-1])
                statuses = (replace(healthy[event.instance], migrations=before or None),)
            if event.record.outcome == FAILED:
                statuses += (replace(final, migrations=upto),)
            elif event.stage == "post":
                statuses += (replace(healthy[event.instance], migrations=upto),)
            else:
                statuses += (self._in_progress(final, event, upto),)
            self.events[i] = replace(event, statuses=statuses)

    def _in_progress(
        self, final: InstanceStatus, event: MigrationEvent, upto: tuple[Mapping[str, Any], ...]
    ) -> InstanceStatus:
        """The instance while a change is under way: still at what ran before it."""
        objects = final.objects
        if event.stage == "uninstall":
            removal = self._uninstalls[event.instance]
            version, reason = removal.inventory.version or None, UNINSTALLING
            objects = len(removal.inventory.objects)
        else:
            version, reason = self.deployed.get(event.instance), MIGRATING
        return replace(
            final,
            objects=objects,
            phase=Phase.PROGRESSING,
            version=version,
            reason=reason,
            message=describe_migration(event.record.to_dict()),
            conditions=(),
            migrations=upto,
        )

    def _with_ledger(self, status: InstanceStatus) -> InstanceStatus:
        namespace = self._namespace_of(status.instance)
        try:
            ledger = self._ledger(status.instance, namespace) if namespace else None
        except LedgerFormatError:
            return status  # reported where it blocks a change; the status keeps what it had
        if ledger is None or not ledger.records:
            return status
        return replace(status, migrations=tuple(r.to_dict() for r in ledger.records))

    def _namespace_of(self, instance: str) -> str:
        if instance in self._uninstalls:
            return self._uninstalls[instance].inventory.namespace
        entry = self.catalog.clusters.get(self.cluster)
        found = entry.instances.get(instance) if entry is not None else None
        if found is not None and found.namespace:
            return found.namespace
        inventory = self.live.inventory(instance)
        return inventory.namespace if inventory is not None else ""

    # -- running ----------------------------------------------------------------------

    def _run_app(
        self, plan: InstancePlan, version: AppVersion, phase: str, deployed: str | None
    ) -> str:
        """Run ``phase`` app migrations of ``version`` for ``plan``; a failure's message."""
        inst = plan.instance
        try:
            ledger = self._ledger(inst.name, inst.namespace)
        except LedgerFormatError as e:
            return f"the migration ledger cannot be read: {e}"
        runs, _ = pending(version, phase, "app", ledger, self.registry.distributions())
        for p in runs:
            trouble = self._prepare(inst.namespace)
            if trouble:
                return trouble
            record = self._execute(p.migration, version, inst, phase, p.checksum, deployed)
            trouble = self._append(inst.name, inst.namespace, record, phase)
            if record.outcome == FAILED:
                return _failure_text(record, phase, version)
            if trouble:
                return trouble
        return ""

    def _run_global(
        self, phase: str, plans: Sequence[InstancePlan], deployed: str | None = None
    ) -> str:
        """Run ``phase`` global migrations shipped by ``plans``' versions, each once."""
        seen: set[str] = set()
        for plan in plans:
            version, inst = plan.version, plan.instance
            if version is None or not any(
                m.scope == "global" and m.phase == phase for m in version.migrations
            ):
                continue
            try:
                ledger = self._global_ledger()
            except LedgerFormatError as e:
                return self._global_failed(f"the cluster's migration ledger cannot be read: {e}")
            runs, _ = pending(version, phase, "global", ledger, self.registry.distributions())
            for p in runs:
                if p.migration.name in seen:
                    continue
                seen.add(p.migration.name)
                trouble = self._prepare(inst.namespace) or self._prepare(
                    self._global_namespace or self.ledger_namespace, limited=False
                )
                if trouble:
                    return self._global_failed(trouble) if phase == "pre" else trouble
                before = deployed if phase == "post" else self.deployed.get(plan.name)
                record = self._execute(p.migration, version, inst, phase, p.checksum, before)
                trouble = self._append_global(record) or self._append(
                    inst.name, inst.namespace, record, phase
                )
                if record.outcome == FAILED:
                    text = _failure_text(record, phase, version)
                    return self._global_failed(text) if phase == "pre" else text
                if trouble:
                    return self._global_failed(trouble) if phase == "pre" else trouble
        return ""

    def _global_failed(self, message: str) -> str:
        self.global_failure = f"global {message}; no upgrade runs in this pass"
        return self.global_failure

    def _execute(
        self,
        migration: Migration,
        version: AppVersion,
        instance: Instance,
        phase: str,
        checksum: str,
        deployed: str | None,
    ) -> MigrationRecord:
        to = version.key if phase != "uninstall" else None
        ctx = self._context(migration, instance, phase, deployed, to)
        runtime = Runtime(self.client, self.registry, self._jobs())
        run = execute_migration(
            migration,
            version,
            instance,
            ctx,
            checksum=checksum,
            deployed_version=deployed,
            runtime=runtime,
        )
        for warning in run.warnings:
            log.warning(
                "migration %s (%s, %s): %s",
                migration.name,
                phase,
                version.key,
                warning,
                extra={"cluster": self.cluster, "instance": instance.name},
            )
        return replace(run.record, from_version=deployed)

    def _undo(
        self,
        migration: Migration,
        version: AppVersion,
        applied: MigrationRecord,
        instance: Instance,
        deployed: str | None,
    ) -> MigrationRecord:
        started = utc_now()
        ctx = self._context(migration, instance, UNDO, deployed, None)
        ok, message, duration = undo_migration(
            migration,
            version,
            instance,
            ctx,
            runtime=Runtime(self.client, self.registry, self._jobs()),
        )
        return MigrationRecord(
            name=migration.name,
            version=version.key,
            checksum=applied.checksum,
            phase=UNDO,
            scope="app",
            started_at=started,
            duration=round(duration, 3),
            check_duration=0.0,
            outcome=SUCCEEDED if ok else FAILED,
            message=message,
            from_version=deployed,
        )

    def _context(
        self,
        migration: Migration,
        instance: Instance,
        phase: str,
        deployed: str | None,
        to: str | None,
    ) -> MigrationContext:
        is_global = migration.scope == "global"
        return MigrationContext(
            client=self.client,
            cluster=self.cluster,
            instance="" if is_global else instance.name,
            namespace=instance.namespace,
            app=instance.app,
            from_version=deployed,
            to_version=to,
            phase=phase,
            migration=migration.name,
            deadline=time.monotonic() + migration.timeout_seconds,
            components=self.components,
            logger=logging.getLogger(f"reconciler.migrations.{migration.name}"),
        )

    def _jobs(self) -> JobRunner:
        assert self.job_runner is not None
        return _WithinLimits(self.job_runner, self._prepare)

    def _post_due(self, plan: InstancePlan, version: AppVersion) -> tuple[bool, str | None]:
        """Whether ``plan``'s post migrations are due, and what ran before the change.

        Due in the pass that moved the instance to ``version``, and in later passes
        while a post migration of ``version`` is recorded as failed (a retry, whose
        record keeps the version the change started from).
        """
        if not any(m.phase == "post" for m in version.migrations):
            return False, None
        if plan.name in self.changing:
            return True, self.deployed.get(plan.name)
        try:
            ledger = self._ledger(plan.name, plan.instance.namespace)
        except LedgerFormatError as e:
            self.post_failed[plan.name] = f"the migration ledger cannot be read: {e}"
            return False, None
        for m in version.migrations:
            if m.phase != "post" or ledger.settled(m.name):
                continue
            runs = ledger.current(m.name)
            if runs and runs[-1].outcome == FAILED and runs[-1].version == version.key:
                return True, runs[-1].from_version
        return False, None

    def _wait(self, plan: InstancePlan) -> HealthReport:
        refs = [ObjectRef.of(obj) for obj in plan.objects]
        return wait_healthy(self.client, refs, self.health_timeout, interval=0.5)

    # -- ledgers ----------------------------------------------------------------------

    def _ledger(self, instance: str, namespace: str) -> MigrationLedger:
        """The instance's ledger: this pass's copy, else its ConfigMap (raises if broken)."""
        if instance in self._ledgers:
            return self._ledgers[instance]
        obj = self.live.get(ObjectRef("v1", "ConfigMap", namespace, _app_ledger_name(instance)))
        ledger = MigrationLedger("app", instance) if obj is None else ledger_from_configmap(obj)
        self._ledgers[instance] = ledger
        return ledger

    def _global_ledger(self) -> MigrationLedger:
        """The cluster's ledger, wherever it was first written (raises if broken)."""
        if self._global is None:
            selector = f"{LEDGER_LABEL}=global,{CLUSTER_LABEL}={self.cluster}"
            found = [
                obj
                for obj in self.client.list("v1", "ConfigMap", label_selector=selector)
                if (obj.get("metadata") or {}).get("name") == GLOBAL_NAME
            ]
            if found:
                self._global_namespace = str(found[0]["metadata"]["namespace"])
                self._global = ledger_from_configmap(found[0])
            else:
                self._global = MigrationLedger("global", self.cluster)
        return self._global

    def _append(self, instance: str, namespace: str, record: MigrationRecord, stage: str) -> str:
        """Record ``record`` in the instance's ledger and its ConfigMap; a write failure's text."""
        ledger = self._ledgers.get(instance) or MigrationLedger("app", instance)
        ledger = ledger.with_record(record)
        self._ledgers[instance] = ledger
        self.events.append(MigrationEvent(instance, record, stage, ledger.records))
        self._log(instance, record)
        return self._write(ledger, namespace)

    def _append_global(self, record: MigrationRecord) -> str:
        self._global = self._global_ledger().with_record(record)
        self._global_namespace = self._global_namespace or self.ledger_namespace
        return self._write(self._global, self._global_namespace)

    def _write(self, ledger: MigrationLedger, namespace: str) -> str:
        cm = ledger_configmap(ledger, self.cluster, namespace)
        try:
            self.live.remember(self.client.apply(cm, force=True).body)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            return f"the migration ledger {ledger_name(ledger)} cannot be written: {e}"
        return ""

    def _prepare(self, namespace: str, *, limited: bool = True) -> str:
        """Make sure ``namespace`` exists before a Job or a ledger goes there."""
        if not namespace or namespace in self._ready_namespaces:
            return ""
        if limited and not self.limits.namespace_allowed(namespace):
            return (
                f'namespace "{namespace}" is not allowed in this cluster '
                f"(cluster.yaml allowedNamespaces: [{self.limits.describe_namespaces()}])"
            )
        try:
            if not self.live.namespace_exists(namespace):
                body = {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": namespace, "labels": dict(_NAMESPACE_LABELS)},
                }
                self.live.remember(self.client.apply(body).body)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            return f"namespace {namespace} cannot be created for a migration: {e}"
        self._ready_namespaces.add(namespace)
        return ""

    def _log(self, instance: str, record: MigrationRecord) -> None:
        level = logging.WARNING if record.outcome == FAILED else logging.INFO
        log.log(
            level,
            "%s (check %.3fs)",
            describe_migration(record.to_dict()),
            record.check_duration,
            extra={
                "cluster": self.cluster,
                "instance": instance,
                "migration": record.name,
                "phase": record.phase,
                "outcome": record.outcome,
                "duration": record.duration,
                "check_duration": record.check_duration,
            },
        )

    # -- results ----------------------------------------------------------------------

    def _stop(self, plan: InstancePlan, message: str) -> InstanceResult:
        self.blocked[plan.name] = message
        kept = kept_as_is(self.live, plan, Action.FAILED, message)
        return replace(kept, reason=MIGRATION_FAILED)

    def _stop_removal(self, inventory: Inventory, message: str) -> InstanceResult:
        name = inventory.instance
        ref = ObjectRef(*INSTANCE_KIND, inventory.namespace, name)
        entries = [ChangeSetEntry.for_ref(name, ref, Action.FAILED, message)]
        kept = f"left as it is (uninstall stopped: {MIGRATION_FAILED})"
        entries += [
            ChangeSetEntry.for_ref(name, r, Action.SKIPPED, kept) for r in sorted(inventory.objects)
        ]
        return InstanceResult(name, ChangeSet.of(entries), MIGRATION_FAILED, message, inventory)


class _WithinLimits:
    """A Job runner whose Jobs go only to namespaces ``cluster.yaml`` allows (made if missing)."""

    def __init__(self, runner: JobRunner, prepare: Callable[[str], str]) -> None:
        self._runner = runner
        self._prepare = prepare

    def run_job(self, job: Mapping[str, Any], timeout: float) -> JobOutcome:
        namespace = str((job.get("metadata") or {}).get("namespace", ""))
        trouble = self._prepare(namespace)
        if trouble:
            return JobOutcome(False, 0.0, f"{ObjectRef.of(job)}: {trouble}")
        return self._runner.run_job(job, timeout)


def _app_ledger_name(instance: str) -> str:
    return ledger_name(MigrationLedger("app", instance))


def _failure_text(record: MigrationRecord, stage: str, version: AppVersion | None = None) -> str:
    text = describe_migration(record.to_dict())
    if stage == "pre" and version is not None:
        return f"{text}; nothing of {version.app} {version.key} was applied"
    if stage == "post":
        return f"{text}; {record.version} keeps running"
    return text


def _verdict(status: InstanceStatus, phase: Phase, message: str) -> InstanceStatus:
    """``status`` with a migration verdict, keeping a ConflictingWriter condition."""
    kept = tuple(c for c in status.conditions if c.type == ConditionType.CONFLICTING_WRITER)
    return replace(
        status,
        phase=phase,
        reason=MIGRATION_FAILED,
        message=message,
        conditions=conditions_for(phase, MIGRATION_FAILED, message) + kept,
    )


__all__ = [
    "DEFAULT_LEDGER_NAMESPACE",
    "MIGRATING",
    "MIGRATION_FAILED",
    "UNINSTALLING",
    "MigrationEvent",
    "MigrationHooks",
]
