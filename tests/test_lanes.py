"""The real_cluster lane's naming: each test's catalog names a cluster and namespaces of its own.

Scenarios of the lane run side by side against one cluster (``pytest -n``); what keeps
them apart is that every name the engine finds cluster-wide (inventories by cluster
name, namespaces) ends in the test's suffix.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.catalog.loader import load_catalog
from tests.conftest import pytest_collection_modifyitems
from tests.factories import write_catalog
from tests.lanes import LANE_DIRS, REAL_ENV, suffix_namespaces, suffix_path

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]


def test_a_cluster_directory_and_its_name_end_in_the_suffix() -> None:
    assert suffix_path("clusters/prod/instances/web.yaml", "-ab12") == (
        "clusters/prod-ab12/instances/web.yaml"
    )
    assert suffix_path("clusters/prod/cluster.yaml", "-ab12") == "clusters/prod-ab12/cluster.yaml"
    assert suffix_path("apps/podinfo/app.yaml", "-ab12") == "apps/podinfo/app.yaml"
    text = "kind: Cluster\nname: prod\nallowedNamespaces: [web, team-*]\n"
    doc = yaml.safe_load(suffix_namespaces("clusters/prod/cluster.yaml", text, "-ab12"))
    assert doc["name"] == "prod-ab12"
    assert doc["allowedNamespaces"] == ["web-ab12", "team-*-ab12"]


def test_without_a_suffix_nothing_changes() -> None:
    text = "kind: Cluster\nname: prod\n"
    assert suffix_path("clusters/prod/cluster.yaml", "") == "clusters/prod/cluster.yaml"
    assert suffix_namespaces("clusters/prod/cluster.yaml", text, "") == text


def test_a_suffixed_catalog_loads_as_the_test_s_own_cluster(tmp_path: Path) -> None:
    """The loader requires a cluster's name to be its directory's: both are renamed."""
    catalog = load_catalog(write_catalog(tmp_path, suffix="-ab12"))
    assert list(catalog.clusters) == ["prod-ab12"]
    entry = catalog.clusters["prod-ab12"]
    assert entry.namespaces == {"web": "web-ab12", "api": "team-api-ab12"}


def test_make_test_real_collects_the_lane_s_folders() -> None:
    """The Makefile's REAL_PATHS are LANE_DIRS (the collection hook guards LANE_DIRS)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    paths = [line.split(":=", 1)[1].split() for line in lines if line.startswith("REAL_PATHS")]
    assert paths == [list(LANE_DIRS)]
    assert all((ROOT / d).is_dir() for d in LANE_DIRS)


class _Item:
    """What the hook reads of a collected test: its node id and its marks."""

    def __init__(self, nodeid: str, real: bool) -> None:
        self.nodeid = nodeid
        self.marks = {"real_cluster": pytest.mark.real_cluster.mark} if real else {}

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.marks.get(name)


def test_a_real_cluster_test_outside_the_lane_s_folders_is_refused(
    pytestconfig: pytest.Config,
) -> None:
    """tests/conftest.py's collection hook: the lane's folders pass, anywhere else is refused."""
    inside = [_Item("tests/kube/test_x.py::test_x[real]", True)]
    elsewhere = [_Item("tests/safety/test_y.py::test_y[sandbox]", False)]
    pytest_collection_modifyitems(pytestconfig, inside + elsewhere)  # type: ignore[arg-type]
    stray = _Item("tests/safety/test_y.py::test_y[real]", True)
    with pytest.raises(pytest.UsageError, match=r"tests/safety/test_y.py::test_y\[real\]"):
        pytest_collection_modifyitems(pytestconfig, [*inside, stray])  # type: ignore[list-item]


# The lane's selection (tests/lanes.py, hooked in by tests/conftest.py), run by an inner
# pytest on a lane scenario of each kind. Its folder is one of LANE_DIRS, as the hook requires.
SCENARIOS = """
import pytest

from tests.lanes import LANES, real_kubeconfig, skip_cluster_holds


@pytest.fixture(params=LANES)
def lane(request):
    if request.param == "real":
        real_kubeconfig()
    return request.param


def test_both(lane):
    pass


@pytest.mark.sandbox_lane_only("needs the sandbox's clock")
def test_marked(lane):
    assert lane == "sandbox"


def test_skips_on_real(lane):
    if lane == "real":
        pytest.skip("needs the sandbox's clock")


def test_cluster_holds(lane, request):
    if lane == "real":
        skip_cluster_holds(request.node, "the cluster holds a real reconciler's ledger")


@pytest.mark.parametrize("size", [1, 2])
def test_sized(lane, size):
    pass


def test_no_lane():
    pass
"""
HOOKS = (
    "import sys\n\n"
    f"sys.path.insert(0, {str(ROOT)!r})  # xdist's workers start with the outer run's path\n"
    "from tests.conftest import (\n"
    "    pytest_addoption, pytest_collection_modifyitems, pytest_runtest_makereport,\n"
    "    pytest_testnodedown,\n)\n"
)
MARKERS = (
    "[pytest]\nmarkers =\n"
    "    real_cluster: the lane\n"
    "    sandbox_lane_only(reason): the sandbox's\n"
)
SCENE = "tests/daemon/test_scene.py"


