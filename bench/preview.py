"""Benchmark: `reconciler preview` of a one-line channel move vs. a full render of both commits.

Generates the catalog of ``bench/catalog.py`` (1,000 apps x 5 versions, one
cluster with 1,000 instances) in a Git repository, commits it, then commits a
one-line channel move (``stable: 1.2.0`` -> ``2.0.0`` in one app's
``channels.yaml``). In the same run it measures
  * baseline: what a reviewer would otherwise do, ``reconciler render`` of both
    commits: each commit's tree written out (``git archive``), loaded, and every
    instance of every cluster resolved and rendered (the YAML printing left out);
  * preview: ``build_preview`` (``git diff``, the clusters and the one app at both
    commits, the head reloaded incrementally, plans, validation) and its markdown.
Both sides count CPU of this process and its children (git). The preview's
answer is checked against the full renders: the instances it reports are exactly
those whose rendered objects differ. Goal: preview <= 0.2x the baseline.

Run: ``.venv/bin/python bench/preview.py [--apps 1000] [--repeat 2]``
"""

# ruff: noqa: E402  (imports must follow the sys.path guard below)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and bench/git.py
# would shadow GitPython's ``git`` package; move it to the end.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import argparse
import tempfile
from collections.abc import Callable
from resource import RUSAGE_CHILDREN, RUSAGE_SELF, getrusage
from typing import Any

from benchkit import figure
from catalog import commit, generate, git

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import plan_cluster
from reconciler.preview import Preview, build_preview, format_markdown
from reconciler.source import export_paths

GOAL = 0.2


def cpu_and_wall(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    import time

    def cpu() -> float:
        own, children = getrusage(RUSAGE_SELF), getrusage(RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    before, wall = cpu(), time.perf_counter()
    result = fn()
    return result, cpu() - before, time.perf_counter() - wall


def render_commit(root: Path, commit_id: str, workdir: Path) -> dict[tuple[str, str], Any]:
    """``reconciler render`` of every cluster at ``commit_id``: objects per instance."""
    tree = Path(tempfile.mkdtemp(dir=workdir))
    export_paths(root, commit_id, ["apps", "clusters"], tree)
    catalog = load_catalog(tree)
    out: dict[tuple[str, str], Any] = {}
    for cluster in sorted(catalog.clusters):
        for plan in plan_cluster(catalog, cluster):
            out[(cluster, plan.name)] = (plan.resolution.version, plan.objects)
    return out


def full_render(root: Path, base: str, head: str, workdir: Path) -> set[tuple[str, str]]:
    """Render both commits; the instances whose version or objects differ."""
    before = render_commit(root, base, workdir)
    after = render_commit(root, head, workdir)
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def run_preview(root: Path, base: str, head: str) -> tuple[Preview, str]:
    preview = build_preview(root, base, head)
    return preview, format_markdown(preview)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, workdir = Path(tmp) / "catalog", Path(tmp) / "work"
        root.mkdir()
        workdir.mkdir()
        files = generate(root, args.apps)
        git(root, "init", "-q")
        base = commit(root, "catalog")
        target = f"app{(args.apps // 2) // 4 * 4:04d}"  # i % 4 == 0: follows channel stable
        channels = root / "apps" / target / "channels.yaml"
        channels.write_text(channels.read_text().replace("stable: 1.2.0", "stable: 2.0.0"))
        head = commit(root, f"{target}: stable -> 2.0.0")
        print(
            f"preview: {args.apps} apps x 5 versions, {args.apps} instances, {len(files)} files; "
            f"one-line channel move in {target}"
        )
        run_preview(root, base, head)  # warm caches (schemas, entry points) once
        full_cpu = full_wall = prev_cpu = prev_wall = float("inf")
        for _ in range(args.repeat):
            differ, cpu, wall = cpu_and_wall(lambda: full_render(root, base, head, workdir))
            full_cpu, full_wall = min(full_cpu, cpu), min(full_wall, wall)
            (preview, markdown), cpu, wall = cpu_and_wall(lambda: run_preview(root, base, head))
            prev_cpu, prev_wall = min(prev_cpu, cpu), min(prev_wall, wall)
        reported = {(c.cluster, c.instance) for c in preview.changes}
        if reported != differ:
            raise SystemExit(f"preview reports {sorted(reported)}, full renders differ in {differ}")
        if preview.new_problems:
            raise SystemExit(f"preview found new problems: {preview.new_problems[0]}")
        headline = next(c.headline() for c in preview.changes)
        print(f"  answer: {headline} ({len(markdown)} characters of markdown)")
    print(
        f"baseline  render of both commits (archive + load + render)  {full_cpu:8.3f} s CPU"
        f" {full_wall:8.3f} s wall"
    )
    print(
        f"preview   git diff + scoped load + plans + validation       {prev_cpu:8.3f} s CPU"
        f" {prev_wall:8.3f} s wall"
    )
    print(
        f"ratio     {prev_cpu / full_cpu:.3f}x CPU, {prev_wall / full_wall:.3f}x wall"
        f" (goal: <= {GOAL:.2f}x)"
    )
    figure(
        f"preview of a one-line channel move, {args.apps} apps",
        f"{prev_cpu:.2f} s CPU = {prev_cpu / full_cpu:.3f}x",
        f"<= {GOAL:.1f}x",
        f"render both commits {full_cpu:.2f} s",
        prev_cpu / full_cpu <= GOAL,
    )


if __name__ == "__main__":
    main()
