"""``diff`` and ``apply``: compare a cluster with the catalog, or make it equal, once.

Each command composes the stages and prints results; no logic of its own:
load the catalog, connect like kubectl, read deployed versions from the
cluster's inventories, ``plan_cluster``, then per instance ``diff_instance`` or
``apply_instance`` (``reconciler.kube``). An instance whose plan fails (broken
files, unresolvable selection, blocked downgrade) keeps its objects as they are
and makes the command exit 1, while every other instance is still handled.
Instances deleted from Git are uninstalled (their objects pruned), unless the
commit removes more instances than ``prune.maxRemovedInstances`` allows.
``apply`` runs migration hooks as the daemon does (``reconciler.daemon.migrating``)
and prints each run under its instance.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from reconciler.catalog import load_catalog
from reconciler.commands.connect import connect
from reconciler.commands.output import Style, eprint, is_data, print_data
from reconciler.daemon.applying import (
    INSTANCE_KIND,
    apply_plans,
    instance_target,
    remove_deleted,
)
from reconciler.daemon.keeplimits import keep_limits
from reconciler.daemon.migrating import MigrationHooks
from reconciler.daemon.plan import InstancePlan, plan_cluster, require_cluster
from reconciler.kube import (
    ApplyOptions,
    ClusterUnreachable,
    HealthReport,
    InstanceResult,
    InstanceTarget,
    KubeClient,
    Limits,
    LiveState,
    ObjectDiff,
    diff_instance,
    inventory_written,
)
from reconciler.model.catalog import Catalog, ClusterEntry
from reconciler.model.changeset import ChangeSet, ObjectRef
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, ReconcilerError, UsageError
from reconciler.status import describe_migration


def apply_command(args: argparse.Namespace) -> int:
    """Apply every instance of ``--cluster``; exit 1 if any instance failed.

    With ``--wait``, an instance that is not healthy by ``--timeout`` counts as failed.
    """
    catalog, entry = _load(args)
    options = ApplyOptions(
        limits=Limits.of(entry.cluster),
        force_conflicts=bool(getattr(args, "force_conflicts", False)),
        allow_empty_prune=bool(getattr(args, "allow_empty_prune", False)),
        allow_mass_prune=bool(getattr(args, "allow_mass_prune", False)),
    )
    with _connected(args, entry) as (client, live):
        catalog = keep_limits(catalog, args.cluster, client, live)  # limits never dropped
        entry = catalog.clusters[args.cluster]
        deployed = live.deployed_versions(entry.instances)
        plans = plan_cluster(catalog, args.cluster, deployed)
        hooks = MigrationHooks.begin(
            client, live, catalog, plans, deployed, cluster=args.cluster, limits=options.limits
        )
        applied = apply_plans(client, live, plans, options, before=hooks.before_apply)
        hooks.after_health(plans, applied)  # waits only for instances with post migrations
        blocked = catalog.cluster_errors(args.cluster)
        results = applied + remove_deleted(client, live, entry, options, hooks, blocked=blocked)
        failed = live.flush_inventories()  # the perNamespace layout's, one per namespace
        results = [inventory_written(r, failed) for r in results]
        changes = ChangeSet.of(e for r in results for e in r.changes.entries)
        if is_data(args.output):
            print_data([e.to_dict() for e in changes.entries], args.output)
        else:
            _print_apply(args, results, changes, hooks)
        # after the report, so what was applied is on screen while it becomes healthy
        healths = _wait(args, client, plans, applied) if args.wait else []
    unhealthy = [h for h in healths if h is not None and not h.healthy]
    ok = all(r.ok for r in results) and not hooks.post_failed and not unhealthy
    return EXIT_OK if ok else EXIT_PROBLEMS


def _wait(
    args: argparse.Namespace,
    client: KubeClient,
    plans: list[InstancePlan],
    results: list[InstanceResult],
) -> list[HealthReport | None]:
    """``--wait``: progress goes to stdout with text output, else to stderr (stdout is data)."""
    from reconciler.commands.waiting import wait_for_instances

    out = sys.stderr if is_data(args.output) else sys.stdout
    style = Style.of(args, out)
    return wait_for_instances(client, plans, results, args.timeout, out, style=style)


def diff_command(args: argparse.Namespace) -> int:
    """Print a unified diff per object that differs; exit 1 when anything differs.

    Like ``kubectl diff``, 1 means only "differs": an error that stops the diff
    (a request the API server refuses, a catalog that cannot be read) exits 2,
    so ``reconciler diff || deploy`` never deploys because of an error.
    """
    try:
        return _diff(args)
    except UsageError:
        raise
    except ReconcilerError as e:
        raise UsageError(f"diff failed: {e}") from e


def _diff(args: argparse.Namespace) -> int:
    catalog, entry = _load(args)
    namespace = getattr(args, "namespace", None)
    options = ApplyOptions(limits=Limits.of(entry.cluster))
    diffs: list[ObjectDiff] = []
    show = bool(args.show_secrets)
    with _connected(args, entry) as (client, live):
        plans = plan_cluster(catalog, args.cluster, live.deployed_versions(entry.instances))
        for plan in plans:
            if plan.instance.suspend or namespace not in (None, plan.instance.namespace):
                continue
            if not plan.ok:
                diffs.append(_plan_error(plan))
                continue
            target = instance_target(args.cluster, plan)
            diffs += diff_instance(client, target, options, live, show_secrets=show)
        for name, inventory in sorted(live.inventories().items()):
            if name not in entry.instances and namespace in (None, inventory.namespace):
                target = InstanceTarget(args.cluster, name, inventory.namespace, ())
                diffs += diff_instance(
                    client, target, options, live, show_secrets=args.show_secrets
                )
    if is_data(args.output):
        print_data([d.to_dict() for d in diffs], args.output)
    else:
        _print_diffs(diffs, Style.of(args))
    return EXIT_PROBLEMS if diffs else EXIT_OK


def _load(args: argparse.Namespace) -> tuple[Catalog, ClusterEntry]:
    catalog = load_catalog(args.catalog)
    require_cluster(catalog, args.cluster)
    return catalog, catalog.clusters[args.cluster]


@contextmanager
def _connected(
    args: argparse.Namespace, entry: ClusterEntry
) -> Iterator[tuple[KubeClient, LiveState]]:
    """A client and the pass's live view; an unreachable cluster is an environment error."""
    with connect(args) as client:
        try:
            scope = Limits.of(entry.cluster).listed_namespaces()
            yield (
                client,
                LiveState(
                    client,
                    args.cluster,
                    entry.namespaces,
                    scope=scope,
                    layout=entry.cluster.inventory,
                ),
            )
        except ClusterUnreachable as e:
            raise UsageError(str(e)) from e


