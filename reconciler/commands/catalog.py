"""``validate``, ``resolve`` and ``render``: the commands that need only a catalog checkout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.commands.output import (
    Style,
    dump_yaml,
    eprint,
    is_data,
    print_data,
    print_names,
    table_options,
)
from reconciler.daemon.plan import InstancePlan, check_catalog, plan_cluster, require_cluster
from reconciler.migrations import Considered, declared_migrations, upgrade_migrations
from reconciler.model.catalog import Catalog
from reconciler.model.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from reconciler.model.problems import Severity
from reconciler.model.resolution import Resolution
from reconciler.model.secrets import mask_secret
from reconciler.resolve import format_resolutions


def validate_command(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    declared = None
    if getattr(args, "allow_uninstalled_migrations", False):
        declared = declared_migrations(Path(catalog.root))
    problems = check_catalog(catalog, declared=declared)
    errors = sum(1 for p in problems if p.severity is Severity.ERROR)
    warnings = len(problems) - errors
    if is_data(args.output):
        print_data({"problems": [p.to_dict() for p in problems]}, args.output)
    else:
        style = Style.of(args)
        for problem in problems:
            print(_painted(str(problem), problem.severity, style))
        versions = sum(len(e.versions) for e in catalog.apps.values())
        instances = sum(len(c.instances) for c in catalog.clusters.values())
        summary = (
            f"{len(catalog.apps)} apps, {versions} versions, "
            f"{len(catalog.clusters)} clusters, {instances} instances"
        )
        if errors:
            print(f"catalog is invalid: {errors} error(s), {warnings} warning(s) ({summary})")
        else:
            print(f"catalog is valid: {warnings} warning(s) ({summary})")
    return EXIT_PROBLEMS if errors else EXIT_OK


def _painted(text: str, severity: Severity, style: Style) -> str:
    """An error line in red; in a warning line only the word ``warning`` (yellow)."""
    if severity is Severity.ERROR:
        return style.paint(text, "red")
    head, found, tail = text.partition(" warning: ")
    return f"{head} {style.word('warning')}: {tail}" if found else text


def _deployed(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, version = pair.partition("=")
        if not sep or not name or not version:
            raise UsageError(f'--deployed expects INSTANCE=VERSION, got "{pair}"')
        out[name] = version
    return out


def _warn_if_invalid(errors: int) -> None:
    if errors:
        eprint(
            f"warning: the catalog has {errors} error(s); affected instances are reported "
            "below (run `reconciler validate` for the full list)"
        )


def resolve_command(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    require_cluster(catalog, args.cluster)
    _warn_if_invalid(sum(1 for p in catalog.problems if p.is_error))
    plans = plan_cluster(catalog, args.cluster, _deployed(args.deployed), render=False)
    plans = _in_namespace(plans, args.namespace)
    resolutions = [p.resolution for p in plans]
    migrations = {r.instance: _considered(catalog, r) for r in resolutions} if args.explain else {}
    if is_data(args.output):
        out = [r.to_dict(explain=args.explain) for r in resolutions]
        if args.explain:
            images = {p.name: dict(p.images) for p in plans}
            for item in out:
                item["migrations"] = [c.to_dict() for c in migrations[item["instance"]]]
                item["builds"] = images.get(item["instance"], {})
        print_data(out, args.output)
    elif args.output == "name":
        print_names([r.instance for r in resolutions])
    else:
        options = table_options(args)
        sys.stdout.write(format_resolutions(resolutions, explain=args.explain, **options))
        if args.explain:
            sys.stdout.write(_format_migrations(resolutions, migrations))
            sys.stdout.write(_format_builds(plans))
    return EXIT_OK if all(p.ok for p in plans) else EXIT_PROBLEMS


def _in_namespace(plans: list[InstancePlan], namespace: str | None) -> list[InstancePlan]:
    """``-n``: only the instances installed into ``namespace`` (all without it)."""
    if namespace is None:
        return plans
    return [p for p in plans if p.instance.namespace == namespace]


def _considered(catalog: Catalog, res: Resolution) -> list[Considered]:
    """Migrations the change from ``res.deployed`` to ``res.version`` would consider."""
    entry = catalog.apps.get(res.app)
    if entry is None or not res.ok or res.blocked or res.version is None:
        return []
    keys = list(res.upgrade_path) if res.upgrade_path else [res.version]
    if keys == [res.deployed]:
        return []
    steps = [entry.versions[k] for k in keys if k in entry.versions]
    return upgrade_migrations(steps, res.deployed)


def _format_builds(plans: list[InstancePlan]) -> str:
    """The image builds ``builds.yaml`` pins for the version each instance goes to next
    (SPEC section 8): what ``${images.NAME}`` renders as, ``repo:<long tag>@<digest>``."""
    lines = [
        f"  {p.name}: {p.version.key} {image} {build}"
        for p in plans
        if p.version is not None
        for image, build in sorted(p.images.items())
    ]
    if not lines:
        return ""
    return "\npinned image builds (apps/<app>/builds.yaml):\n" + "\n".join(lines) + "\n"


def _format_migrations(
    resolutions: list[Resolution], migrations: dict[str, list[Considered]]
) -> str:
    lines = []
    for res in resolutions:
        found = migrations.get(res.instance) or []
        if found:
            path = " -> ".join(res.upgrade_path or (res.version or "",))
            lines.append(f"  {res.instance}: {res.deployed or 'install'} -> {path}")
            lines += [f"    {c.describe()}" for c in found]
    if not lines:
        return ""
    head = (
        "\nmigrations to consider (once per instance, or per cluster if global; "
        "only while the check holds):"
    )
    return "\n".join([head, *lines]) + "\n"


def render_command(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    require_cluster(catalog, args.cluster)
    plans = _in_namespace(plan_cluster(catalog, args.cluster), args.namespace)
    if args.instance is not None:
        plans = [p for p in plans if p.name == args.instance]
        if not plans:
            known = ", ".join(sorted(catalog.clusters[args.cluster].instances)) or "none"
            raise UsageError(
                f'instance "{args.instance}" is not in cluster {args.cluster} (known: {known})'
            )
    failed = 0
    for plan in plans:
        if not plan.ok:
            failed += 1
            eprint(f"{args.cluster}/{plan.name}: not rendered ({plan.reason}): {plan.message}")

    def shown(obj: dict[str, Any]) -> dict[str, Any]:
        return obj if args.show_secrets else mask_secret(obj)

    if is_data(args.output):
        items = [shown(obj) for plan in plans for obj in plan.objects]
        print_data({"apiVersion": "v1", "kind": "List", "items": items}, args.output)
    else:
        chunks = []
        for plan in plans:
            if plan.version is None:
                continue
            for obj in plan.objects:
                header = f"# instance: {plan.name} ({plan.version.app} {plan.version.key})\n"
                chunks.append(header + dump_yaml(shown(obj)))
        sys.stdout.write("---\n".join(chunks))
    return EXIT_PROBLEMS if failed else EXIT_OK
