"""Every benchmark in bench/ runs, at a tiny size, so none can break unnoticed.

The benches are scripts run by hand (``make bench``) against the code as it is then;
bench/ledger.py crashed for weeks after the ledger began handing its writer a
generator. Here each one runs as its own process, as ``make bench`` runs it, at a size
that takes seconds: what is checked is that it runs to its end and prints its
figures, never the figures themselves (they depend on the machine).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
# the benches' helpers, imported by the others, and the README's table generator:
# not benches of their own
HELPERS = {"benchkit.py", "report.py"}

# bench -> (the tiny run's arguments, a line its end prints)
SMOKE: dict[str, tuple[list[str], str]] = {
    "apply.py": (["--instances", "2"], "goals met:"),
    "catalog.py": (
        ["--apps", "3", "--repeat", "1", "--reload-apps", "3"],
        "incremental (git diff + reload)",
    ),
    "daemon.py": (["--instances", "2", "--interval", "0.2"], "peak memory (max RSS)"),
    "git.py": (
        [
            "--passes",
            "2",
            "--instances-per-pass",
            "3",
            "--history-commits",
            "20",
            "--history-instances",
            "10",
            "--startup-runs",
            "1",
        ],
        "reconciler history: ",
    ),
    "ledger.py": (
        [
            "--sizes",
            "10,20",
            "--baseline-sizes",
            "10,20",
            "--history-commits",
            "40",
            "--history-instances",
            "10",
        ],
        "reconciler history inst-00007 (whole process)",
    ),
    "peer_e2e.py": (["--smoke"], "tests not needing a real container: 2 of 4 passed"),
    "preview.py": (["--apps", "3", "--repeat", "1"], "ratio "),
    "rollout.py": (
        [
            "--instances",
            "2",
            "--namespaces",
            "1",
            "--ready-delay",
            "0.05",
            "--max-look",
            "0.1",
        ],
        "promotion to batch 3 starting",
    ),
    "sandbox_cpu.py": (["--instances", "2"], "per 1,000 requests"),
    "scale.py": (["--sizes", "2"], "cost per instance"),
    "waves.py": (
        ["--clusters", "3", "--instances", "2", "--movers", "1", "--rounds", "1"],
        "holding pass with waves / no-op without",
    ),
}
# the benches whose figures reach bench/README.md's table (``benchkit.figure`` lines);
# their smoke runs must print at least one
FIGURES = {
    "apply.py",
    "catalog.py",
    "daemon.py",
    "git.py",
    "ledger.py",
    "preview.py",
    "rollout.py",
    "scale.py",
    "waves.py",
}
# a bound for a busy machine, not a figure: each takes seconds on a quiet one
BOUND = 600


def test_every_bench_has_a_smoke_run() -> None:
    benches = {p.name for p in BENCH.glob("*.py")} - HELPERS
    assert benches == set(SMOKE), "give each bench in bench/ a tiny run in SMOKE"


@pytest.mark.slow
@pytest.mark.parametrize("bench", sorted(SMOKE))
def test_the_bench_runs_to_its_end_at_a_tiny_size(bench: str, tmp_path: Path) -> None:
    arguments, last = SMOKE[bench]
    done = subprocess.run(
        [sys.executable, str(BENCH / bench), *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 0, f"{bench} {' '.join(arguments)}:\n{done.stdout}\n{done.stderr}"
    assert last in done.stdout, done.stdout
    # a bench sets the cluster up as the deploy manifests do: the daemon's own
    # namespace exists, so the service takes its Lease without a warning
    assert "cannot take the Lease" not in done.stderr, done.stderr
    if bench in FIGURES:
        assert "\nfigure | " in done.stdout, f"{bench} printed no figure line"


def _bench_module(script: str) -> ModuleType:
    """``bench/<script>`` imported as a module (the benches are scripts, not a package)."""
    name = f"bench_{Path(script).stem}"
    spec = importlib.util.spec_from_file_location(name, BENCH / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path  # a bench puts bench/ on the path for its helpers: not here
    return module


def _report() -> ModuleType:
    return _bench_module("report.py")


def test_peer_e2e_reports_a_package_version_as_the_interpreter_it_names_sees_it() -> None:
    peer = _bench_module("peer_e2e.py")
    # this interpreter under another spelling of its path: asked in a child Python, as a
    # peer's own interpreter is
    python = Path(sys.executable)
    other = str(python.parent / ".." / python.parent.name / python.name)
    for package in ("kubernetes", "no-such-package-anywhere"):
        assert peer.version_of(sys.executable, package) == peer.version_of(other, package)
    assert peer.version_of(sys.executable, "kubernetes") == importlib.metadata.version("kubernetes")
    assert peer.version_of(sys.executable, "no-such-package-anywhere") == "not installed"


SAMPLE = """\
load: 1.50 1.20 0.90
catalog: 1000 apps x 5 versions, 1000 instances, 13000 files
figure | catalog load, 1000 apps | 3.10 s CPU = 1.70x | <= 2x | bare parse 1.82 s | met
some other line | with bars
figure | waves no-op pass | 0.09 s = 2.17x | <= 1.2x | without waves 0.04 s | not met
load: 2.00 1.40 1.00
"""


def test_the_report_turns_a_runs_figures_into_the_readme_table(tmp_path: Path) -> None:
    report = _report()
    readme = tmp_path / "README.md"
    readme.write_text(f"# Benchmarks\n\nprose\n\n{report.BEGIN}\nold table\n{report.END}\n\nmore\n")
    output = tmp_path / "out.txt"
    output.write_text(SAMPLE)
    done = subprocess.run(
        [sys.executable, str(BENCH / "report.py"), str(output), "--readme", str(readme)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = readme.read_text()
    assert text.startswith("# Benchmarks\n\nprose\n\n") and text.endswith("\n\nmore\n")
    assert "old table" not in text
    assert (
        "load average (1, 5, 15 min), as recorded at its start -> end: 1.50 1.20 0.90 -> 2.00 1.40 1.00"
        in text
    )
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows == [
        "| figure | value | goal | baseline (same run) | goal met |",
        "| catalog load, 1000 apps | 3.10 s CPU = 1.70x | <= 2x | bare parse 1.82 s | met |",
        "| waves no-op pass | 0.09 s = 2.17x | <= 1.2x | without waves 0.04 s | not met |",
    ]


def test_the_report_regenerates_the_same_table_from_the_same_output() -> None:
    report = _report()
    figures, loads = report.parse(SAMPLE.splitlines())
    when = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)
    block = report.table(figures, loads, when)
    once = report.rewrite(f"a\n{report.BEGIN}\nx\n{report.END}\nb\n", block)
    assert report.rewrite(once, block) == once
    assert "Run of 2026-11-27 15:00 UTC" in once


@pytest.mark.parametrize(
    ("readme", "output", "complaint"),
    [
        ("no markers here\n", SAMPLE, "lacks the markers"),
        (None, "load: 1 1 1\nno figures\n", "no figure lines"),
        (None, "figure | only | three fields\n", "line 1: a figure line has 5 fields"),
    ],
)
def test_the_report_refuses_what_it_cannot_turn_into_a_table(
    tmp_path: Path, readme: str | None, output: str, complaint: str
) -> None:
    report = _report()
    path = tmp_path / "README.md"
    original = readme if readme is not None else f"{report.BEGIN}\nold\n{report.END}\n"
    path.write_text(original)
    (tmp_path / "out.txt").write_text(output)
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "report.py"),
            str(tmp_path / "out.txt"),
            "--readme",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and complaint in done.stderr
    assert path.read_text() == original  # nothing written
