"""Shared fixtures: a pinned Git identity so commits made in tests are reproducible.

Area-specific fixtures live in each area's own conftest (tests/<area>/conftest.py);
fixtures used by several areas (a running sandbox API server, Git remotes) live here.
"""

from __future__ import annotations

import atexit
import dataclasses
import gc
import os
import re
import shutil
import tempfile
from collections.abc import Generator, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.analysis import servers

# Tests assert behaviour, never time: on a busy machine hypothesis's own timing checks (an
# example's deadline, a strategy's speed at drawing inputs) failed tests whose behaviour
# held ("only generated 9 valid inputs after 1.00 seconds" at load 15). Every example is
# still drawn and checked.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = REPO_ROOT / "catalog-repo-template"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def pytest_configure(config: pytest.Config) -> None:
    """No cyclic garbage collection while the suite is collected (each xdist worker does).

    Collecting rewrites the asserts of every test module: millions of short-lived AST
    nodes, freed by reference counting, whose allocation bursts start a collection
    over the growing heap again and again, a quarter of the collection's 6 s.
    """
    gc.disable()
    use_memory_temp(os.environ)


# Where the suite's temporary folders go when the machine has a memory filesystem
MEMORY_TEMP = Path("/dev/shm")
# ... with at least this much free: a container's /dev/shm is often 64 MiB, and one test
# alone writes 150 MiB (tests/safety/test_render_bomb.py); a full run holds a few hundred
MEMORY_TEMP_MIN_FREE = 1 << 30


def use_memory_temp(
    environ: MutableMapping[str, str],
    memory: Path = MEMORY_TEMP,
    min_free: int = MEMORY_TEMP_MIN_FREE,
) -> Path | None:
    """Put every temporary folder of the run (``tmp_path``, each test's home, what
    ``tempfile`` and the programs the tests start make) on ``memory``, a tmpfs, and
    return the folder used; None when the run keeps the default.

    The tests' Git repositories, clones and caches are thousands of small files made
    and removed: on the disk's file system that was a third of the kernel CPU a Git-
    heavy test took (three files of tests/source: 1.64-2.18 s of system CPU against 1.18-1.23 s).
    A run whose ``TMPDIR`` or ``PYTEST_DEBUG_TEMPROOT`` is set keeps it, as does a
    machine without a writable ``memory`` or with less than ``min_free`` bytes free on
    it. Pytest still keeps only the last three runs' folders there. The xdist workers
    inherit the environment.
    """
    if "TMPDIR" in environ or "PYTEST_DEBUG_TEMPROOT" in environ:
        return None
    if not (memory.is_dir() and os.access(memory, os.W_OK | os.X_OK)):
        return None
    free = os.statvfs(memory)
    if free.f_bavail * free.f_frsize < min_free:
        return None
    root = memory / f"reconciler-tests-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    environ["TMPDIR"] = environ["PYTEST_DEBUG_TEMPROOT"] = str(root)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return root


