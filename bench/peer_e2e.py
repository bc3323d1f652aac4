"""Peer e2e: the public e2e suites of two Kubernetes clients, run against ``reconciler sandbox``.

The sandbox stands in for a real API server in every test and benchmark, so each place
where it is more lenient than a real one hides an engine bug. Other projects' e2e
suites, written against real clusters, are an outside check of that: this runs

- kubernetes-client/python's ``kubernetes/e2e_test/`` (use the checkout whose version
  matches the ``kubernetes`` package installed beside the suite), and
- lightkube's ``e2e-tests/``

each against a fresh ``reconciler sandbox`` (its own child process, as a CI cluster is
fresh per run), and prints passed/failed/skipped per suite. Tests that need a real
container (exec, port-forward, or a container's own output in its log) are named and
left out of the goal: the sandbox simulates containers, it does not run them.

The checkouts are not fetched here (CI has no network): pass their paths. The suites
need their client installed in the interpreter given by ``--python`` (with pytest and,
for lightkube, pytest-asyncio); a separate virtualenv keeps them out of this project's
locked dependencies, for example::

    uv venv /tmp/peer && uv pip install --python /tmp/peer/bin/python \\
        kubernetes==37.0.2 lightkube==0.21.0 pytest pytest-asyncio
    .venv/bin/python bench/peer_e2e.py --python /tmp/peer/bin/python \\
        --kubernetes-python ~/src/kubernetes-client-python --lightkube ~/src/lightkube

``--smoke`` runs the same machinery over a two-test miniature of each layout (written
to a temporary folder), so tests/test_bench.py can check the script still runs.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import re
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# bench/git.py must not shadow GitPython's ``git``: this folder goes to the end of the path
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
from benchkit import sandbox_process  # noqa: E402

# Each suite's own run takes under two minutes; this bounds a hung watch.
SUITE_TIMEOUT = 1200
# What in a test's source means it needs a real container.
REAL_CONTAINER = re.compile(
    r"_pod_exec\b|_pod_portforward\b|\bportforward\(|\.exec\(|\.log\(|read_namespaced_pod_log"
)
# kubernetes/e2e_test imports itself as ``kubernetes.e2e_test``, a folder the installed
# package does not ship: this plugin adds the checkout's folder to the package's path
# (only that subpackage resolves there; the client itself stays the installed one).
#
# It also bounds each test's setup, call and teardown (``PEER_E2E_TEST_TIMEOUT`` seconds,
# default TEST_TIMEOUT): a watch the sandbox never ends would otherwise hang the whole
# suite until SUITE_TIMEOUT and lose every other test's result. Past the bound, SIGALRM
# raises in the test's thread (a blocked socket read included, PEP 475), so that test
# fails, named, and the suite goes on.
TEST_TIMEOUT = 120
PLUGIN = f"""\
import os
import signal

import kubernetes
import pytest

kubernetes.__path__.append(os.environ["PEER_E2E_KUBERNETES_DIR"])
BOUND = float(os.environ.get("PEER_E2E_TEST_TIMEOUT", "{TEST_TIMEOUT}"))


class PeerTestTimeout(Exception):
    pass


def _expired(signum, frame):
    raise PeerTestTimeout("over its per-test bound (PEER_E2E_TEST_TIMEOUT, default {{BOUND:g}} s)")


def pytest_configure(config):
    config.addinivalue_line("markers", "peer_e2e_timeout(seconds): this test's own bound")


def _bounded(item):
    marker = item.get_closest_marker("peer_e2e_timeout")
    bound = float(marker.args[0]) if marker else BOUND
    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, bound)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _bounded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _bounded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _bounded(item)
