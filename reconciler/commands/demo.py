"""``reconciler demo``: the built-in example, end to end, in plain progress lines.

Until the daemon lands this runs the offline half of the story on the example
catalog shipped with the package: validate it, choose versions for each
cluster (with explanations), and render what would be applied.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import check_catalog, plan_cluster
from reconciler.model.errors import UsageError
from reconciler.resolve import format_resolutions


def example_catalog() -> Path:
    """The example catalog: in a source checkout, ``catalog-repo-template/`` beside the package."""
    here = Path(__file__).resolve().parent.parent.parent / "catalog-repo-template"
    if (here / "apps").is_dir():
        return here
    raise UsageError(
        "the example catalog (catalog-repo-template/) was not found next to the package; "
        "run the demo from a source checkout (make demo)"
    )


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def demo_command(args: argparse.Namespace) -> int:
    root = example_catalog()
    say(f"validating the example catalog {root}")
    catalog = load_catalog(root)
    problems = check_catalog(catalog)
    for problem in problems:
        print(f"    {problem}")
    errors = [p for p in problems if p.is_error]
    say(f"{len(errors)} error(s), {len(problems) - len(errors)} warning(s)")
    for cluster in sorted(catalog.clusters):
        plans = plan_cluster(catalog, cluster)
        say(f"cluster {cluster}: versions chosen for {len(plans)} instance(s)")
        sys.stdout.write(format_resolutions([p.resolution for p in plans], explain=False))
        objects = sum(len(p.objects) for p in plans)
        say(f"cluster {cluster}: {objects} Kubernetes objects rendered")
        for plan in plans:
            kinds = ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in plan.objects)
            print(f"    {plan.name}: {kinds or plan.message}")
    say("explore: reconciler resolve catalog-repo-template --cluster prod --explain")
    say("         reconciler render catalog-repo-template --cluster prod --instance web")
    return 1 if errors else 0
