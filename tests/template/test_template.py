"""Checks that catalog-repo-template keeps the shape users copy.

The template is documentation that must run: every selection style, channel and
release state (prerelease, yanked, deprecated, multi-step upgrades) appears in
it, every reconciler file names its JSON Schema for editors, and the CI and
pre-commit wiring point at a hook this repository really provides. The last
tests load it with the real catalog, resolve and render stages and compare with
what its README promises.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from semver import Version

from tests.conftest import REPO_ROOT, TEMPLATE

API = "reconciler/v1"
SCHEMA_SOURCE = REPO_ROOT / "reconciler" / "catalog" / "schemas"
SCHEMA_COPY = TEMPLATE / ".schemas"
KIND_SCHEMA = {
    "App": "app",
    "Channels": "channels",
    "AppVersion": "appversion",
    "Cluster": "cluster",
    "Instance": "instance",
    "ImageBuilds": "imagebuilds",
    "Waves": "waves",
}
CHANNELS = {"stable", "fast", "experimental"}
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")

# What the README's table says each instance runs today.
EXPECTED_RESOLUTION = {
    ("staging", "web"): "6.6.0",
    ("staging", "web-preview"): "6.7.0-rc.1",
    ("staging", "ledger-queue"): "7.4.1",
    ("staging", "ledger"): "2.1.0",
    ("prod", "web"): "6.5.0",
    ("prod", "partner-api"): "6.5.0",
    ("prod", "status-page"): "6.6.0",
    ("prod", "ledger-queue"): "7.2.4",
    ("prod", "ledger"): "2.0.0",
    ("prod", "shop"): "2.6.2",
}
# Upgrade paths the README promises (deployed version -> steps to the target).
EXPECTED_PATHS = {
    ("ledger", "1.4.2", "2.1.0"): ("1.5.0", "2.0.0", "2.1.0"),
    ("podinfo", "6.4.0", "6.6.0"): ("6.5.0", "6.6.0"),
    ("redis", "7.0.15", "7.4.1"): ("7.2.4", "7.4.1"),
}


def _rel(path: Path) -> str:
    return path.relative_to(TEMPLATE).as_posix()


def _yaml_files() -> list[Path]:
    return sorted(p for p in TEMPLATE.rglob("*") if p.suffix in (".yaml", ".yml"))


# libyaml's safe loader where PyYAML has it: the template's files are parsed at
# collection, in every worker, and the pure-Python loader took 0.3 s of each
_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_SAFE)


def _reconciler_files() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in _yaml_files():
        docs = list(yaml.load_all(path.read_text(), Loader=_SAFE))
        if len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("apiVersion") == API:
            yield path, docs[0]


# parsed once per process: the parametrizations below are collected by every worker
RECONCILER_FILES = [p for p, _ in _reconciler_files()]

# The image-builds example (SPEC section 8): one channel and two versions are enough
# to show the three-tag scheme, so it is not held to the release-state examples' shape.
BUILDS_APP = "shop"


def _apps() -> list[Path]:
    """The apps that show every release state (channels, yanked, deprecated, steps)."""
    return sorted(p for p in (TEMPLATE / "apps").iterdir() if p.is_dir() and p.name != BUILDS_APP)


def _versions(app_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        d.name: _load(d / "version.yaml")
        for d in sorted((app_dir / "versions").iterdir())
        if d.is_dir()
    }


def _instances() -> list[tuple[str, Path, dict[str, Any]]]:
    return [
        (path.parent.parent.name, path, _load(path))
        for path in sorted((TEMPLATE / "clusters").glob("*/instances/*.yaml"))
    ]


def _at_least(text: str) -> Version:
    """The bound of an ``upgradeFrom: ">=X"``, the only form the template uses."""
    assert text.startswith(">="), f"template upgradeFrom should be '>=X', got {text!r}"
    return Version.parse(text[2:])


# ---------------------------------------------------------------- files and schemas


@pytest.mark.parametrize("path", _yaml_files(), ids=_rel)
def test_every_yaml_file_parses(path: Path) -> None:
    docs = [d for d in yaml.load_all(path.read_text(), Loader=_SAFE) if d is not None]
    assert docs, f"{_rel(path)} holds no YAML document"


def test_template_has_the_expected_files() -> None:
    for rel in (
        "README.md",
        ".pre-commit-config.yaml",
        ".github/workflows/validate.yaml",
        ".gitlab-ci.yml",
        "clusters/staging/cluster.yaml",
        "clusters/prod/cluster.yaml",
    ):
        assert (TEMPLATE / rel).is_file(), rel
    assert len(_apps()) >= 3


@pytest.mark.parametrize("path", RECONCILER_FILES, ids=_rel)
def test_reconciler_file_starts_with_schema_modeline(path: Path) -> None:
    kind = _load(path)["kind"]
    schema = KIND_SCHEMA[kind]
    depth = len(path.relative_to(TEMPLATE).parts) - 1
    expected = f"# yaml-language-server: $schema={'../' * depth}.schemas/{schema}.schema.json"
    assert path.read_text().splitlines()[0] == expected
    target = (path.parent / expected.split("=", 1)[1]).resolve()
    assert target == (SCHEMA_COPY / f"{schema}.schema.json").resolve()


@pytest.mark.parametrize("path", RECONCILER_FILES, ids=_rel)
def test_reconciler_file_matches_its_schema(path: Path) -> None:
    doc = _load(path)
    schema = json.loads((SCHEMA_SOURCE / f"{KIND_SCHEMA[doc['kind']]}.schema.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert errors == []


def test_schema_copies_equal_the_package_schemas() -> None:
    """Editors read the copies through the modelines; they must never drift from the package's.

    After changing a schema in reconciler/catalog/schemas/, copy it:
    cp reconciler/catalog/schemas/*.json catalog-repo-template/.schemas/
    """
    assert SCHEMA_COPY.is_dir(), "catalog-repo-template/.schemas/ is missing"
    for kind in KIND_SCHEMA.values():
        name = f"{kind}.schema.json"
        assert (SCHEMA_COPY / name).read_text() == (SCHEMA_SOURCE / name).read_text(), name


# ---------------------------------------------------------------- apps and versions


@pytest.mark.parametrize("app_dir", _apps(), ids=lambda p: p.name)
def test_app_has_three_channels_on_live_versions(app_dir: Path) -> None:
    channels = _load(app_dir / "channels.yaml")
    versions = _versions(app_dir)
    assert _load(app_dir / "app.yaml")["name"] == app_dir.name
    assert channels["app"] == app_dir.name
    assert set(channels["channels"]) == CHANNELS
    for channel, target in channels["channels"].items():
        assert target in versions, f"{channel} -> missing {target}"
        assert not versions[target].get("yanked"), f"{channel} -> yanked {target}"
    assert Version.parse(channels["channels"]["experimental"]).prerelease


@pytest.mark.parametrize("app_dir", _apps(), ids=lambda p: p.name)
def test_app_shows_every_release_state(app_dir: Path) -> None:
    versions = _versions(app_dir)
    assert 4 <= len(versions) <= 6
    for name, doc in versions.items():
        assert doc["app"] == app_dir.name
        assert doc["version"] == name
    assert any(Version.parse(v).prerelease for v in versions)
    assert any(d.get("deprecated") for d in versions.values())
    yanked = [v for v, d in versions.items() if d.get("yanked")]
    assert yanked
    for v in yanked:
        lines = (app_dir / "versions" / v / "version.yaml").read_text().splitlines()
        at = lines.index("yanked: true")
        assert lines[at - 1].startswith("# "), f"{v}: say why it is yanked in a comment"


@pytest.mark.parametrize("app_dir", _apps(), ids=lambda p: p.name)
def test_app_needs_a_multi_step_upgrade(app_dir: Path) -> None:
    """The oldest version cannot jump straight to the fast channel's version."""
    versions = _versions(app_dir)
    oldest = min(Version.parse(v) for v in versions)
    fast = _load(app_dir / "channels.yaml")["channels"]["fast"]
    assert "upgradeFrom" in versions[fast]
    assert oldest < _at_least(versions[fast]["upgradeFrom"])


@pytest.mark.parametrize("app_dir", _apps(), ids=lambda p: p.name)
def test_manifests_use_only_declared_placeholders(app_dir: Path) -> None:
    fixed = {"instance.name", "instance.namespace", "app.name", "app.version"}
    for version_dir in sorted((app_dir / "versions").iterdir()):
        doc = _load(version_dir / "version.yaml")
        known = fixed | {f"params.{p}" for p in doc.get("parameters", {})}
        known |= {f"images.{i}" for i in doc.get("images", {})}
        files = sorted(version_dir.glob("manifests/*.yaml"))
        files += sorted(version_dir.glob("migrations/*.yaml"))
        assert files
        for path in files:
            used = set(PLACEHOLDER.findall(path.read_text()))
            assert used <= known, f"{_rel(path)}: unknown {sorted(used - known)}"


@pytest.mark.parametrize("app_dir", _apps(), ids=lambda p: p.name)
def test_migrations_name_their_job_files(app_dir: Path) -> None:
    registered = {ep.name for ep in entry_points(group="reconciler.migrations")}
    for version_dir in sorted((app_dir / "versions").iterdir()):
        migrations = _load(version_dir / "version.yaml").get("migrations") or []
        names = [m["name"] for m in migrations]
        assert len(names) == len(set(names))
        for m in migrations:
            if "python" in m:
                assert m["python"] in registered, f"{m['python']} is not installed (make install)"
                continue
            job = version_dir / m["job"]
            assert job.resolve().is_relative_to(version_dir.resolve())
            assert _load(job)["kind"] == "Job", _rel(job)


def test_some_version_shows_migrations_and_rollout() -> None:
    docs = [d for app in _apps() for d in _versions(app).values()]
    migrations = [m for d in docs for m in d.get("migrations") or []]
    assert {m["phase"] for m in migrations} == {"pre", "post", "uninstall"}
    assert {m["scope"] for m in migrations} == {"app", "global"}
    assert any("deployedVersion" in m.get("check", {}) for m in migrations)
    assert any("python" in m for m in migrations)
    state_keys = {"objectMissing", "objectExists", "fieldEquals"}
    for m in migrations:  # SPEC: the cluster's state decides, the version only filters
        check = m.get("check", {})
        assert not check or state_keys & set(check), f"{m['name']}: version-only check"
    assert any(d.get("rollout", {}).get("batches") == [1, "50%", "50%"] for d in docs)


# ---------------------------------------------------------------- clusters and instances


def test_instances_use_every_selection_style() -> None:
    styles: set[str] = set()
    for _, _, doc in _instances():
        if "channel" in doc:
            channel = doc["channel"]
            if channel == "experimental":
                assert doc.get("allowPrerelease") is True
            styles.add(f"channel:{channel}")
            continue
        version = doc["version"]
        if version == "latest":
            styles.add("latest")
        elif version[:1] in "^~":
            styles.add("caret-or-tilde")
        elif " " in version:
            styles.add("range")
        else:
            Version.parse(version)
            styles.add("exact")
    assert styles == {
        "channel:stable",
        "channel:fast",
        "channel:experimental",
        "exact",
        "range",
        "caret-or-tilde",
        "latest",
    }


@pytest.mark.parametrize(
    ("cluster", "path", "doc"), _instances(), ids=[_rel(p) for _, p, _ in _instances()]
)
def test_instance_fits_its_cluster(cluster: str, path: Path, doc: dict[str, Any]) -> None:
    limits = _load(TEMPLATE / "clusters" / cluster / "cluster.yaml")
    assert limits["name"] == cluster
    assert limits["allowClusterScoped"] is False
    assert doc["name"] == path.stem
    assert ("channel" in doc) != ("version" in doc)
    assert (TEMPLATE / "apps" / doc["app"]).is_dir()
    assert any(fnmatch.fnmatchcase(doc["namespace"], p) for p in limits["allowedNamespaces"])


# ---------------------------------------------------------------- CI and pre-commit


def test_ci_runs_validate_on_pull_requests_and_pushes() -> None:
    workflow = _load(TEMPLATE / ".github/workflows/validate.yaml")
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1: on -> True
    assert {"pull_request", "push"} <= set(triggers)
    runs = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert any("pip install" in r for r in runs)
    assert any(r.strip() == "reconciler validate" for r in runs)
    gitlab = _load(TEMPLATE / ".gitlab-ci.yml")
    assert "reconciler validate" in gitlab["validate"]["script"]


def test_pre_commit_config_uses_the_hook_this_repository_provides() -> None:
    hooks = {h["id"]: h for h in _load(REPO_ROOT / ".pre-commit-hooks.yaml")}
    hook = hooks["reconciler-validate"]
    assert hook["entry"] == "reconciler validate --allow-uninstalled-migrations"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert re.search(hook["files"], "apps/podinfo/channels.yaml")
    assert re.search(hook["files"], "clusters/prod/instances/web.yaml")
    assert not re.search(hook["files"], "README.md")
    config = _load(TEMPLATE / ".pre-commit-config.yaml")
    used = {h["id"] for repo in config["repos"] for h in repo["hooks"]}
    assert used == {"reconciler-validate"}


# ---------------------------------------------------------------- the real stages


def test_template_loads_without_problems() -> None:
    from reconciler.catalog import load_catalog, validate_catalog

    problems = validate_catalog(load_catalog(TEMPLATE))
    assert [str(p) for p in problems] == []


def test_instances_resolve_and_render_as_the_readme_says() -> None:
    from reconciler.catalog import load_catalog
    from reconciler.render import render_instance
    from reconciler.resolve.resolver import resolve_cluster

    catalog = load_catalog(TEMPLATE)
    seen: dict[tuple[str, str], str | None] = {}
    for cluster in ("staging", "prod"):
        for resolution in resolve_cluster(catalog, cluster):
            seen[(cluster, resolution.instance)] = resolution.version
            assert resolution.error is None and not resolution.warnings
            instance = catalog.clusters[cluster].instances[resolution.instance]
            version = catalog.apps[instance.app].versions[str(resolution.version)]
            result = render_instance(catalog, instance, version)
            assert [str(p) for p in result.problems] == []
            assert "${" not in json.dumps(result.objects)
    assert seen == EXPECTED_RESOLUTION


@pytest.mark.parametrize(("app", "deployed", "target"), list(EXPECTED_PATHS))
def test_upgrade_paths_go_in_steps(app: str, deployed: str, target: str) -> None:
    from reconciler.catalog import load_catalog
    from reconciler.model.catalog import Instance
    from reconciler.resolve.resolver import resolve_instance

    catalog = load_catalog(TEMPLATE)
    instance = Instance(name="probe", cluster="staging", app=app, namespace="web", version=target)
    resolution = resolve_instance(instance, catalog.apps[app], deployed=deployed)
    assert resolution.version == target
    assert resolution.upgrade_path == EXPECTED_PATHS[(app, deployed, target)]


def test_builds_app_names_intermediate_tags() -> None:
    """SPEC section 8: a version's images name the intermediate tag; rebuilds go to builds.yaml."""
    from reconciler.model.images import parse_build_tag, parse_image

    versions = _versions(TEMPLATE / "apps" / BUILDS_APP)
    assert versions
    for name, doc in versions.items():
        for ref in doc["images"].values():
            tag = parse_image(ref).tag
            build = parse_build_tag(tag or "")
            assert build is not None and not build.is_long, f"{name}: {ref}"
            assert str(build.version) == name and build.intermediate == tag
