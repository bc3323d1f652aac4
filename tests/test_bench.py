"""Every benchmark in bench/ runs, at a tiny size, so none can break unnoticed.

The benches are scripts run by hand (``make bench``) against the code as it is then;
bench/ledger.py crashed for weeks after the ledger began handing its writer a
generator. Here each one runs as its own process, as ``make bench`` runs it, at a size
that takes seconds: what is checked is that it runs to its end and prints its
figures, never the figures themselves (they depend on the machine).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
# the benches' helpers, imported by the others: not a bench of its own
HELPERS = {"benchkit.py"}

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
        ],
        "ratio CLI history inst-7 vs raw git log",
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
    "peer_e2e.py": (["--smoke"], "tests not needing a real container: 2 of 3 passed"),
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
    "scale.py": (["--sizes", "2"], "cost per instance"),
    "waves.py": (
        ["--clusters", "3", "--instances", "2", "--movers", "1", "--rounds", "1"],
        "holding pass with waves / no-op without",
    ),
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
