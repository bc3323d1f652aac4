"""Validation of migration hooks: every bad input is a problem with file and line."""

from __future__ import annotations

import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import check_catalog
from reconciler.migrations import GROUP, Registry
from tests.factories import write_catalog

REGISTRY = Registry.from_entry_points(
    [
        EntryPoint("mark", "tests.migrations.samples:CreatesMarker", GROUP),
        EntryPoint("other", "tests.migrations.samples:NoUndo", GROUP),
    ]
)
V = "apps/podinfo/versions/{}/version.yaml"
JOB = """\
    apiVersion: batch/v1
    kind: Job
    metadata: {name: "${instance.name}-m"}
    spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: "${images.podinfo}"}]}}}
    """


def version_file(version: str, migrations: str) -> str:
    head = f"""\
        apiVersion: reconciler/v1
        kind: AppVersion
        app: podinfo
        version: {version}
        images:
          podinfo: ghcr.io/stefanprodan/podinfo:{version}
        parameters:
          replicas: {{default: 2}}
          message: {{default: hello}}
        migrations:
        """
    return textwrap.dedent(head) + textwrap.dedent(migrations)


def problems(tmp_path: Path, files: dict[str, str | bytes | None]) -> list[str]:
    root = write_catalog(tmp_path, files)
    return [str(p) for p in check_catalog(load_catalog(root), REGISTRY)]


def test_a_valid_migration_set_has_no_problems(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        {
            V.format("6.6.0"): version_file(
                "6.6.0",
                """\
                - name: add-index
                  phase: pre
                  check:
                    objectMissing: {apiVersion: v1, kind: ConfigMap, name: "${instance.name}-v2"}
                    deployedVersion: "<6.6.0"
                  job: migrations/m.yaml
                  undo: migrations/m.yaml
                - {name: mark, phase: post, python: mark}
                """,
            ),
            "apps/podinfo/versions/6.6.0/migrations/m.yaml": JOB,
        },
    )
    assert found == []


def test_bad_migrations_are_errors_with_file_and_line(tmp_path: Path) -> None:
    f = V.format("6.6.0")
    found = problems(
        tmp_path,
        {
            f: version_file(
                "6.6.0",
                """\
                - {name: unknown-code, phase: pre, python: "nobody.module:function"}
                - {name: not-a-job, phase: pre, job: migrations/cm.yaml}
                - {name: dup, phase: pre, python: mark}
                - {name: dup, phase: post, python: mark}
                - {name: undo-only, phase: pre, undo: migrations/m.yaml}
                - name: bad-ref
                  phase: pre
                  python: mark
                  check:
                    objectExists: {apiVersion: "v1/", kind: configmap, name: "Bad_Name"}
                    fieldEquals:
                      ref: {apiVersion: v1, kind: ConfigMap, name: "${params.nope}"}
                      path: data.x
                      value: "1"
                - {name: missing-file, phase: pre, job: migrations/none.yaml}
                """,
            ),
            "apps/podinfo/versions/6.6.0/migrations/m.yaml": JOB,
            "apps/podinfo/versions/6.6.0/migrations/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        },
    )
    expected = [
        f'{f}:11: migration "unknown-code": python migration "nobody.module:function" is not registered (registered: mark, other)',
        "apps/podinfo/versions/6.6.0/migrations/cm.yaml:1: a migration job file must hold exactly one batch/v1 Job, found v1 ConfigMap",
        f'{f}:14: migration name "dup" is used twice in this version',
        f'{f}:15: migration "undo-only" needs a job or a python entry point (it has an undo "migrations/m.yaml" without a run)',
        f'{f}:16: migration "bad-ref": check objectExists: apiVersion "v1/" is not "v1" or "group/version"',
        f'{f}:16: migration "bad-ref": check objectExists: kind "configmap" is not a Kubernetes kind (CamelCase, e.g. ConfigMap)',
        f'{f}:16: migration "bad-ref": check objectExists: name "Bad_Name" is not a valid Kubernetes name (a DNS name)',
        f'{f}:16: migration "bad-ref": check fieldEquals.ref: name "${{params.nope}}": podinfo 6.6.0 declares no parameter nope',
        f'{f}:25: migration job "migrations/none.yaml" does not exist',
    ]
    for message in expected:
        assert message in found, "\n".join(found)


def test_version_only_check_and_changed_checksum_are_warnings(tmp_path: Path) -> None:
    entry = """\
        - name: add-index
          phase: pre
          check: {deployedVersion: "<6.5.0"}
          job: migrations/m.yaml
        """
    found = problems(
        tmp_path,
        {
            V.format("6.5.0"): version_file("6.5.0", entry),
            "apps/podinfo/versions/6.5.0/migrations/m.yaml": JOB,
            V.format("6.6.0"): version_file("6.6.0", entry),
            "apps/podinfo/versions/6.6.0/migrations/m.yaml": JOB.replace("-m", "-m2"),
        },
    )
    f5, f6 = V.format("6.5.0"), V.format("6.6.0")
    assert (
        f'{f5}:11: warning: migration "add-index": its check is only deployedVersion; let the '
        "cluster's state decide (objectMissing, objectExists or fieldEquals) and keep the version "
        "as an extra filter"
    ) in found
    assert (
        f'{f6}:11: warning: migration "add-index" differs from the one 6.5.0 ships under the same '
        "name: where it already ran it will not run again; give changed logic a new name"
    ) in found
    assert not any("differs" in p for p in found if p.startswith(f5))


def test_same_definition_in_later_versions_is_not_a_warning(tmp_path: Path) -> None:
    entry = "- {name: add-index, phase: pre, job: migrations/m.yaml}\n"
    found = problems(
        tmp_path,
        {
            V.format("6.5.0"): version_file("6.5.0", entry),
            "apps/podinfo/versions/6.5.0/migrations/m.yaml": "# a comment is not a change\n" + JOB,
            V.format("6.6.0"): version_file("6.6.0", entry),
            "apps/podinfo/versions/6.6.0/migrations/m.yaml": JOB,
        },
    )
    assert found == []


def test_deprecation_warns_from_since_and_fails_from_remove_in(tmp_path: Path) -> None:
    plain = "- {name: old, phase: pre, python: mark}\n"
    marked = (
        "- {name: old, phase: pre, python: mark, "
        'deprecated: {since: 6.5.0, removeIn: 6.6.0, note: "all clusters run 6.x"}}\n'
    )
    files: dict[str, str | bytes | None] = {
        V.format("6.5.0"): version_file("6.5.0", plain),
        V.format("6.6.0"): version_file("6.6.0", marked),
    }
    found = problems(tmp_path, files)
    assert (
        f'{V.format("6.5.0")}:11: warning: migration "old" is deprecated since 6.5.0; it must be '
        "gone by 6.6.0 (all clusters run 6.x)"
    ) in found
    assert (
        f'{V.format("6.6.0")}:11: migration "old" was to be removed in 6.6.0; delete it from 6.6.0 '
        "(all clusters run 6.x)"
    ) in found
    bad = "- {name: old, phase: pre, python: mark, deprecated: {since: v1}}\n"
    found = problems(tmp_path / "bad", {V.format("6.6.0"): version_file("6.6.0", bad)})
    assert any('migration "old": deprecated: ' in p for p in found), found


def test_the_template_validates_with_the_installed_example_package() -> None:
    from tests.conftest import TEMPLATE

    found = check_catalog(load_catalog(TEMPLATE))
    assert [str(p) for p in found if "migration" in p.message] == []
