"""Benchmark the status ledger against the raw Git commands that do the same work.

1. Write 1,000 status changes as the daemon would: 100 passes of 10 changed
   instances, each pass one ``StatusLedger.record`` (fetch, build, push) to a
   bare ``file://`` remote. The raw equivalent runs ``git fetch``, then
   ``hash-object``/``mktree``/``commit-tree`` per change and ``git push``.
2. Read ``history`` over a branch of 10,000 status commits, for one instance
   and for the last 100 entries, against ``git log`` with the same arguments.
3. Start the read-only commands, ``reconciler status`` and ``reconciler history``, as
   whole processes on a status branch of 20 instances (goal: under 0.25 s each; the
   median of 5 runs), against the interpreter alone (``python -c pass``): what a
   person waits for at a prompt is mostly imports, which these commands keep lazy.

Run: ``.venv/bin/python bench/git.py`` (prints figures and ratios; no assertions).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and this module's
# name would shadow GitPython's ``git`` package; drop the directory before importing.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

from benchkit import figure  # noqa: E402

from reconciler.model.status import InstanceStatus, Phase  # noqa: E402
from reconciler.source.ledger import StatusLedger  # noqa: E402
from reconciler.status import commit_message, dump_status, prepare_record  # noqa: E402

PASSES = 100
INSTANCES_PER_PASS = 10
HISTORY_COMMITS = 10_000
HISTORY_INSTANCES = 50
LOG_FORMAT = "--format=%H%x1f%cI%x1f%s%x1f%(trailers:only,unfold)%x1e"


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=True)
    return out.stdout.decode().strip()


def record(instance: str, n: int) -> InstanceStatus:
    return InstanceStatus(
        cluster="bench",
        instance=instance,
        app="podinfo",
        phase=Phase.PROGRESSING if n % 2 else Phase.READY,
        version="6.5.0",
        desired_version="6.6.0",
        source="channel:stable",
        source_commit=f"{n:040x}",
        objects=n,
    )


def timed(label: str, fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    print(f"  {label:<58} {elapsed:8.3f} s")
    return elapsed


def bench_writes(root: Path) -> tuple[float, float]:
    remote = root / "write-remote.git"
    git(root, "init", "-q", "--bare", str(remote))
    ledger = StatusLedger(remote.as_uri(), "bench")
    names = [f"inst-{i}" for i in range(INSTANCES_PER_PASS)]

    def ledger_passes() -> None:
        for p in range(PASSES):
            commits = ledger.record([record(n, p) for n in names])
            assert len(commits) == INSTANCES_PER_PASS

    ours = timed(f"StatusLedger.record: {PASSES * INSTANCES_PER_PASS} changes", ledger_passes)

    raw_remote = root / "raw-remote.git"
    work = root / "raw-work.git"
    git(root, "init", "-q", "--bare", str(raw_remote))
    git(root, "init", "-q", "--bare", str(work))
    git(work, "remote", "add", "origin", raw_remote.as_uri())

    def raw_passes() -> None:
        head = ""
        blobs: dict[str, str] = {}
        previous: dict[str, InstanceStatus] = {}
        for p in range(PASSES):
            subprocess.run(
                ["git", "fetch", "-q", "origin", "+refs/heads/status/bench:refs/remotes/o/b"],
                cwd=work,
                capture_output=True,
                check=False,
            )
            for name in names:
                prepared = prepare_record(record(name, p), previous.get(name))
                previous[name] = prepared.status
                blobs[f"{name}.yaml"] = git(
                    work, "hash-object", "-w", "--stdin", stdin=dump_status(prepared.status)
                )
                listing = "".join(f"100644 blob {s}\t{n}\n" for n, s in sorted(blobs.items()))
                sub = git(work, "mktree", stdin=listing.encode())
                top = git(work, "mktree", stdin=f"040000 tree {sub}\tinstances\n".encode())
                message = commit_message(prepared.status, prepared.previous)
                parent = ["-p", head] if head else []
                head = git(work, "commit-tree", top, *parent, stdin=message.encode())
            git(work, "update-ref", "refs/heads/status/bench", head)
            git(work, "push", "-q", "origin", "refs/heads/status/bench")

    raw = timed("raw git (fetch, hash-object, mktree x2, commit-tree, push)", raw_passes)
    return ours, raw


def build_history(repo: Path) -> None:
    ledger = StatusLedger(str(repo), "bench")
    names = [f"inst-{i}" for i in range(HISTORY_INSTANCES)]
    for p in range(HISTORY_COMMITS // HISTORY_INSTANCES):
        ledger.record([record(n, p) for n in names])


def bench_history(root: Path) -> list[tuple[str, float, float]]:
    repo = root / "history.git"
    git(root, "init", "-q", "--bare", str(repo))
    timed(
        f"build {HISTORY_COMMITS} status commits (StatusLedger.record)", lambda: build_history(repo)
    )
    count = git(repo, "rev-list", "--count", "status/bench")
    print(f"  status commits on status/bench: {count}")
    ledger = StatusLedger(str(repo), "bench")
    results = []
    cases = [
        ("history inst-7 (by trailer)", "inst-7", 0, ["--grep=^Reconciler-Instance: inst-7$"]),
        ("history --limit 100", None, 100, ["-n100"]),
        (f"history (all {HISTORY_COMMITS:,} entries)", None, 0, []),
    ]
    for label, instance, limit, raw_args in cases:
        entries = ledger.history(instance, limit=limit)  # warm-up: Python imports, caches
        ours = timed(
            f"StatusLedger.history: {label}",
            lambda i=instance, n=limit: ledger.history(i, limit=n),  # type: ignore[misc]
        )
        args = ["log", LOG_FORMAT, *raw_args, "status/bench"]
        raw = timed(f"raw git log: {label}", lambda a=args: git(repo, *a))  # type: ignore[misc]
        print(f"    -> {len(entries)} entries")
        results.append((label, ours, raw))
    cli = timed(
        "reconciler history inst-7 (whole CLI process)",
        lambda: subprocess.run(
            [
                sys.executable,
                "-m",
                "reconciler",
                "history",
                "--repo",
                str(repo),
                "--cluster",
                "bench",
                "inst-7",
                "-o",
                "json",
            ],
            capture_output=True,
            check=True,
        ),
    )
    results.append(("CLI history inst-7 vs raw git log by trailer", cli, results[0][2]))
    return results


STARTUP_INSTANCES = 20
STARTUP_RUNS = 5


def median_run(argv: list[str]) -> float:
    """The median wall time of ``STARTUP_RUNS`` runs of ``argv``, after one warm-up."""
    subprocess.run(argv, capture_output=True, check=True)
    times = []
    for _ in range(STARTUP_RUNS):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def bench_startup(root: Path) -> list[tuple[str, float, float]]:
    """``status`` and ``history`` as a person runs them, against the bare interpreter."""
    repo = root / "startup.git"
    git(root, "init", "-q", "--bare", str(repo))
    ledger = StatusLedger(str(repo), "bench")
    names = [f"inst-{i}" for i in range(STARTUP_INSTANCES)]
    for p in range(5):
        ledger.record([record(n, p) for n in names])
    bare = median_run([sys.executable, "-c", "pass"])
    print(f"  python -c pass: {bare:.3f} s (median of {STARTUP_RUNS})")
    results = []
    for command in (["status"], ["history"]):
        argv = [sys.executable, "-m", "reconciler", *command]
        wall = median_run([*argv, "--repo", str(repo), "--cluster", "bench"])
        print(f"  reconciler {command[0]}: {wall:.3f} s (median of {STARTUP_RUNS})")
        results.append((f"reconciler {command[0]}", wall, bare))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    global PASSES, INSTANCES_PER_PASS, HISTORY_COMMITS, HISTORY_INSTANCES, STARTUP_RUNS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--instances-per-pass", type=int, default=INSTANCES_PER_PASS)
    parser.add_argument("--history-commits", type=int, default=HISTORY_COMMITS)
    parser.add_argument("--history-instances", type=int, default=HISTORY_INSTANCES)
    parser.add_argument("--startup-runs", type=int, default=STARTUP_RUNS)
    args = parser.parse_args(argv)
    STARTUP_RUNS = max(1, args.startup_runs)
    PASSES, INSTANCES_PER_PASS = args.passes, args.instances_per_pass
    HISTORY_COMMITS, HISTORY_INSTANCES = args.history_commits, args.history_instances
    os.environ.setdefault("GIT_AUTHOR_NAME", "bench")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "bench@example.com")
    os.environ.setdefault("GIT_COMMITTER_NAME", "bench")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "bench@example.com")
    with tempfile.TemporaryDirectory(prefix="reconciler-bench-") as tmp:
        root = Path(tmp)
        os.environ["RECONCILER_CACHE_DIR"] = str(root / "cache")
        print(f"git {git(root, 'version').split()[-1]}, Python {sys.version.split()[0]}")
        print(f"Writes: {PASSES} passes x {INSTANCES_PER_PASS} changed instances, file:// remote")
        ours, raw = bench_writes(root)
        per = PASSES * INSTANCES_PER_PASS
        print(f"  per change: ledger {ours / per * 1000:.2f} ms, raw git {raw / per * 1000:.2f} ms")
        print(f"  ratio ledger/raw: {ours / raw:.2f}")
        figure(
            f"status ledger write, {PASSES} passes x {INSTANCES_PER_PASS} changes",
            f"{ours / per * 1000:.2f} ms per change = {ours / raw:.2f}x",
            "-",
            f"raw git {raw / per * 1000:.2f} ms per change",
            None,
        )
        print(f"History: {HISTORY_COMMITS} commits over {HISTORY_INSTANCES} instances")
        for label, a, b in bench_history(root):
            print(f"  ratio {label}: {a / b:.2f}")
            figure(
                f"{label}, {HISTORY_COMMITS:,} commits",
                f"{a:.3f} s = {a / b:.2f}x",
                "-",
                f"raw git log {b:.3f} s",
                None,
            )
        print(f"Startup: read-only commands on a status branch of {STARTUP_INSTANCES} instances")
        for label, wall, bare in bench_startup(root):
            figure(
                f"{label} (whole process), {STARTUP_INSTANCES} instances",
                f"{wall:.3f} s",
                "< 0.25 s",
                f"python -c pass {bare:.3f} s",
                wall < 0.25,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
