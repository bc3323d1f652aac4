"""Scenarios of the real_cluster lane side by side on one cluster (``pytest -n``).

Each names a cluster and namespaces of its own (``tests/lanes.py``). Inventories are
found cluster-wide by the cluster's name, so under one shared name a scenario whose
catalog lacks an instance another scenario installed would take that instance for one
removed from Git and prune it: what makes the lane safe to run in parallel is checked
here on one sandbox, with a control showing the shared name would fail it.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.daemon.loop import Daemon
from reconciler.kube import KubeClient, read_inventories
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import running_sandbox
from tests.daemon.conftest import _settings, installed
from tests.factories import catalog_repo, write_catalog
from tests.lanes import FAIL_IMAGES

WITHOUT_API: dict[str, str | bytes | None] = {"clusters/prod/instances/api.yaml": None}


def _daemon(client: KubeClient, root: Path, suffix: str, *, shared: bool = False) -> Daemon:
    """A daemon on ``client``'s cluster, its catalog's namespaces ending in ``suffix``,
    and its cluster named ``prod<suffix>`` (``prod-shared`` when ``shared``). The first
    scenario (``root`` named ``a``) has the baseline catalog, the others lack api."""
    overrides = None if root.name == "a" else WITHOUT_API
    source = write_catalog(root / "template", overrides, suffix=suffix)
    name = f"prod{suffix}"
    if shared:  # the namespaces stay the scenario's own, the cluster's name is common
        cluster = source / "clusters" / name
        text = (cluster / "cluster.yaml").read_text().replace(f"name: {name}", "name: prod-shared")
        (cluster / "cluster.yaml").write_text(text)
        cluster.rename(source / "clusters" / "prod-shared")
        name = "prod-shared"
    repo = catalog_repo(source, root / "repos")
    return Daemon(_settings(repo, root, cluster=name), client, registry=installed())


def test_two_scenarios_on_one_cluster_never_touch_each_other(tmp_path: Path) -> None:
    api = ObjectRef("apps/v1", "Deployment", "team-api-aaaa", "api")
    with (
        running_sandbox(controller_delay=0.02, fail_images=FAIL_IMAGES) as sandbox,
        KubeClient.connect(str(sandbox.kubeconfig)) as client,
    ):
        first = _daemon(client, tmp_path / "a", "-aaaa")
        assert first.run_pass().ok
        assert client.get(api) is not None
        second = _daemon(client, tmp_path / "b", "-bbbb")
        outcome = second.run_pass()
        assert outcome.ok, outcome
        assert client.get(api) is not None  # the first scenario's, untouched
        assert sorted(read_inventories(client, "prod-aaaa")) == ["api", "web"]
        assert sorted(read_inventories(client, "prod-bbbb")) == ["web"]
        assert first.run_pass().ok


def test_under_one_shared_cluster_name_the_other_scenario_s_instance_is_pruned(
    tmp_path: Path,
) -> None:
    """The control: namespaces of their own are not enough."""
    api = ObjectRef("apps/v1", "Deployment", "team-api-aaaa", "api")
    with (
        running_sandbox(controller_delay=0.02, fail_images=FAIL_IMAGES) as sandbox,
        KubeClient.connect(str(sandbox.kubeconfig)) as client,
    ):
        first = _daemon(client, tmp_path / "a", "-aaaa", shared=True)
        assert first.run_pass().ok
        second = _daemon(client, tmp_path / "b", "-bbbb", shared=True)
        second.run_pass()
        assert client.get(api) is None