@pytest.fixture
def scene(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A folder with the suite's lane hooks and the scenarios above; the lane off."""
    monkeypatch.delenv(REAL_ENV, raising=False)
    pytester.makeini(MARKERS)
    pytester.makeconftest(HOOKS)
    (pytester.path / SCENE).parent.mkdir(parents=True)
    (pytester.path / SCENE).write_text(SCENARIOS)
    return pytester


def collected(result: pytest.RunResult) -> set[str]:
    return {line.split("::", 1)[1] for line in result.outlines if line.startswith(SCENE)}


TWINS = {
    "test_both[sandbox]",
    "test_skips_on_real[sandbox]",
    "test_cluster_holds[sandbox]",
    "test_sized[sandbox-1]",
    "test_sized[sandbox-2]",
}


def test_a_twin_is_deselected_only_with_the_option(scene: pytest.Pytester) -> None:
    everything = collected(scene.runpytest("--collect-only", "-q"))
    assert len(everything) == 13 and everything >= TWINS
    result = scene.runpytest("--collect-only", "-q", "--lane-runs-elsewhere")
    assert collected(result) == everything - TWINS
    assert "test_marked[sandbox]" in collected(result)  # the lane skips its [real] variant
    result.stdout.fnmatch_lines(["8/13 tests collected (5 deselected)*"])


def test_a_sandbox_variant_collected_without_its_twin_is_kept(scene: pytest.Pytester) -> None:
    result = scene.runpytest(
        "--collect-only", "-q", "--lane-runs-elsewhere", f"{SCENE}::test_both[sandbox]"
    )
    assert collected(result) == {"test_both[sandbox]"}


def test_the_unit_run_with_the_option_runs_each_scenario_s_sandbox_side_once(
    scene: pytest.Pytester,
) -> None:
    """Without the lane the [real] variants skip; the marked one with its own reason."""
    result = scene.runpytest("-rs", "--lane-runs-elsewhere")
    result.assert_outcomes(passed=2, skipped=6, deselected=5)
    result.stdout.fnmatch_lines(["*test_scene.py*: needs the sandbox's clock"])


def test_in_the_lane_an_unmarked_run_time_skip_fails_and_a_marked_one_skips(
    scene: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REAL_ENV, str(scene.path / "kubeconfig"))
    result = scene.runpytest("-m", "real_cluster", "-rfs")
    # test_both, test_sized x2 pass; test_marked and test_cluster_holds skip
    result.assert_outcomes(passed=3, skipped=2, failed=1, deselected=7)
    result.stdout.fnmatch_lines(
        [
            "*test_skips_on_real[[]real[]] skipped in the real_cluster lane "
            "(needs the sandbox's clock), unmarked: `make test` runs this scenario only here*"
            'mark it @pytest.mark.sandbox_lane_only("needs the sandbox\'s clock")*',
            "SKIPPED*needs the sandbox's clock",
            "SKIPPED*: the cluster holds a real reconciler's ledger",
        ],
        consecutive=False,
    )


def test_a_sandbox_lane_only_mark_without_a_reason_is_refused(scene: pytest.Pytester) -> None:
    (scene.path / SCENE).write_text(
        SCENARIOS.replace('sandbox_lane_only("needs the sandbox\'s clock")', "sandbox_lane_only")
    )
    result = scene.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_marked[[]*[]]: @pytest.mark.sandbox_lane_only needs a reason*"]
    )


def test_xdist_s_summary_counts_the_workers_deselections(scene: pytest.Pytester) -> None:
    """Under ``-n`` (`make test`) the controller collects nothing: the workers' count."""
    result = scene.runpytest("-n", "2", "-p", "xdist", "--lane-runs-elsewhere")
    result.stdout.fnmatch_lines(["*2 passed, 6 skipped, 5 deselected*"])