def _plan_error(plan: InstancePlan) -> ObjectDiff:
    inst = plan.instance
    ref = ObjectRef(*INSTANCE_KIND, inst.namespace, inst.name)
    message = f"{plan.reason}: {plan.message or 'cannot plan this instance'}"
    return ObjectDiff(inst.name, ref, "error", "", message)


def _print_apply(
    args: argparse.Namespace,
    results: list[InstanceResult],
    changes: ChangeSet,
    hooks: MigrationHooks,
) -> None:
    style = Style.of(args)
    for result in results:
        failed = f"failed ({result.reason or 'ApplyFailed'})"
        status = "" if result.ok else " " + style.paint(failed, "red")
        print(f"{result.instance}:{status}")
        for event in hooks.events:
            if event.instance == result.instance:
                print(f"  {describe_migration(event.record.to_dict())}")
        for e in result.changes.entries:
            print(f"  {e}")
        if not result.ok and result.message:
            eprint(f"reconciler: {result.instance}: {result.message}")
        if result.instance in hooks.post_failed:
            eprint(f"reconciler: {result.instance}: {hooks.post_failed[result.instance]}")
    count = sum(1 for r in results if not r.ok)
    tail = f", {count} failed" if count else ""
    print(f"apply: {len(results)} instances{tail}; objects: {changes.summary()}")


def _print_diffs(diffs: list[ObjectDiff], style: Style) -> None:
    for d in diffs:
        if d.change == "error":
            eprint(f"reconciler: {d.instance}: {d.message}")
            continue
        print(style.paint(f"# {d.ref} (instance {d.instance}): {d.change}", "blue"))
        for line in d.diff.splitlines() or [""]:
            print(style.diff_line(line))
    changed = sum(1 for d in diffs if d.change != "error")
    errors = len(diffs) - changed
    tail = f", {errors} error(s)" if errors else ""
    print(f"diff: {changed} object(s) differ{tail}")