"""


@dataclass(frozen=True)
class Suite:
    """Where a peer keeps its e2e tests, relative to its checkout (also the cwd they expect)."""

    name: str
    package: str
    tests: str


SUITES = (
    Suite("kubernetes-client/python", "kubernetes", "kubernetes/e2e_test"),
    Suite("lightkube", "lightkube", "e2e-tests"),
)


@dataclass
class Outcome:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed) + len(self.skipped)


def needing_real_containers(tests_dir: Path) -> set[str]:
    """Names (``Class.test`` or ``test``) of test functions whose source uses exec,
    port-forward or pod logs."""
    found: set[str] = set()
    for path in sorted(tests_dir.glob("test_*.py")):
        source = path.read_text()
        for scope, node in _test_functions(ast.parse(source)):
            if REAL_CONTAINER.search(ast.get_source_segment(source, node) or ""):
                found.add(f"{scope}{node.name}")
    return found


def _test_functions(
    tree: ast.Module,
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        scope = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for item in members:
            if isinstance(item, functions) and item.name.startswith("test"):
                yield scope, item


def read_junit(path: Path) -> Outcome:
    """One outcome per test case (a failing teardown makes a passed call a failure)."""
    results: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        classname = case.get("classname", "").rsplit(".", 1)[-1]
        name = case.get("name", "")
        key = f"{classname}.{name}" if classname[:1].isupper() else name
        if case.find("failure") is not None or case.find("error") is not None:
            results[key] = "failed"
        elif case.find("skipped") is not None:
            results.setdefault(key, "skipped")
        else:
            results.setdefault(key, "passed")
    outcome = Outcome()
    for key, result in sorted(results.items()):
        getattr(outcome, result).append(key)
    return outcome


def run_suite(
    suite: Suite,
    checkout: Path,
    python: str,
    workdir: Path,
    test_timeout: float,
    suite_timeout: float = SUITE_TIMEOUT,
    autoload: bool = True,
) -> Outcome:
    """The suite's pytest run against a fresh sandbox: its outcome by test.

    ``autoload`` False: pytest loads no plugin of the interpreter's own (the smoke's
    miniatures run under this project's interpreter, whose plugins, hypothesis and
    xdist among them, they do not use: 0.35 s of CPU per run). A peer's own
    interpreter holds the plugins its suite needs (pytest-asyncio for lightkube).
    """
    tests = checkout / suite.tests
    if not tests.is_dir():
        raise SystemExit(f"{checkout}: no {suite.tests}/ (is this a {suite.name} checkout?)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "peer_e2e_plugin.py").write_text(PLUGIN)
    junit = workdir / "junit.xml"
    with sandbox_process(workdir / "sandbox") as (url, kubeconfig):
        if not url.startswith("http"):  # it exited before serving: no figures to give
            raise SystemExit(f"{suite.name}: reconciler sandbox did not start")
        print(f"{suite.name}: sandbox {url}", flush=True)
        env = {
            "KUBECONFIG": str(kubeconfig),
            "PEER_E2E_KUBERNETES_DIR": str(checkout / "kubernetes"),
            "PYTHONPATH": str(workdir),
            "PATH": "/usr/bin:/bin",
            "HOME": str(workdir),
            "PEER_E2E_TEST_TIMEOUT": str(test_timeout),
        }
        if not autoload:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        # -P: ``python -m`` would put the working directory (the checkout) first on the
        # path, and kubernetes-client/python's checkout holds a ``kubernetes`` package of
        # its own (generated code of another layout) that would shadow the installed
        # client the plugin extends; every module then failed at import.
        command = [
            python,
            "-P",
            "-m",
            "pytest",
            "-p",
            "peer_e2e_plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rfE",
            # the figures come from the junit report; pytest's own traceback format parses
            # the whole source file of every frame (kubernetes' core_v1_api.py is 1.7 MB):
            # 1.7 s of CPU for the smoke's single failing exec test, more per real failure
            "--tb=native",
            f"--junitxml={junit}",
            suite.tests,
        ]
        done = subprocess.run(
            command,
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=suite_timeout,
            check=False,
        )
    (workdir / "pytest.log").write_text(done.stdout + done.stderr)
    if not junit.exists():
        raise SystemExit(f"{suite.name}: pytest wrote no report:\n{done.stdout}\n{done.stderr}")
    return read_junit(junit)


def version_of(python: str, package: str) -> str:
    """``package``'s version as ``python`` sees it ("not installed" if it has none).

    This interpreter answers for itself without a child (a Python start, 0.05 s of CPU
    per suite, which the smoke run pays twice).
    """
    if Path(python).absolute() == Path(sys.executable).absolute():
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "not installed"


def report(suite: Suite, version: str, outcome: Outcome, excluded: set[str]) -> tuple[int, int]:
    """Print one suite's figures; return (passed, total) of the tests the goal counts."""
    print(
        f"{suite.name} ({suite.package} {version}): {len(outcome.passed)} passed, "
        f"{len(outcome.failed)} failed, {len(outcome.skipped)} skipped of {outcome.total}"
    )

    def base(test: str) -> str:
        return test.split("[", 1)[0]

    left_out = [t for t in outcome.passed + outcome.failed + outcome.skipped if base(t) in excluded]
    print(f"  needing a real container (exec, port-forward, logs), left out: {len(left_out)}")
    for test in sorted(left_out):
        print(f"    {test}")
    for label, tests in (("failed", outcome.failed), ("skipped", outcome.skipped)):
        counted = [t for t in tests if base(t) not in excluded]
        if counted:
            print(f"  {label} among the rest: {len(counted)}")
            for test in counted:
                print(f"    {test}")
    counted_passed = sum(1 for t in outcome.passed if base(t) not in excluded)
    return counted_passed, outcome.total - len(left_out)


