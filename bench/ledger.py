"""Benchmark the status ledger at scale (issue 12): writes per pass, history on a long branch.

1. Writes: one ``StatusLedger.record`` of 1,000 and of 10,000 new records (one
   commit each, every commit holding every record), then passes that change 10%,
   3 and none of the 10,000. Baseline from the same run: the previous writer
   (``git fast-import``, which rebuilds the whole ``instances/`` tree for every
   commit) at 1,000 and 4,000 records; its cost per record grows with the size
   (28 s CPU, 65 s wall at 10,000 on a loaded 2-core machine; 43 s in issue 12).
2. History: a 50,000-commit branch over 1,000 instances, built with the ledger's
   own writer in 50 passes (seconds, not 50,000 ``record`` calls), then
   ``history`` of one instance against the path-limited ``git log`` it replaced,
   and the whole ``reconciler history`` process.

Wall time depends on the machine's load; CPU time (this process and its Git
children) is printed beside it. Run: ``.venv/bin/python bench/ledger.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from unittest import mock

# Run as a script, this file's directory comes first on sys.path and bench/git.py
# would shadow GitPython's ``git`` package; drop the directory before importing.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import git  # noqa: E402
from benchkit import figure  # noqa: E402

from reconciler.model.status import InstanceStatus, Phase  # noqa: E402
from reconciler.source import objects  # noqa: E402
from reconciler.source.ledger import StatusLedger  # noqa: E402
from reconciler.source.runner import GitFailed, run  # noqa: E402

SIZES = (1_000, 10_000)
BASELINE_SIZES = (1_000, 4_000)
WRITE_GOAL = 5.0  # seconds for 10,000 records in one pass
HISTORY_COMMITS = 50_000
HISTORY_INSTANCES = 1_000
HISTORY_GOAL = 1.0
NOW = "2026-01-01T00:00:00Z"


def sh(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True)
    return out.stdout.decode().strip()


def record(i: int, phase: Phase = Phase.READY) -> InstanceStatus:
    return InstanceStatus(
        cluster="bench",
        instance=f"inst-{i:05d}",
        app="podinfo",
        phase=phase,
        version="6.5.0",
        desired_version="6.6.0",
        source="channel:stable",
        source_commit="a" * 40,
        objects=3,
    )


class Timing:
    """Wall and CPU seconds (this process plus the Git processes it waited for)."""

    def __init__(self, fn: Callable[[], object]) -> None:
        before, start = os.times(), time.perf_counter()
        self.result = fn()
        self.wall = time.perf_counter() - start
        after = os.times()
        self.cpu = sum(after[:4]) - sum(before[:4])

    def __str__(self) -> str:
        return f"{self.wall:7.2f} s wall {self.cpu:7.2f} s cpu"


def line(label: str, timing: Timing, goal: str = "") -> None:
    print(f"  {label:<52} {timing}   {goal}")


def new_repo(root: Path) -> Path:
    path = root / f"{uuid.uuid4().hex[:8]}.git"
    sh(root, "init", "-q", "--bare", str(path))
    return path


def fast_import_chain(
    repo: git.Repo, base: str | None, given: Iterable[objects.Change]
) -> list[str]:
    """The previous writer, kept here as the baseline: one ``git fast-import`` per pass.

    The ledger hands ``write_chain`` a generator (it writes each change as it comes);
    this writer needs them all at once, as the previous ledger gave them."""
    changes = list(given)
    ref = f"refs/reconciler/pending/{uuid.uuid4().hex[:12]}"
    ident = "bench <bench@example.com>"
    stamp = objects.git_date("GIT_COMMITTER_DATE")
    parts = [f"reset {ref}\n".encode()]
    if base:
        parts.append(f"from {base}\n\n".encode())
    for mark, change in enumerate(changes, 1):
        message = change.message.encode()
        parts += [
            f"commit {ref}\nmark :{mark}\nauthor {ident} {stamp}\ncommitter {ident} {stamp}\n"
            f"data {len(message)}\n".encode(),
            message,
            f"\nM 100644 inline {change.path}\ndata {len(change.data)}\n".encode(),
            change.data,
            b"\n",
        ]
    parts.append(b"done\n")
    with tempfile.TemporaryDirectory() as tmp:
        marks, stream = Path(tmp) / "marks", Path(tmp) / "stream"
        stream.write_bytes(b"".join(parts))
        with open(stream, "rb") as data:
            status, _out, err = repo.git.execute(
                ["git", "fast-import", "--quiet", "--done", f"--export-marks={marks}"],
                istream=data,
                with_extended_output=True,
                with_exceptions=False,
            )
        if status != 0:
            raise GitFailed(f"git fast-import: {err}")
        shas = dict(line.split() for line in marks.read_text().splitlines())
    run(repo, ["update-ref", "-d", ref])
    return [shas[f":{i}"] for i in range(1, len(changes) + 1)]


def first_pass(root: Path, size: int) -> Timing:
    ledger = StatusLedger(str(new_repo(root)), "bench")
    timing = Timing(lambda: ledger.record([record(i) for i in range(size)], now=NOW))
    assert isinstance(timing.result, list) and len(timing.result) == size
    return timing


def bench_writes(root: Path) -> None:
    print("Writes: one StatusLedger.record per pass, local repository, one commit per record")
    per: dict[int, float] = {}
    for size in BASELINE_SIZES:
        with mock.patch.object(objects, "write_chain", fast_import_chain):
            t = first_pass(root, size)
        per[size] = t.wall / size
        line(f"baseline (fast-import): first pass, {size:,} records", t)
    a, b = BASELINE_SIZES
    print(
        f"  baseline per record: {per[a] * 1000:.2f} ms at {a:,}, {per[b] * 1000:.2f} ms at {b:,}"
        f" (x{per[b] / per[a]:.1f} for x{b // a} records)"
    )
    ours: dict[int, float] = {}
    for size in SIZES:
        t = first_pass(root, size)
        ours[size] = t.wall / size
        goal = f"goal < {WRITE_GOAL:.0f} s" if size == 10_000 else ""
        line(f"first pass, {size:,} records", t, goal)
        figure(
            f"status ledger first pass, {size:,} new records",
            f"{t.wall:.2f} s wall, {t.cpu:.2f} s CPU",
            f"< {WRITE_GOAL:.0f} s" if size == 10_000 else "-",
            f"fast-import {per[BASELINE_SIZES[-1]] * size:.2f} s (per record at "
            f"{BASELINE_SIZES[-1]:,})",
            t.wall < WRITE_GOAL if size == 10_000 else None,
        )
    small, large = SIZES
    print(
        f"  per record: {ours[small] * 1000:.2f} ms at {small:,}, {ours[large] * 1000:.2f} ms"
        f" at {large:,} (x{ours[large] / ours[small]:.1f} for x{large // small} records)"
    )

    size = SIZES[-1]
    ledger = StatusLedger(str(new_repo(root)), "bench")
    ledger.record([record(i) for i in range(size)], now=NOW)
    cases = [
        ("10% changed", lambda i: i % 10 == 0),
        ("3 changed", lambda i: i in (17, 4242, 9001)),
        ("nothing changed", lambda i: False),
    ]
    for label, changed in cases:
        statuses = [
            record(i, Phase.PROGRESSING if changed(i) else Phase.READY) for i in range(size)
        ]
        t = Timing(lambda s=statuses: ledger.record(s))  # type: ignore[misc]
        assert isinstance(t.result, list)
        line(f"pass over {size:,} records, {label} ({len(t.result)} commits)", t)
        ledger.record([record(i) for i in range(size)])  # back to all Ready


def build_history(repo_path: Path) -> None:
    repo = git.Repo(repo_path)
    head: str | None = None
    for p in range(HISTORY_COMMITS // HISTORY_INSTANCES):
        changes = [
            objects.Change(
                f"instances/inst-{i:05d}.yaml",
                f"instance: inst-{i:05d}\npass: {p}\n".encode(),
                f"bench/inst-{i:05d}: pass {p}\n\nstatus changed\n\nReconciler-Cluster: bench\n"
                f"Reconciler-Instance: inst-{i:05d}\nReconciler-Phase: Ready\n"
                f"Reconciler-Version: 6.5.0\nReconciler-Source-Commit: none\n",
            )
            for i in range(HISTORY_INSTANCES)
        ]
        head = objects.write_chain(repo, head, changes)[-1]
    assert head is not None
    sh(repo_path, "update-ref", "refs/heads/status/bench", head)
    sh(repo_path, "gc", "-q")  # what the ledger's `gc --auto` converges to


def bench_history(root: Path) -> None:
    print(f"History: {HISTORY_COMMITS:,} commits over {HISTORY_INSTANCES:,} instances")
    repo = new_repo(root)
    line(
        f"build the branch (ledger writer, {HISTORY_COMMITS // HISTORY_INSTANCES} passes) + git gc",
        Timing(lambda: build_history(repo)),
    )
    assert sh(repo, "rev-list", "--count", "status/bench") == str(HISTORY_COMMITS)
    ledger = StatusLedger(str(repo), "bench")
    expected = HISTORY_COMMITS // HISTORY_INSTANCES
    fmt = "--format=%H%x1f%cI%x1f%s%x1f%(trailers:only,unfold)%x1e"
    for instance in ("inst-00007", f"inst-{HISTORY_INSTANCES - 1:05d}"):
        ledger.history(instance)  # warm-up: imports, caches
        t = Timing(lambda i=instance: ledger.history(i))  # type: ignore[misc]
        assert isinstance(t.result, list) and len(t.result) == expected
        line(f"StatusLedger.history({instance})", t, f"goal < {HISTORY_GOAL:.0f} s")
        path = f"instances/{instance}.yaml"
        old = Timing(lambda p=path: sh(repo, "log", fmt, "status/bench", "--", p))  # type: ignore[misc]
        line(f"  baseline: path-limited git log -- {path}", old)
    command = [sys.executable, "-m", "reconciler", "history", "--repo", str(repo)]
    command += ["--cluster", "bench", "inst-00007", "-o", "json"]
    cli = Timing(lambda: subprocess.run(command, capture_output=True, check=True))
    line("reconciler history inst-00007 (whole process)", cli, f"goal < {HISTORY_GOAL:.0f} s")
    figure(
        f"reconciler history of one instance, {HISTORY_COMMITS:,} commits (whole process)",
        f"{cli.wall:.2f} s wall",
        f"< {HISTORY_GOAL:.0f} s",
        f"path-limited git log {old.wall:.2f} s",
        cli.wall < HISTORY_GOAL,
    )
    start = Timing(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
    line("  of which starting Python", start)


def main(argv: Sequence[str] | None = None) -> int:
    global SIZES, BASELINE_SIZES, HISTORY_COMMITS, HISTORY_INSTANCES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="records per pass")
    parser.add_argument(
        "--baseline-sizes",
        default=",".join(map(str, BASELINE_SIZES)),
        help="records per pass of the fast-import baseline",
    )
    parser.add_argument("--history-commits", type=int, default=HISTORY_COMMITS)
    parser.add_argument("--history-instances", type=int, default=HISTORY_INSTANCES)
    args = parser.parse_args(argv)
    SIZES = tuple(int(n) for n in args.sizes.split(","))
    BASELINE_SIZES = tuple(int(n) for n in args.baseline_sizes.split(","))
    HISTORY_COMMITS, HISTORY_INSTANCES = args.history_commits, args.history_instances
    for key, value in {
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
    }.items():
        os.environ.setdefault(key, value)
    with tempfile.TemporaryDirectory(prefix="reconciler-bench-ledger-") as tmp:
        root = Path(tmp)
        os.environ["RECONCILER_CACHE_DIR"] = str(root / "cache")
        print(f"git {sh(root, 'version').split()[-1]}, Python {sys.version.split()[0]}")
        bench_writes(root)
        bench_history(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