# The collector's thresholds while the tests run: a young collection after 10,000 net
# allocations, not CPython's 700 (the older generations' counts stay the default).
COLLECTOR_THRESHOLDS = (10_000, 10, 10)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the analysis tests' Prometheus now, when this process will run them: its
    first scrape comes 5 s after it starts, which then pass while the tests are
    collected, not inside the first test that uses it (tests/analysis/servers.py)."""
    if servers.runs_analysis_tests(session.config):
        servers.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    servers.stop()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collect once, then freeze what collection built (modules, test items, fixtures):
    the full collections of the run no longer walk it.

    Then collect less often. Each test's in-process sandbox starts as a copy of a
    whole cluster (thousands of dicts, freed by reference counting when it stops) and
    every request allocates more, so at the default thresholds a young collection ran
    every few requests and a full one, walking all that the tests imported after the
    freeze (the client's models, hypothesis), every few tests: a quarter of the CPU of
    the sandbox's API tests (tests/sandbox/test_api_semantics.py, test_crud,
    test_crd_schema and test_defaults: 1.26-1.42 s of collection in 5.2-5.9 s, against
    0.47-0.49 s at these thresholds, at the same peak memory). The rare cycles (asyncio's,
    aiohttp's) are still found, a few tests later.
    """
    gc.enable()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Let the interpreter exit without walking the whole heap in its final collections.

    Registered last, so run first among the exit handlers: every other one still runs
    and every object is still finalized by reference counting; only the cyclic
    collector skips the heap at exit, where an xdist worker spent 2 to 3 s that the
    controller waited for at the end of every run.
    """
    atexit.register(gc.freeze)


def pytest_addoption(parser: pytest.Parser) -> None:
    from tests.lanes import LANE_RUNS_ELSEWHERE

    parser.addoption(
        LANE_RUNS_ELSEWHERE,
        action="store_true",
        help="the real_cluster lane runs in another process (`make test` runs it beside "
        "the unit suite, against a standalone sandbox): deselect the [sandbox] variant of "
        "each lane scenario whose [real] variant the lane runs, so each scenario runs once. "
        "Scenarios marked sandbox_lane_only keep theirs. Without the lane, leave it off: "
        "the [sandbox] variants are then the only ones that run",
    )


# Where an xdist worker tells the controller which tests it deselected as lane twins
LANE_TWINS_OUTPUT = "lane_twins_deselected"
_TWINS_COUNTED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A real_cluster test outside the lane's folders is an error, not a test left out.

    ``make test-real`` collects only ``tests.lanes.LANE_DIRS``; a scenario given the
    real lane elsewhere would never run there. Then the lane's selection (tests/lanes.py):
    a ``sandbox_lane_only`` scenario's ``[real]`` variant is skipped, and under
    ``--lane-runs-elsewhere`` the ``[sandbox]`` twins of what the lane runs are deselected.
    """
    from tests.lanes import LANE_DIRS, LANE_RUNS_ELSEWHERE, lane_twins, skip_sandbox_lane_only

    outside = [
        item.nodeid
        for item in items
        if item.get_closest_marker("real_cluster") and not item.nodeid.startswith(LANE_DIRS)
    ]
    if outside:
        raise pytest.UsageError(
            f"real_cluster tests outside tests.lanes.LANE_DIRS {LANE_DIRS} "
            f"(move them, or add their folder there and to the Makefile's REAL_PATHS): {outside}"
        )
    skip_sandbox_lane_only(items)
    if config.getoption(LANE_RUNS_ELSEWHERE):
        twins = lane_twins(items)
        if twins:
            left = set(twins)
            items[:] = [item for item in items if item not in left]
            config.hook.pytest_deselected(items=twins)
            output = getattr(config, "workeroutput", None)
            if output is not None:  # an xdist worker: its controller prints the summary
                output[LANE_TWINS_OUTPUT] = [item.nodeid for item in twins]
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = slow_first(items, workers)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller, count the lane twins a worker deselected in the summary
    ("N deselected"), as a run without workers does: the controller collects nothing
    itself, so the workers' deselections never reach its summary. Every worker
    deselects the same twins; the first to finish is counted."""
    names = getattr(node, "workeroutput", {}).get(LANE_TWINS_OUTPUT)
    config: pytest.Config = node.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not names or reporter is None or config.stash.get(_TWINS_COUNTED, False):
        return
    config.stash[_TWINS_COUNTED] = True
    reporter.stats.setdefault("deselected", []).extend(DeselectedTwin(name) for name in names)


@dataclasses.dataclass(frozen=True)
class DeselectedTwin:
    """A worker's deselected lane twin in the controller's stats (plugins read each entry
    of the stats as a report, by its attributes: hypothesis's summary reads ``__dict__``)."""

    nodeid: str


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A lane scenario's ``[real]`` variant that skips at run time without the
    ``sandbox_lane_only`` mark fails, saying to add it (tests.lanes.unmarked_lane_skip)."""
    from tests.lanes import unmarked_lane_skip

    report = yield
    if report.skipped and not hasattr(report, "wasxfail"):
        why = unmarked_lane_skip(item, call)
        if why is not None:
            report.outcome = "failed"
            report.longrepr = why
    return report


def _is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def slow_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The order for ``workers`` xdist workers: each worker's share starts with its slow tests.

    ``--dist worksteal`` first gives each worker an equal run of consecutive tests and
    later moves tests from the end of a long queue to a worker that ran out. A slow test
    (``@pytest.mark.slow``: seconds, where most take milliseconds) that happens to sit
    late in a queue then runs alone at the end while the other workers wait: on a busy
    2-core machine the last worker ended 13 s after the first. So the slow tests are dealt
    out in turn, one to each worker's share, ahead of its quick ones (in their collection
    order, so module fixtures are still shared). A module marked slow as a whole
    (``pytestmark``) usually shares an expensive module or session fixture (a virtualenv,
    a browser): its tests stay together. Every test still runs, each exactly once; with
    one worker the order is the collection's.
    """
    if workers < 2:
        return items
    units: dict[str, list[pytest.Item]] = {}
    quick: list[pytest.Item] = []
    for item in items:
        if not _is_slow(item):
            quick.append(item)
            continue
        module = getattr(item, "module", None)
        whole = module is not None and any(
            getattr(mark, "name", None) == "slow"
            for mark in _as_list(getattr(module, "pytestmark", []))
        )
        units.setdefault(item.nodeid.split("::")[0] if whole else item.nodeid, []).append(item)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for n, unit in enumerate(units.values()):
        shares[n % workers].extend(unit)
    # worksteal's first split: worker i gets len(pending) // (workers - i) of what is left
    # (a share with more slow tests than that spills them into the next one's)
    ordered: list[pytest.Item] = []
    left, spill = len(items), []
    for i, share in enumerate(shares):
        size = left // (workers - i)
        left -= size
        run = spill + share
        spill = run[size:]
        take = size - len(run[:size])
        ordered.extend(run[:size] + quick[:take])
        del quick[:take]
    return ordered + spill + quick


def _as_list(marks: object) -> list[object]:
    return list(marks) if isinstance(marks, list | tuple) else [marks]


@pytest.fixture(scope="session")
def _homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each test's empty home folder is made (one folder per test, under the run's
    base temporary folder, so pytest removes them with it)."""
    return tmp_path_factory.mktemp("homes")


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new empty folder per test under the run's base temporary folder, as pytest's own
    ``tmp_path`` gives (named after the test, removed with the base folder), made by
    ``mkdtemp``.

    Pytest numbers each test's folder by listing the base folder, which holds every
    earlier test's folders: a cost that grows with each test of the run (0.18 ms of
    CPU a test at 1,500 tests), for a number nothing reads.
    """
    name = re.sub(r"\W", "_", request.node.name)[:30]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path_factory.getbasetemp()))