# The miniatures leave the client's generated API classes out (importing CoreV1Api takes
# 0.7 s of CPU): they check the machinery around a suite (the plugin's path and bounds,
# the junit report, what is left out), while the real suites check the client's calls.
SMOKE_KUBERNETES = """\
import json
import urllib.request

from kubernetes import client, config
from kubernetes.e2e_test import base  # resolved through the plugin, as in the real suite


def test_lists_namespaces():
    config.load_kube_config()
    assert base.__name__ == "kubernetes.e2e_test.base"
    host = client.Configuration.get_default_copy().host
    with urllib.request.urlopen(f"{host}/api/v1/namespaces", timeout=60) as r:
        names = [n["metadata"]["name"] for n in json.load(r)["items"]]
    assert "default" in names


def test_exec_is_left_out():
    # a pod's exec, as the real suite's ``_pod_exec`` tests ask for it: the sandbox
    # simulates containers and serves none
    from kubernetes.stream import ws_client

    config.load_kube_config()
    configuration = client.Configuration.get_default_copy()
    url = f"{configuration.host}/api/v1/namespaces/default/pods/none/exec"
    ws_client.websocket_call(configuration, "GET", url, query_params=[("command", "true")])
"""
SMOKE_LIGHTKUBE = """\
import pytest


def test_reads_the_default_namespace():
    # as lightkube's tests, from $KUBECONFIG (through no client: see above)
    import json
    import os
    import urllib.request

    import yaml

    with open(os.environ["KUBECONFIG"]) as f:
        server = yaml.safe_load(f)["clusters"][0]["cluster"]["server"]
    with urllib.request.urlopen(f"{server}/api/v1/namespaces/default", timeout=60) as r:
        assert json.load(r)["metadata"]["name"] == "default"


@pytest.mark.skip(reason="a skipped test is counted as skipped")
def test_skipped():
    pass


@pytest.mark.peer_e2e_timeout(1)
def test_a_hung_watch_fails_at_the_bound():
    import time

    time.sleep(3600)
"""
# The smoke's hung test carries its own 1 s bound (the marker above; the smoke waits that
# long for it, so it is short): it fails after that and the suite goes on, while the
# passing tests keep the default bound, which a busy machine cannot reach. A plugin that
# no longer bounds tests fails the smoke at its suite bound, not 20 minutes later.
SMOKE_SUITE_TIMEOUT = 300


def write_smoke_checkouts(root: Path) -> tuple[Path, Path]:
    """Miniatures of both layouts: one passing test each, then an exec test, or a skip and
    a test that hangs until the per-test bound fails it."""
    k8s = root / "kubernetes-python"
    (k8s / "kubernetes" / "e2e_test").mkdir(parents=True)
    # the real checkout's ``kubernetes`` is a package of its own, which must not shadow
    # the installed client: the miniature's fails every test that imports it
    (k8s / "kubernetes" / "__init__.py").write_text(
        'raise ImportError("the checkout\'s kubernetes package shadowed the installed client")\n'
    )
    (k8s / "kubernetes" / "e2e_test" / "__init__.py").write_text("")
    (k8s / "kubernetes" / "e2e_test" / "base.py").write_text("")
    (k8s / "kubernetes" / "e2e_test" / "test_smoke.py").write_text(SMOKE_KUBERNETES)
    lightkube = root / "lightkube"
    (lightkube / "e2e-tests").mkdir(parents=True)
    (lightkube / "e2e-tests" / "test_smoke.py").write_text(textwrap.dedent(SMOKE_LIGHTKUBE))
    return k8s, lightkube


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kubernetes-python", type=Path, help="a kubernetes-client/python checkout"
    )
    parser.add_argument("--lightkube", type=Path, help="a lightkube checkout")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with the clients, pytest and pytest-asyncio (default: this one)",
    )
    parser.add_argument(
        "--test-timeout",
        type=float,
        default=TEST_TIMEOUT,
        metavar="SECONDS",
        help=f"a test (setup, call or teardown) running longer fails (default {TEST_TIMEOUT})",
    )
    parser.add_argument("--smoke", action="store_true", help="run over miniature suites")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="peer-e2e-") as tmp:
        work = Path(tmp)
        checkouts: dict[str, Path | None] = {
            "kubernetes-client/python": args.kubernetes_python,
            "lightkube": args.lightkube,
        }
        suite_timeout = SMOKE_SUITE_TIMEOUT if args.smoke else SUITE_TIMEOUT
        if args.smoke:
            k8s, lightkube = write_smoke_checkouts(work / "smoke")
            checkouts = {"kubernetes-client/python": k8s, "lightkube": lightkube}
        if not any(checkouts.values()):
            parser.error("give --kubernetes-python and/or --lightkube (or --smoke)")
        passed = total = all_passed = all_total = 0
        for index, suite in enumerate(SUITES):
            checkout = checkouts[suite.name]
            if checkout is None:
                continue
            checkout = checkout.resolve()
            work_dir = work / f"suite-{index}"
            outcome = run_suite(
                suite,
                checkout,
                args.python,
                work_dir,
                args.test_timeout,
                suite_timeout,
                autoload=not args.smoke,
            )
            excluded = needing_real_containers(checkout / suite.tests)
            version = version_of(args.python, suite.package)
            counted, counted_total = report(suite, version, outcome, excluded)
            passed += counted
            total += counted_total
            all_passed += len(outcome.passed)
            all_total += outcome.total
        print(f"peer e2e, all tests: {all_passed} of {all_total} passed")
        print(f"peer e2e, tests not needing a real container: {passed} of {total} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
