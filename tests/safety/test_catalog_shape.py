"""Issue 8: files the catalog format does not define are errors, never silently ignored.

SPEC section 3: unknown files or directories under apps/ and clusters/ (e.g. a
renamed ``instances/``), two files for one instance (``web.yaml`` and
``web.yml``), an empty ``manifests/``, and one object rendered by two
instances are validation errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.daemon.plan import check_catalog, plan_cluster
from tests.factories import BASE_FILES, write_catalog


def problems(root: Path) -> list[tuple[str, str, str]]:
    return [(p.file, str(p.severity), p.message) for p in check_catalog(load_catalog(root))]


def errors_for(root: Path, file: str) -> list[str]:
    return [m for f, sev, m in problems(root) if f == file and sev == "error"]


def test_renamed_instances_directory_is_an_error(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    (root / "clusters/prod/instances").rename(root / "clusters/prod/instance")
    assert errors_for(root, "clusters/prod/instance") == [
        "unknown directory instance/ in clusters/prod/ (expected: instances/)"
    ]


@pytest.mark.parametrize(
    ("rel", "needle"),
    [
        ("apps/podinfo/chanels.yaml", "unknown file chanels.yaml in apps/podinfo/"),
        ("apps/podinfo/versions/6.5.0/manifest/x.yaml", "unknown directory manifest/"),
        ("clusters/prod/instances/web.yaml.bak", "unexpected file in clusters/prod/instances/"),
        ("apps/stray.yaml", "unexpected file in apps/"),
    ],
)
def test_unknown_files_are_errors(tmp_path: Path, rel: str, needle: str) -> None:
    root = write_catalog(tmp_path, {rel: "x: 1\n"})
    found = [m for _, sev, m in problems(root) if sev == "error"]
    assert any(needle in m for m in found), found


def test_documentation_files_are_fine(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path, {"apps/podinfo/README.md": "# podinfo\n", "clusters/prod/NOTES.md": "x\n"}
    )
    assert [p for p in problems(root) if p[1] == "error"] == []


def test_two_files_for_one_instance(tmp_path: Path) -> None:
    other = BASE_FILES["clusters/prod/instances/web.yaml"].replace("replicas: 5", "replicas: 1")
    root = write_catalog(tmp_path, {"clusters/prod/instances/web.yml": other})
    assert errors_for(root, "clusters/prod/instances/web.yml") == [
        "instance web has two files: web.yaml and web.yml"
    ]
    web = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}["web"]
    assert web.reason == "CatalogInvalid" and web.objects == ()


def test_empty_manifests_is_an_error(tmp_path: Path) -> None:
    root = write_catalog(tmp_path, {"apps/podinfo/versions/6.6.0/manifests/deployment.yaml": None})
    (root / "apps/podinfo/versions/6.6.0/manifests").mkdir(exist_ok=True)
    assert errors_for(root, "apps/podinfo/versions/6.6.0") == [
        "version has no manifests (manifests/*.yaml)"
    ]


def test_one_object_rendered_by_two_instances(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: web\n"
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/manifests/shared.yaml": shared,
            "apps/podinfo/versions/6.6.0/manifests/shared.yaml": shared,
            "clusters/prod/cluster.yaml": None,
        },
    )
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["web"].reason == plans["api"].reason == "CatalogInvalid"
    assert "ConfigMap/web/shared is also rendered by instance api" in (plans["web"].message or "")
    assert main(["validate", str(root), "-o", "json"]) == 1
    found = json.loads(capsys.readouterr().out)["problems"]
    assert {p["file"] for p in found if "also rendered" in p["message"]} == {
        "clusters/prod/instances/api.yaml",
        "clusters/prod/instances/web.yaml",
    }


def test_one_object_rendered_by_three_instances_names_the_other_two_to_each(
    tmp_path: Path,
) -> None:
    """Each owner of a shared object is refused and names every other owner, once each."""
    shared = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: web\n"
    third = (
        "apiVersion: reconciler/v1\nkind: Instance\nname: cron\napp: podinfo\n"
        "channel: stable\nnamespace: cron\n"
    )
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/manifests/shared.yaml": shared,
            "apps/podinfo/versions/6.6.0/manifests/shared.yaml": shared,
            "clusters/prod/cluster.yaml": None,
            "clusters/prod/instances/cron.yaml": third,
        },
    )
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert {name: plan.reason for name, plan in plans.items()} == dict.fromkeys(
        ("api", "cron", "web"), "CatalogInvalid"
    )
    assert "also rendered by instance api and cron;" in (plans["web"].message or "")
    assert "also rendered by instance api and web;" in (plans["cron"].message or "")
