"""Run one migration against the cluster and keep the ledgers: the steps ``migrating`` composes.

:class:`MigrationSteps` is what a pass's migration hooks
(``reconciler.daemon.migrating``) call for each migration: build its ``ctx``, run
it through ``reconciler.migrations`` (Jobs with ``reconciler.kube.KubeJobRunner``,
kept inside ``cluster.yaml``'s namespaces), and append the outcome to the ledger
ConfigMaps in the cluster right away, so a reconciler that stops mid-pass never
runs a finished migration twice.

A daemon pass gives Jobs a short grace shared by the whole pass (``job_grace``,
the pass's ``--health-grace``): every Job waits at most what is left of it, so a
pass is delayed by Job migrations that long at most however many run. A Job still
running then is :class:`~reconciler.migrations.StillRunning` (the caller records
nothing and looks again on a later pass, which takes the Job over). ``apply``
passes no grace and waits for each Job to its end.

Ledgers are read from the pass's ``LiveState`` (its ConfigMap list already holds
them: they carry the ``managed-by`` label), so considering migrations costs no
request. The cluster's global ledger, ``reconciler-migrations--global``, is found
by its labels wherever it was first written, else written to the reconciler's
own namespace (``reconciler-system`` by default): it is the reconciler's
bookkeeping, like its leader Lease, not an object of any instance.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from reconciler.kube import ClusterUnreachable, KubeClient, Limits, LiveState, read_refused
from reconciler.migrations import (
    GLOBAL_NAME,
    Component,
    JobOutcome,
    JobRunner,
    MigrationContext,
    MigrationRun,
    Registry,
    Runtime,
    StillRunning,
    advance_migration,
    advance_undo,
    ledger_configmap,
    ledger_from_configmap,
    ledger_name,
    utc_now,
)
from reconciler.migrations.ledger import CLUSTER_LABEL, LEDGER_LABEL, NAME_PREFIX
from reconciler.model.catalog import AppVersion, Instance, Migration
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError
from reconciler.model.migrations import (
    FAILED,
    SUCCEEDED,
    UNDO,
    MigrationLedger,
    MigrationRecord,
)
from reconciler.status import describe_migration

log = logging.getLogger("reconciler.daemon")

DEFAULT_LEDGER_NAMESPACE = "reconciler-system"
_MANAGED = {"app.kubernetes.io/managed-by": "reconciler"}


class MigrationSteps:
    """Runs migrations on one cluster for one pass and keeps its ledgers current."""

    def __init__(
        self,
        client: KubeClient,
        live: LiveState,
        cluster: str,
        *,
        registry: Registry,
        job_runner: JobRunner,
        limits: Limits,
        ledger_namespace: str = DEFAULT_LEDGER_NAMESPACE,
        job_grace: float | None = None,
        images: Callable[[AppVersion], Mapping[str, str] | None] = lambda version: None,
    ) -> None:
        self.client = client
        self.images = images  # a version's images with its pinned builds (SPEC section 8)
        self.live = live
        self.cluster = cluster
        self.registry = registry
        self.limits = limits
        self.ledger_namespace = ledger_namespace
        self.components: tuple[Component, ...] = ()  # RECONCILER_COMPONENTS of this pass
        self._jobs = _WithinLimits(job_runner, _weakly(self.prepare), job_grace)
        self._reader = _LimitedReader(client, limits)
        self._ledgers: dict[str, MigrationLedger] = {}
        # (namespace, name) of every ledger ConfigMap the pass's view holds, when asked
        self._ledger_names: set[tuple[str, str]] | None = None
        self._global: MigrationLedger | None = None
        self._global_namespace = ""
        self._ready: set[str] = set()

    # -- running ----------------------------------------------------------------------

    def execute(
        self,
        migration: Migration,
        version: AppVersion,
        instance: Instance,
        phase: str,
        checksum: str,
        deployed: str | None,
    ) -> MigrationRun | StillRunning:
        """Check and run one migration; its run (never raises for the migration itself).

        :class:`StillRunning` when its Job outlived the pass's grace: nothing to record.
        """
        to = version.key if phase != "uninstall" else None
        run = advance_migration(
            migration,
            version,
            instance,
            self._context(migration, instance, phase, deployed, to),
            checksum=checksum,
            deployed_version=deployed,
            runtime=Runtime(self._reader, self.registry, self._jobs, images=self.images),
            wait=self._jobs.wait(),
        )
        if isinstance(run, StillRunning):
            return run
        for warning in run.warnings:
            log.warning(
                "migration %s (%s, %s): %s",
                migration.name,
                phase,
                version.key,
                warning,
                extra={"cluster": self.cluster, "instance": instance.name},
            )
        return replace(run, record=replace(run.record, from_version=deployed))

    def undo(
        self,
        migration: Migration,
        version: AppVersion,
        applied: MigrationRecord,
        instance: Instance,
        deployed: str | None,
    ) -> MigrationRecord | StillRunning:
        """Reverse ``applied`` with ``version``'s definition; an ``undo`` record."""
        started = utc_now()
        done = advance_undo(
            migration,
            version,
            instance,
            self._context(migration, instance, UNDO, deployed, None),
            runtime=Runtime(self._reader, self.registry, self._jobs, images=self.images),
            wait=self._jobs.wait(),
        )
        if isinstance(done, StillRunning):
            return done
        ok, message, duration, began = done
        return MigrationRecord(
            name=migration.name,
            version=version.key,
            checksum=applied.checksum,
            phase=UNDO,
            scope="app",
            started_at=began or started,
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
        return MigrationContext(
            client=self.client,
            cluster=self.cluster,
            instance="" if migration.scope == "global" else instance.name,
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

    # -- ledgers ----------------------------------------------------------------------

    def ledger(self, instance: str, namespace: str) -> MigrationLedger:
        """The instance's ledger: this pass's copy, else its ConfigMap.

        Raises ``LedgerFormatError`` when the ConfigMap cannot be read: whether a
        migration already ran is then unknown, and the caller must not guess.
        """
        if instance in self._ledgers:
            return self._ledgers[instance]
        obj = self.live.get(app_ledger_ref(instance, namespace))
        ledger = MigrationLedger("app", instance) if obj is None else ledger_from_configmap(obj)
        self._ledgers[instance] = ledger
        return ledger

    def recorded_ledger(self, instance: str, namespace: str) -> MigrationLedger | None:
        """The instance's ledger when it has one (as :meth:`ledger`), else None.

        Asked of every instance a pass records, most of which never ran a migration:
        their absence is told from one scan of the pass's ConfigMaps, with no
        reference, look-up or empty ledger made per instance. Raises as :meth:`ledger`.
        """
        if instance in self._ledgers:
            return self._ledgers[instance]
        if (namespace, NAME_PREFIX + instance) not in self._listed_ledgers():
            return None  # written this pass, it would be in ``_ledgers``
        return self.ledger(instance, namespace)

    def any_recorded_ledger(self) -> bool:
        """False when :meth:`recorded_ledger` is None for every instance: the cluster
        holds no ledger and the pass wrote none (a catalog without migrations), so the
        records need no look-up per instance."""
        return bool(self._ledgers) or bool(self._listed_ledgers())

    def _listed_ledgers(self) -> set[tuple[str, str]]:
        """(namespace, name) of each ledger ConfigMap in the pass's view: one scan."""
        if self._ledger_names is None:
            configmaps = self.live.kind_of(ObjectRef("v1", "ConfigMap", "", ""))
            self._ledger_names = {
                (ref.namespace, ref.name) for ref in configmaps if ref.name.startswith(NAME_PREFIX)
            }
        return self._ledger_names

    def global_ledger(self) -> MigrationLedger:
        """The cluster's ledger, wherever it was first written (raises if broken).

        Looked up in the pass's ConfigMaps at its usual place first (no request),
        else by its labels in every namespace (one list). A pass that lists only the
        cluster's allowed namespaces (``LiveState.scope``) may not list across all of
        them either: it reads the usual place (one GET, which the reconciler's Role in
        its own namespace allows).
        """
        if self._global is None:
            usual = ObjectRef("v1", "ConfigMap", self.ledger_namespace, GLOBAL_NAME)
            obj = self.live.get(usual)
            if obj is None or _labels(obj).get(CLUSTER_LABEL) != self.cluster:
                if self.live.scope is None:
                    selector = f"{LEDGER_LABEL}=global,{CLUSTER_LABEL}={self.cluster}"
                    found = self.client.list("v1", "ConfigMap", label_selector=selector)
                else:
                    found = [o for o in [self.client.get(usual)] if o is not None]
                obj = next(
                    (
                        o
                        for o in found
                        if o["metadata"].get("name") == GLOBAL_NAME
                        and _labels(o).get(CLUSTER_LABEL) == self.cluster
                    ),
                    None,
                )
            self._global = MigrationLedger("global", self.cluster)
            if obj is not None:
                self._global_namespace = str(obj["metadata"]["namespace"])
                self._global = ledger_from_configmap(obj)
        return self._global

    def append(self, instance: str, namespace: str, record: MigrationRecord) -> str:
        """Add ``record`` to the instance's ledger and write it; a write failure's text."""
        ledger = self._ledgers.get(instance) or MigrationLedger("app", instance)
        self._ledgers[instance] = ledger.with_record(record)
        log_run(self.cluster, instance, record)
        return self._write(self._ledgers[instance], namespace)

    def append_global(self, record: MigrationRecord) -> str:
        """Add ``record`` to the cluster's ledger and write it; a failure's text."""
        self._global = self.global_ledger().with_record(record)
        self._global_namespace = self._global_namespace or self.ledger_namespace
        return self.prepare(self._global_namespace, limited=False) or self._write(
            self._global, self._global_namespace
        )

    def forget(self, instance: str, namespace: str) -> None:
        """Delete an uninstalled instance's ledger ConfigMap (best effort, logged)."""
        ref = app_ledger_ref(instance, namespace)
        try:
            if self.live.get(ref) is not None:
                self.client.delete(ref)
                self.live.forget(ref)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            log.warning("cannot delete %s: %s", ref, e, extra={"cluster": self.cluster})

    def _write(self, ledger: MigrationLedger, namespace: str) -> str:
        cm = ledger_configmap(ledger, self.cluster, namespace)
        try:
            self.live.remember(self.client.apply(cm, force=True).body)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            return f"the migration ledger {ledger_name(ledger)} cannot be written: {e}"
        return ""

    def prepare(self, namespace: str, *, limited: bool = True) -> str:
        """Make sure ``namespace`` exists before a Job or a ledger goes there; else why not.

        An instance's first install runs its pre migrations before apply would
        create its namespace. ``limited``: the namespace must be one ``cluster.yaml``
        allows (the reconciler's own namespace is not an instance's).
        """
        if not namespace or namespace in self._ready:
            return ""
        if limited and not self.limits.namespace_allowed(namespace):
            return (
                f'namespace "{namespace}" is not allowed in this cluster '
                f"(cluster.yaml allowedNamespaces: [{self.limits.describe_namespaces()}])"
            )
        try:
            if not self.live.namespace_exists(namespace):
                meta = {"name": namespace, "labels": dict(_MANAGED)}
                body = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
                self.live.remember(self.client.apply(body).body)
        except ClusterUnreachable:
            raise
        except KubeError as e:
            return f"namespace {namespace} cannot be created for a migration: {e}"
        self._ready.add(namespace)
        return ""


def _weakly(method: Callable[[str], str]) -> Callable[[str], str]:
    """``method``, without keeping its object alive.

    ``MigrationSteps`` keeps its Job runner, which calls back ``prepare``: a bound
    method held there would make a reference cycle, which only the cyclic garbage
    collector frees, and the daemon holds that collector off while a pass runs
    (``daemon.loop``), so the pass's steps, every instance's ledger and the pass's
    view of the cluster would stay allocated until the pass ended instead of when
    the pass lets go of them.
    """
    ref = weakref.WeakMethod(method)

    def call(namespace: str) -> str:
        bound = ref()
        return bound(namespace) if bound is not None else "the pass that ran it has ended"

    return call


class ReadRefused(KubeError):
    """A migration check asked for an object outside the cluster's limits."""


class _LimitedReader:
    """The cluster as migration checks read it: only inside ``cluster.yaml``'s limits.

    Validation refuses such a check already; this holds even for a catalog that
    skipped it, so a Secret of another namespace is never read into a record.
    """

    def __init__(self, client: KubeClient, limits: Limits) -> None:
        self._client = client
        self._limits = limits

    def get(self, ref: ObjectRef) -> Mapping[str, Any] | None:
        namespaced = self._client.resource(ref.api_version, ref.kind).namespaced
        refused = read_refused(ref, self._limits, namespaced=namespaced)
        if refused is not None:
            raise ReadRefused(refused)
        return self._client.get(ref)


class _WithinLimits:
    """A Job runner whose Jobs go only to namespaces ``cluster.yaml`` allows (made if missing).

    It also keeps the pass's shared grace: ``grace`` seconds of waiting for Jobs in
    all (None: no limit, each Job is waited for to its end).
    """

    def __init__(
        self, runner: JobRunner, prepare: Callable[[str], str], grace: float | None = None
    ) -> None:
        self._runner = runner
        self._prepare = prepare
        self._left = grace

    def wait(self) -> float | None:
        """Seconds the next Job may be waited for (None: to its end)."""
        return None if self._left is None else max(0.0, self._left)

    def run_job(self, job: Mapping[str, Any], timeout: float) -> JobOutcome:
        namespace = str((job.get("metadata") or {}).get("namespace", ""))
        trouble = self._prepare(namespace)
        if trouble:
            return JobOutcome(False, 0.0, f"{ObjectRef.of(job)}: {trouble}")
        began = time.monotonic()
        try:
            return self._runner.run_job(job, timeout)
        finally:
            if self._left is not None:
                self._left -= time.monotonic() - began


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def app_ledger_ref(instance: str, namespace: str) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", namespace, ledger_name(MigrationLedger("app", instance)))


def log_run(cluster: str, instance: str, record: MigrationRecord) -> None:
    """One line per run with its durations, as fields for JSON logs."""
    log.log(
        logging.WARNING if record.outcome == FAILED else logging.INFO,
        "%s (check %.3fs)",
        describe_migration(record.to_dict()),
        record.check_duration,
        extra={
            "cluster": cluster,
            "instance": instance,
            "migration": record.name,
            "migration_phase": record.phase,
            "outcome": record.outcome,
            "duration": record.duration,
            "check_duration": record.check_duration,
        },
    )


__all__ = ["DEFAULT_LEDGER_NAMESPACE", "MigrationSteps", "app_ledger_ref", "log_run"]
