"""Loading and validating a catalog: every rule of SPEC section 1, every bad input.

Each test writes a real catalog with one defect and checks that the problem
names the file (relative to the catalog root), the line and a clear message,
and that the rest of the catalog is still loaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import check_catalog
from reconciler.model.errors import UsageError
from reconciler.model.problems import Problem
from tests.factories import write_catalog


def problems_of(root: Path) -> list[Problem]:
    return check_catalog(load_catalog(root))


def errors_of(root: Path) -> list[str]:
    return [str(p) for p in problems_of(root) if p.is_error]


def test_baseline_catalog_is_valid(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    catalog = load_catalog(root)
    assert problems_of(root) == []
    assert sorted(catalog.apps["podinfo"].versions) == ["6.5.0", "6.6.0"]
    assert sorted(catalog.clusters["prod"].instances) == ["api", "web"]
    web = catalog.clusters["prod"].instances["web"]
    assert web.channel == "stable" and web.parameters == {"replicas": 5}
    assert web.origin.file == "clusters/prod/instances/web.yaml"
    assert web.origin.line("channel") == 5


def test_instances_share_the_strings_they_have_in_common(tmp_path: Path) -> None:
    """A catalog lives as long as the daemon, with thousands of instance files naming
    the same app, namespace, channel and keys: one string of each serves them all."""
    catalog = load_catalog(write_catalog(tmp_path))
    web, api = (catalog.clusters["prod"].instances[n] for n in ("web", "api"))
    assert web.app == api.app and web.app is api.app
    key = lambda i: next(k for k in i.origin.lines if k == "apiVersion")  # noqa: E731
    assert key(web) is key(api)


def test_missing_root_is_an_environment_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_catalog(tmp_path / "nope")


def test_not_a_catalog(tmp_path: Path) -> None:
    assert errors_of(tmp_path) == [
        ". : no apps/ or clusters/ directory here; is this a catalog checkout?".replace(" :", ":")
    ]


def test_unknown_channel_names_file_line_and_known_channels(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": """\
            apiVersion: reconciler/v1
            kind: Instance
            name: web
            app: podinfo
            namespace: web
            parameters: {replicas: 5}
            channel: stabel
            """
        },
    )
    errors = errors_of(root)
    assert errors == [
        'clusters/prod/instances/web.yaml:7: channel "stabel" is not defined for app podinfo '
        "(known: fast, stable)"
    ] or errors == [
        'clusters/prod/instances/web.yaml:7: channel "stabel" is not defined for app podinfo '
        "(known: stable, fast)"
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "clusters/prod/instances/web.yaml:1: file is empty"),
        ("---\n", "clusters/prod/instances/web.yaml:1: file is empty"),
        (
            "- a\n- b\n",
            "clusters/prod/instances/web.yaml:1: expected a mapping (key: value) at the top level, got a list",
        ),
        (
            "just text\n",
            "clusters/prod/instances/web.yaml:1: expected a mapping (key: value) at the top level, got a string",
        ),
        ("a: [1\n", "clusters/prod/instances/web.yaml:2: invalid YAML"),
        (
            "apiVersion: reconciler/v1\nkind: Instance\n\tname: web\n",
            "clusters/prod/instances/web.yaml:3: tab character in indentation",
        ),
        (
            "apiVersion: reconciler/v1\nkind: Widget\nname: web\n",
            'clusters/prod/instances/web.yaml:2: unknown kind "Widget" here (this file must be kind Instance)',
        ),
        (
            "apiVersion: v1\nkind: Instance\nname: web\n",
            'clusters/prod/instances/web.yaml:1: apiVersion must be "reconciler/v1", got "v1"',
        ),
        (
            "kind: Instance\nname: web\n",
            'clusters/prod/instances/web.yaml:1: missing "apiVersion: reconciler/v1"',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: stable\nchannel: fast\n",
            'clusters/prod/instances/web.yaml:7: duplicate key "channel"',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: other\napp: podinfo\nnamespace: web\nchannel: stable\n",
            'clusters/prod/instances/web.yaml:3: name "other" does not match the file name "web" that holds it',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: stable\nversion: 6.5.0\n",
            "clusters/prod/instances/web.yaml:7: set exactly one of channel or version (found both)",
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\n",
            "clusters/prod/instances/web.yaml:4: set exactly one of channel or version (found neither)",
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: stable\nsuspend: yes please\n",
            'clusters/prod/instances/web.yaml:7: suspend must be true or false, got a string "yes please"',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchanel: stable\n",
            'clusters/prod/instances/web.yaml:6: unknown field "chanel"',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nchannel: stable\n",
            'clusters/prod/instances/web.yaml:1: missing required field "namespace"',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: Web_NS\nchannel: stable\n",
            'clusters/prod/instances/web.yaml:5: namespace "Web_NS" is not a valid DNS-1123 label',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: stable\nrollout: {batches: [1, fifty]}\n",
            'clusters/prod/instances/web.yaml:7: rollout.batches[1] must be a replica count or a percentage like "50%"',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nversion: 6.5\n",
            'clusters/prod/instances/web.yaml:6: version must be a string, got a number 6.5 (quote it: "6.5")',
        ),
        (
            "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nnamespace: web\nchannel: stable\n---\nkind: Extra\n",
            "clusters/prod/instances/web.yaml:8: expected one YAML document, found 2",
        ),
    ],
)
def test_bad_instance_file_is_reported_and_others_still_resolve(
    tmp_path: Path, content: str, expected: str
) -> None:
    root = write_catalog(tmp_path, {"clusters/prod/instances/web.yaml": content})
    catalog = load_catalog(root)
    errors = [str(p) for p in check_catalog(catalog) if p.is_error]
    assert any(e.startswith(expected) for e in errors), errors
    # the broken instance is kept, marked invalid, and the other one is untouched
    assert catalog.clusters["prod"].instances["web"].valid is False
    assert catalog.clusters["prod"].instances["api"].valid is True
    assert "clusters/prod/instances/web.yaml" in catalog.files_with_errors


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": b"apiVersion: reconciler/v1\nkind: Instance\nname: w\xffb\n"
        },
    )
    assert any(
        e.startswith("clusters/prod/instances/web.yaml:3: file is not valid UTF-8")
        for e in errors_of(root)
    )


def test_huge_file_is_refused_without_parsing(tmp_path: Path) -> None:
    huge = "apiVersion: reconciler/v1\n" + "# padding\n" * 300_000
    root = write_catalog(tmp_path, {"clusters/prod/instances/web.yaml": huge})
    assert any("file is too large" in e for e in errors_of(root))


def test_version_directory_must_match_version(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    src = root / "apps/podinfo/versions/6.6.0"
    src.rename(root / "apps/podinfo/versions/6.6.1")
    errors = errors_of(root)
    assert any(
        e.startswith(
            'apps/podinfo/versions/6.6.1/version.yaml:4: version "6.6.0" does not match its directory "6.6.1"'
        )
        for e in errors
    ), errors


@pytest.mark.parametrize(
    ("dirname", "message"),
    [
        ("v6.7.0", 'must not start with "v"'),
        ("6.7", "is not a SemVer 2.0.0 version"),
        ("6.7.0+build.1", "must not carry build metadata"),
    ],
)
def test_bad_version_directory_names(tmp_path: Path, dirname: str, message: str) -> None:
    root = write_catalog(tmp_path)
    (root / "apps/podinfo/versions" / dirname).mkdir()
    errors = errors_of(root)
    assert any(
        e.startswith(f"apps/podinfo/versions/{dirname}: version directory name") and message in e
        for e in errors
    ), errors


def test_channel_pointing_to_missing_or_yanked_version(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/channels.yaml": """\
            apiVersion: reconciler/v1
            kind: Channels
            app: podinfo
            channels:
              stable: 6.5.0
              fast: 6.9.0
              old: 6.6.0
            """,
            "apps/podinfo/versions/6.6.0/version.yaml": """\
            apiVersion: reconciler/v1
            kind: AppVersion
            app: podinfo
            version: 6.6.0
            yanked: true
            images: {podinfo: "ghcr.io/stefanprodan/podinfo:6.6.0"}
            parameters: {replicas: {default: 2}, message: {default: hi}}
            """,
        },
    )
    errors = errors_of(root)
    assert (
        'apps/podinfo/channels.yaml:6: channel "fast" points to 6.9.0, which is not a version '
        "of podinfo (have: 6.5.0, 6.6.0)" in errors
    )
    assert any(
        e.startswith('apps/podinfo/channels.yaml:7: channel "old" points to 6.6.0, which is yanked')
        for e in errors
    )


def test_unknown_app_and_mismatched_app_names(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: podinfo2\n",
            "clusters/prod/instances/api.yaml": (
                "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: nosuch\n"
                "namespace: team-api\nversion: latest\n"
            ),
        },
    )
    errors = errors_of(root)
    assert (
        'apps/podinfo/app.yaml:3: name "podinfo2" does not match the directory "podinfo" that holds it'
        in errors
    )
    assert any(
        e.startswith("clusters/prod/instances/api.yaml:") and '"nosuch"' in e for e in errors
    ), errors


def test_unknown_placeholder_and_parameter_in_manifest(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/manifests/extra.yaml": """\
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: extra
            data:
              a: ${param.replicas}
              b: ${params.replica}
              c: ${images.nginx}
              d: "${params.message"
            """
        },
    )
    errors = [e for e in errors_of(root) if "extra.yaml" in e]
    f = "apps/podinfo/versions/6.5.0/manifests/extra.yaml"
    assert errors[0].startswith(f'{f}:6: unknown placeholder "${{param.replicas}}"')
    assert errors[1].startswith(f'{f}:7: unknown parameter in "${{params.replica}}"')
    assert errors[2].startswith(f'{f}:8: unknown image in "${{images.nginx}}"')
    assert errors[3].startswith(f"{f}:9: unterminated placeholder")


def test_broken_manifest_marks_version_invalid(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path, {"apps/podinfo/versions/6.5.0/manifests/bad.yaml": "kind: ConfigMap\n---\n- 1\n"}
    )
    catalog = load_catalog(root)
    assert catalog.apps["podinfo"].versions["6.5.0"].valid is False
    assert catalog.apps["podinfo"].versions["6.6.0"].valid is True
    errors = [str(p) for p in catalog.problems if p.is_error]
    assert (
        'apps/podinfo/versions/6.5.0/manifests/bad.yaml:1: manifest object needs a string "apiVersion"'
        in errors
    )
    assert any(
        e.startswith(
            "apps/podinfo/versions/6.5.0/manifests/bad.yaml:3: a manifest document must be"
        )
        for e in errors
    )


def test_symlinked_manifest_leaving_the_version_directory(tmp_path: Path) -> None:
    root = write_catalog(tmp_path / "cat")
    secret = tmp_path / "secret.yaml"
    secret.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n")
    os.symlink(secret, root / "apps/podinfo/versions/6.5.0/manifests/stolen.yaml")
    os.symlink(
        root / "apps/podinfo/versions/6.6.0/manifests/deployment.yaml",
        root / "apps/podinfo/versions/6.5.0/manifests/borrowed.yaml",
    )
    errors = errors_of(root)
    assert any(
        e.startswith("apps/podinfo/versions/6.5.0/manifests/stolen.yaml: manifest leaves")
        for e in errors
    )
    assert any(
        e.startswith("apps/podinfo/versions/6.5.0/manifests/borrowed.yaml: manifest leaves")
        for e in errors
    )


def test_symlinked_instance_file_out_of_the_repo(tmp_path: Path) -> None:
    root = write_catalog(tmp_path / "cat")
    outside = tmp_path / "outside.yaml"
    outside.write_text("apiVersion: reconciler/v1\n")
    os.symlink(outside, root / "clusters/prod/instances/evil.yaml")
    errors = errors_of(root)
    assert any(
        e.startswith("clusters/prod/instances/evil.yaml: file leaves clusters/prod/instances")
        for e in errors
    )


def test_migration_job_path_must_stay_in_version(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.6.0/version.yaml": """\
            apiVersion: reconciler/v1
            kind: AppVersion
            app: podinfo
            version: 6.6.0
            images: {podinfo: "ghcr.io/stefanprodan/podinfo:6.6.0"}
            parameters: {replicas: {default: 2}, message: {default: hi}}
            migrations:
              - {name: escape, phase: pre, job: ../../6.5.0/manifests/deployment.yaml}
              - {name: missing, phase: post, job: migrations/none.yaml}
              - {name: nothing, phase: post}
              - {name: ok, phase: pre, job: migrations/ok.yaml, timeoutSeconds: 60}
            """,
            "apps/podinfo/versions/6.6.0/migrations/ok.yaml": """\
            apiVersion: batch/v1
            kind: Job
            metadata: {name: "${instance.name}-migrate"}
            spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: "${images.podinfo}"}]}}}
            """,
        },
    )
    catalog = load_catalog(root)
    errors = [str(p) for p in catalog.problems if p.is_error]
    f = "apps/podinfo/versions/6.6.0/version.yaml"
    assert (
        f'{f}:8: migration job "../../6.5.0/manifests/deployment.yaml" leaves the version directory apps/podinfo/versions/6.6.0'
        in errors
    )
    assert f'{f}:9: migration job "migrations/none.yaml" does not exist' in errors
    assert f'{f}:10: migration "nothing" needs a job or a python entry point' in errors
    version = catalog.apps["podinfo"].versions["6.6.0"]
    assert set(version.migration_jobs) == {"ok"}


def test_image_reference_checks(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/versions/6.5.0/version.yaml": """\
            apiVersion: reconciler/v1
            kind: AppVersion
            app: podinfo
            version: 6.5.0
            images:
              podinfo: ghcr.io/stefanprodan/podinfo:6.5.0+build
              sidecar: nginx
              proxy: envoyproxy/envoy:latest
              tool: example.com/tool:6.4.0-rev3
            parameters: {replicas: {default: 2}, message: {default: hi}}
            """
        },
    )
    problems = [str(p) for p in problems_of(root)]
    f = "apps/podinfo/versions/6.5.0/version.yaml"
    assert any(
        p.startswith(f'{f}:6: image "ghcr.io/stefanprodan/podinfo:6.5.0+build": tag')
        for p in problems
    )
    assert any(p.startswith(f'{f}:7: warning: image "nginx" has no tag') for p in problems)
    assert any(
        p.startswith(f'{f}:8: warning: image "envoyproxy/envoy:latest" uses the tag "latest"')
        for p in problems
    )
    assert any(
        p.startswith(f'{f}:9: warning: image tag "6.4.0-rev3" is a build of 6.4.0')
        for p in problems
    )


def test_upgrade_from_must_be_a_valid_range(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    path = root / "apps/podinfo/versions/6.6.0/version.yaml"
    path.write_text(path.read_text().replace('">=6.0.0"', '">>6"'))
    errors = errors_of(root)
    assert any(
        e.startswith("apps/podinfo/versions/6.6.0/version.yaml:5: upgradeFrom:") for e in errors
    ), errors


def test_problems_are_all_reported_in_one_run(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/app.yaml": "apiVersion: reconciler/v1\nkind: App\n",
            "clusters/prod/instances/web.yaml": "- nope\n",
            "clusters/prod/instances/api.yaml": "apiVersion: reconciler/v1\nkind: Instance\nname: api\n",
        },
    )
    files = {p.file for p in problems_of(root) if p.is_error}
    assert files == {
        "apps/podinfo/app.yaml",
        "clusters/prod/instances/web.yaml",
        "clusters/prod/instances/api.yaml",
    }


def test_cluster_file_is_optional(tmp_path: Path) -> None:
    root = write_catalog(tmp_path, {"clusters/prod/cluster.yaml": None})
    catalog = load_catalog(root)
    assert catalog.clusters["prod"].cluster.allowed_namespaces is None
    assert problems_of(root) == []


def test_an_error_in_channels_does_not_hide_an_instance_typo(tmp_path: Path) -> None:
    root = write_catalog(
        tmp_path,
        {
            "apps/podinfo/channels.yaml": """\
            apiVersion: reconciler/v1
            kind: Channels
            app: podinfo
            channels:
              stable: 6.5.0
              fast: 6.9.0
            """,
            "clusters/prod/instances/web.yaml": """\
            apiVersion: reconciler/v1
            kind: Instance
            name: web
            app: podinfo
            namespace: web
            channel: stabel
            """,
        },
    )
    errors = errors_of(root)
    assert any(
        e.startswith('apps/podinfo/channels.yaml:6: channel "fast" points to 6.9.0') for e in errors
    )
    assert any(
        e.startswith('clusters/prod/instances/web.yaml:6: channel "stabel" is not defined')
        for e in errors
    )


def test_unloadable_channels_file_is_catalog_invalid_for_channel_instances(tmp_path: Path) -> None:
    from reconciler.daemon.plan import plan_cluster

    root = write_catalog(tmp_path, {"apps/podinfo/channels.yaml": "channels: [\n"})
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["web"].reason == "CatalogInvalid"  # follows a channel: the broken file is why
    assert (
        plans["web"].message is not None and "apps/podinfo/channels.yaml:2" in plans["web"].message
    )
    assert plans["api"].ok  # a range does not need the channels file


def test_directory_names_must_be_dns_labels(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    (root / "clusters/Prod_EU/instances").mkdir(parents=True)
    errors = errors_of(root)
    assert any(
        e.startswith('clusters/Prod_EU: cluster directory "Prod_EU" is not a valid DNS-1123 label')
        for e in errors
    )


def test_broken_instance_keeps_its_readable_selection(tmp_path: Path) -> None:
    from reconciler.daemon.plan import plan_cluster

    root = write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": "apiVersion: reconciler/v1\nkind: Instance\nname: web\n"
            "app: podinfo\nnamespace: web\nchannel: stable\nsuspend: maybe\n"
        },
    )
    web = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}["web"]
    assert web.reason == "CatalogInvalid"
    assert web.resolution.source == "channel:stable" and web.resolution.app == "podinfo"


@pytest.mark.parametrize("layout", ["perInstance", "perNamespace"])
def test_cluster_yaml_chooses_the_inventory_layout(tmp_path: Path, layout: str) -> None:
    root = write_catalog(tmp_path)
    cluster = root / "clusters/prod/cluster.yaml"
    cluster.write_text(cluster.read_text() + f"inventory: {layout}\n")
    assert problems_of(root) == []
    assert load_catalog(root).clusters["prod"].cluster.inventory == layout


def test_the_inventory_layout_defaults_to_one_configmap_per_instance(tmp_path: Path) -> None:
    assert load_catalog(write_catalog(tmp_path)).clusters["prod"].cluster.inventory == "perInstance"


def test_an_unknown_inventory_layout_names_the_file_and_applies_nothing(tmp_path: Path) -> None:
    root = write_catalog(tmp_path)
    cluster = root / "clusters/prod/cluster.yaml"
    cluster.write_text(cluster.read_text() + "inventory: shared\n")
    errors = errors_of(root)
    assert len(errors) == 1 and errors[0].startswith("clusters/prod/cluster.yaml:6:")
    assert "perInstance" in errors[0] and "perNamespace" in errors[0]
    # fail closed: the cluster's limits are unknown, so nothing is written to it
    assert not load_catalog(root).clusters["prod"].cluster.valid