_template_dirs: list[Path] = []


def _git_template() -> Path:
    """An empty ``hooks/`` as every new repository's template (see ``_pinned_git_env``)."""
    if not _template_dirs:
        path = Path(tempfile.mkdtemp(prefix="reconciler-test-git-template-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        (path / "hooks").mkdir()
        _template_dirs.append(path)
    return _template_dirs[0]


@pytest.fixture(autouse=True)
def _pinned_git_env(monkeypatch: pytest.MonkeyPatch, _homes: Path) -> Iterator[None]:
    """Every test sees the same Git identity and no user/global Git config.

    Nor Git's automatic housekeeping: a test's repositories are short-lived, and a
    ``git maintenance run --auto`` after each fetch and a ``git gc --auto`` after each
    commit and push were several thousand processes over the suite, each finding
    nothing to do. The cache's own repositories turn it off in their config and gc
    when due (``reconciler.source.runner.housekeep``, tests/source/test_housekeeping.py).
    """
    # mkdtemp, not tmp_path_factory.mktemp: that numbers a folder by listing the base
    # folder, which holds every earlier test's folders, a cost that grew with each test
    # (1.1 ms of CPU a test once it holds 1,500, against 0.03 ms for mkdtemp)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=_homes))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n"
        "[maintenance]\n\tauto = false\n"
        "[gc]\n\tauto = 0\n"
        "[receive]\n\tautogc = false\n"
        f"[init]\n\ttemplateDir = {_git_template()}\n"
    )
    yield


@pytest.fixture
def sandbox() -> Iterator[object]:
    """A fresh, empty sandbox API server per test (``reconciler.sandbox.testing``).

    Yields a ``SandboxHandle``: ``.url``, ``.kubeconfig``, ``.request_log()``,
    ``.reset_request_log()``; workloads become ready after 0.05 s.
    """
    from reconciler.sandbox.testing import running_sandbox

    with running_sandbox() as handle:
        yield handle
