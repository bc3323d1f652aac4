"""``apps/<app>/builds.yaml`` (SPEC section 8): loading, every bad entry, render pinning.

Each bad input names the file and line; a broken entry never lets a version fall
back to its unpinned image (that would change what runs): the version becomes
invalid, so instances on it are ``CatalogInvalid`` and keep their last good state,
while other versions, apps and instances plan as usual.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.catalog.incremental import reload_catalog
from reconciler.daemon.plan import CATALOG_INVALID, plan_cluster
from reconciler.model.builds import ImageBuild
from reconciler.source.changes import changed_between
from tests.factories import BASE_FILES, write_catalog

D5 = "sha256:" + "5" * 64
D6 = "sha256:" + "6" * 64
REPO = "ghcr.io/stefanprodan/podinfo"

# 6.5.0 names the intermediate tag of the three-tag scheme
V650 = BASE_FILES["apps/podinfo/versions/6.5.0/version.yaml"].replace(
    "podinfo:6.5.0", "podinfo:6.5.0-rev1"
)


def builds_yaml(body: str, app: str = "podinfo") -> str:
    return f"apiVersion: reconciler/v1\nkind: ImageBuilds\napp: {app}\nbuilds:\n{body}"


GOOD = builds_yaml(f"  6.5.0:\n    podinfo:\n      tag: 6.5.0-rev1-b5.1\n      digest: {D5}\n")


def catalog_with(tmp_path: Path, builds: str | None) -> Path:
    files: dict[str, str | bytes | None] = {"apps/podinfo/versions/6.5.0/version.yaml": V650}
    if builds is not None:
        files["apps/podinfo/builds.yaml"] = builds
    return write_catalog(tmp_path, files)


def errors(root: Path) -> list[str]:
    return [str(p) for p in load_catalog(root).problems if p.is_error]


def image_of(root: Path, instance: str = "web") -> str:
    catalog = load_catalog(root)
    plan = next(p for p in plan_cluster(catalog, "prod") if p.name == instance)
    assert plan.ok, plan.message
    deployment = next(o for o in plan.objects if o["kind"] == "Deployment")
    return str(deployment["spec"]["template"]["spec"]["containers"][0]["image"])


def test_a_valid_builds_file_is_loaded_with_lines_and_pins_the_render(tmp_path: Path) -> None:
    root = catalog_with(tmp_path, GOOD)
    catalog = load_catalog(root)
    assert errors(root) == []
    builds = catalog.apps["podinfo"].builds
    assert builds is not None and builds.file == "apps/podinfo/builds.yaml"
    assert builds.for_version("6.5.0") == {"podinfo": ImageBuild("6.5.0-rev1-b5.1", D5)}
    assert builds.lines[("6.5.0", "podinfo")] == 6
    assert image_of(root) == f"{REPO}:6.5.0-rev1-b5.1@{D5}"


def test_without_builds_the_render_is_unchanged(tmp_path: Path) -> None:
    root = catalog_with(tmp_path, None)
    assert load_catalog(root).apps["podinfo"].builds is None
    assert image_of(root) == f"{REPO}:6.5.0-rev1"


def test_a_version_without_an_entry_keeps_its_image(tmp_path: Path) -> None:
    root = catalog_with(tmp_path, GOOD)
    assert image_of(root, "api") == f"{REPO}:6.6.0"  # api resolves to 6.6.0


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        (
            f"  6.5.0:\n    nginx:\n      tag: 6.5.0-rev1-b5.1\n      digest: {D5}\n",
            6,
            'image nginx: "nginx" is not an image of this version (images: podinfo)',
        ),
        (
            f"  6.5.0:\n    podinfo:\n      tag: 6.5.0-rev1\n      digest: {D5}\n",
            6,
            'tag "6.5.0-rev1" is not a long tag',
        ),
        (
            f"  6.5.0:\n    podinfo:\n      tag: 6.5.0-rev2-b1\n      digest: {D5}\n",
            6,
            'tag "6.5.0-rev2-b1" is a build of 6.5.0-rev2, but the version names',
        ),
        (
            "  6.5.0:\n    podinfo:\n      tag: 6.5.0-rev1-b5.1\n      digest: sha256:abc\n",
            8,
            "sha256:abc",
        ),
    ],
    ids=["unknown-image", "not-long", "other-intermediate", "bad-digest"],
)
def test_a_broken_entry_names_file_and_line_and_invalidates_its_version(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    root = catalog_with(tmp_path, builds_yaml(body))
    found = errors(root)
    assert len(found) == 1, found
    assert found[0].startswith(f"apps/podinfo/builds.yaml:{line}: "), found
    assert message in found[0]
    catalog = load_catalog(root)
    assert not catalog.apps["podinfo"].versions["6.5.0"].valid
    assert catalog.apps["podinfo"].versions["6.6.0"].valid  # only the version it pins
    plans = {p.name: p for p in plan_cluster(catalog, "prod")}
    # web runs 6.5.0: never rendered unpinned, it keeps its last good state
    assert plans["web"].reason == CATALOG_INVALID and not plans["web"].objects
    assert "apps/podinfo/builds.yaml" in (plans["web"].message or "")
    assert plans["api"].ok  # another version of the app reconciles


def test_an_entry_for_an_unknown_version_is_an_error_that_affects_no_version(
    tmp_path: Path,
) -> None:
    body = f"  9.9.9:\n    podinfo:\n      tag: 9.9.9-rev1-b1\n      digest: {D5}\n"
    root = catalog_with(tmp_path, builds_yaml(body))
    assert errors(root) == [
        "apps/podinfo/builds.yaml:5: builds for 9.9.9, which is not a version of podinfo "
        "(have: 6.5.0, 6.6.0)"
    ]
    assert all(v.valid for v in load_catalog(root).apps["podinfo"].versions.values())


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (builds_yaml("  6.5.0: {}\n", app="other"), "apps/podinfo/builds.yaml:3: "),
        ("apiVersion: reconciler/v1\nkind: ImageBuilds\napp: podinfo\nbuilds: [\n", "builds.yaml:"),
        (
            "apiVersion: reconciler/v1\nkind: Channels\napp: podinfo\nbuilds: {}\n",
            "builds.yaml:2: ",
        ),
    ],
    ids=["wrong-app", "bad-yaml", "wrong-kind"],
)
def test_an_unreadable_builds_file_invalidates_every_version_of_its_app_only(
    tmp_path: Path, text: str, where: str
) -> None:
    files: dict[str, str | bytes | None] = {
        "apps/podinfo/versions/6.5.0/version.yaml": V650,
        "apps/podinfo/builds.yaml": text,
        "apps/other/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: other\n",
    }
    root = write_catalog(tmp_path, files)
    found = errors(root)
    assert found and all(where in e for e in found if "podinfo/builds.yaml" in e), found
    catalog = load_catalog(root)
    assert not any(v.valid for v in catalog.apps["podinfo"].versions.values())
    plans = plan_cluster(catalog, "prod")
    assert {p.reason for p in plans} == {CATALOG_INVALID}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_incremental_reload_picks_up_a_builds_change_and_reloads_only_that_app(
    tmp_path: Path,
) -> None:
    root = catalog_with(tmp_path, GOOD)
    (root / "apps/other").mkdir()
    (root / "apps/other/app.yaml").write_text("apiVersion: reconciler/v1\nkind: App\nname: other\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    old = git(root, "rev-parse", "HEAD")
    previous = load_catalog(root)
    (root / "apps/podinfo/builds.yaml").write_text(GOOD.replace("b5.1", "b6.1").replace(D5, D6))
    git(root, "commit", "-qam", "rebuild")
    changed = changed_between(root, old, git(root, "rev-parse", "HEAD"))
    assert changed == {"apps/podinfo/builds.yaml"}
    reloaded = reload_catalog(previous, root, changed)
    assert reloaded.apps["other"] is previous.apps["other"]
    assert reloaded.clusters["prod"] is previous.clusters["prod"]
    builds = reloaded.apps["podinfo"].builds
    assert builds is not None
    assert builds.for_version("6.5.0")["podinfo"] == ImageBuild("6.5.0-rev1-b6.1", D6)
    full = load_catalog(root)
    assert reloaded.apps["podinfo"].builds == full.apps["podinfo"].builds
    assert reloaded.problems == full.problems
    (root / "apps/podinfo/builds.yaml").write_text(GOOD.replace("b5.1", "b5"))
    broken = reload_catalog(reloaded, root, {"apps/podinfo/builds.yaml"})
    assert broken.apps["podinfo"].versions["6.5.0"].valid  # b5 is a long tag too
    (root / "apps/podinfo/builds.yaml").write_text(GOOD.replace("rev1-b5.1", "rev1"))
    broken = reload_catalog(broken, root, {"apps/podinfo/builds.yaml"})
    assert not broken.apps["podinfo"].versions["6.5.0"].valid
    assert broken.problems == load_catalog(root).problems
