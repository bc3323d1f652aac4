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
from tests.lanes import LANE_DIRS, suffix_namespaces, suffix_path

ROOT = Path(__file__).resolve().parents[1]


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
