"""Each step of an upgrade path rolls with that step's own batch plan (issue 10).

A path 6.5.0 -> 6.6.0 -> 6.7.0 is two rollouts; each step's ``version.yaml`` says how
its replicas move, so the plan of a step is never the final version's.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import plan_cluster
from reconciler.daemon.rolling import rolls
from reconciler.model.catalog import Batch
from tests.factories import DEPLOYMENT_TEMPLATE, write_catalog


def version(v: str, upgrade_from: str, batches: str) -> str:
    return (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\n"
        f"version: {v}\nupgradeFrom: '{upgrade_from}'\n"
        f"images:\n  podinfo: ghcr.io/stefanprodan/podinfo:{v}\n"
        "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
        f"rollout:\n  batches: {batches}\n"
    )


def test_each_step_of_a_path_rolls_with_its_own_plan(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.6.0/version.yaml": version(
                "6.6.0", ">=6.0.0", "[1, 50%, 50%]"
            ),
            "apps/podinfo/versions/6.7.0/version.yaml": version("6.7.0", ">=6.6.0", "[2, 100%]"),
            "apps/podinfo/versions/6.7.0/manifests/deployment.yaml": DEPLOYMENT_TEMPLATE,
            "clusters/prod/instances/web.yaml": (
                "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
                "version: 6.7.0\nnamespace: web\nparameters: {replicas: 5}\n"
            ),
        },
    )
    catalog = load_catalog(root)
    first = {p.name: p for p in plan_cluster(catalog, "prod", {"web": "6.5.0", "api": "6.6.0"})}
    step_one = first["web"]
    assert step_one.version is not None and step_one.version.key == "6.6.0"
    assert step_one.resolution.upgrade_path == ("6.6.0", "6.7.0")
    settings = rolls(step_one, "6.5.0", None)
    assert settings is not None
    assert settings.batches == (Batch(1), Batch(50, percent=True), Batch(50, percent=True))
    assert settings.targets(5) == (1, 3, 5)

    second = {p.name: p for p in plan_cluster(catalog, "prod", {"web": "6.6.0", "api": "6.6.0"})}
    step_two = second["web"]
    assert step_two.version is not None and step_two.version.key == "6.7.0"
    settings = rolls(step_two, "6.6.0", None)
    assert settings is not None
    assert settings.batches == (Batch(2), Batch(100, percent=True))
    assert settings.targets(5) == (2, 5)
