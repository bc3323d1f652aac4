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
from reconciler.commands.daemon import max_requests_in_flight
from reconciler.commands.output import eprint, print_json
from reconciler.daemon.applying import (
    INSTANCE_KIND,
    apply_plans,
    instance_target,
    remove_deleted,
)
from reconciler.daemon.migrating import MigrationHooks
from reconciler.daemon.plan import InstancePlan, plan_cluster, require_cluster
from reconciler.kube import (
    ApplyOptions,
    ClusterUnreachable,
    InstanceResult,
    InstanceTarget,
    KubeClient,
    Limits,
    LiveState,
    ObjectDiff,
    diff_instance,
)
from reconciler.model.catalog import Catalog, ClusterEntry
from reconciler.model.changeset import ChangeSet, ObjectRef
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from reconciler.status import describe_migration


def apply_command(args: argparse.Namespace) -> int:
    """Apply every instance of ``--cluster``; exit 1 if any instance failed."""
    catalog, entry = _load(args)
    options = ApplyOptions(
        limits=Limits.of(entry.cluster),
        force_conflicts=bool(getattr(args, "force_conflicts", False)),
        allow_empty_prune=bool(getattr(args, "allow_empty_prune", False)),
        allow_mass_prune=bool(getattr(args, "allow_mass_prune", False)),
    )
    with _connected(args, entry) as (client, live):
        deployed = live.deployed_versions(entry.instances)
        plans = plan_cluster(catalog, args.cluster, deployed)
        hooks = MigrationHooks.begin(
            client, live, catalog, plans, deployed, cluster=args.cluster, limits=options.limits
        )
        results = apply_plans(client, live, plans, options, before=hooks.before_apply)
        hooks.after_health(plans, results)  # waits only for instances with post migrations
        results += remove_deleted(client, live, entry, options, hooks)
    changes = ChangeSet.of(e for r in results for e in r.changes.entries)
    if args.output == "json":
        print_json([e.to_dict() for e in changes.entries])
    else:
        _print_apply(results, changes, hooks)
    ok = all(r.ok for r in results) and not hooks.post_failed
    return EXIT_OK if ok else EXIT_PROBLEMS


def diff_command(args: argparse.Namespace) -> int:
    """Print a unified diff per object that differs; exit 1 when anything differs."""
    catalog, entry = _load(args)
    options = ApplyOptions(limits=Limits.of(entry.cluster))
    diffs: list[ObjectDiff] = []
    show = bool(args.show_secrets)
    with _connected(args, entry) as (client, live):
        plans = plan_cluster(catalog, args.cluster, live.deployed_versions(entry.instances))
        for plan in plans:
            if plan.instance.suspend:
                continue
            if not plan.ok:
                diffs.append(_plan_error(plan))
                continue
            target = instance_target(args.cluster, plan)
            diffs += diff_instance(client, target, options, live, show_secrets=show)
        for name, inventory in sorted(live.inventories().items()):
            if name not in entry.instances:
                target = InstanceTarget(args.cluster, name, inventory.namespace, ())
                diffs += diff_instance(
                    client, target, options, live, show_secrets=args.show_secrets
                )
    if args.output == "json":
        print_json([d.to_dict() for d in diffs])
    else:
        _print_diffs(diffs)
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
    with KubeClient.connect(
        args.kubeconfig, args.context, max_requests_in_flight=max_requests_in_flight(args)
    ) as client:
        try:
            yield client, LiveState(client, args.cluster, entry.namespaces)
        except ClusterUnreachable as e:
            raise UsageError(str(e)) from e


def _plan_error(plan: InstancePlan) -> ObjectDiff:
    inst = plan.instance
    ref = ObjectRef(*INSTANCE_KIND, inst.namespace, inst.name)
    message = f"{plan.reason}: {plan.message or 'cannot plan this instance'}"
    return ObjectDiff(inst.name, ref, "error", "", message)


def _print_apply(results: list[InstanceResult], changes: ChangeSet, hooks: MigrationHooks) -> None:
    for result in results:
        status = "" if result.ok else f" failed ({result.reason or 'ApplyFailed'})"
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
    failed = sum(1 for r in results if not r.ok)
    tail = f", {failed} failed" if failed else ""
    print(f"apply: {len(results)} instances{tail}; objects: {changes.summary()}")


def _print_diffs(diffs: list[ObjectDiff]) -> None:
    for d in diffs:
        if d.change == "error":
            eprint(f"reconciler: {d.instance}: {d.message}")
            continue
        print(f"# {d.ref} (instance {d.instance}): {d.change}")
        sys.stdout.write(d.diff if d.diff.endswith("\n") else d.diff + "\n")
    changed = sum(1 for d in diffs if d.change != "error")
    errors = len(diffs) - changed
    tail = f", {errors} error(s)" if errors else ""
    print(f"diff: {changed} object(s) differ{tail}")
