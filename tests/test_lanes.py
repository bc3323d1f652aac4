"""The real_cluster lane's naming: each test's catalog names a cluster and namespaces of its own.

Scenarios of the lane run side by side against one cluster (``pytest -n``); what keeps
them apart is that every name the engine finds cluster-wide (inventories by cluster
name, namespaces) ends in the test's suffix.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from reconciler.catalog.loader import load_catalog
from tests.factories import write_catalog
from tests.lanes import suffix_namespaces, suffix_path


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
