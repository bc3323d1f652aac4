"""Checksums tell a changed definition apart from the same one shipped again."""

from __future__ import annotations

from reconciler.migrations import job_checksum, migration_checksum, python_checksum
from reconciler.model.catalog import AppVersion, Migration, Template
from reconciler.model.migrations import Deprecation, MigrationCheck
from reconciler.model.version import parse_version

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "m"}}


def test_job_checksum_covers_the_entry_and_the_job_but_not_deprecation() -> None:
    m = Migration("m", "pre", job="migrations/m.yaml")
    base = job_checksum(m, JOB)
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    assert job_checksum(Migration("m", "pre", job="migrations/m.yaml"), dict(JOB)) == base
    assert job_checksum(m, {**JOB, "metadata": {"name": "n"}}) != base
    assert job_checksum(m, JOB, undo=JOB) != base
    checked = Migration(
        "m", "pre", job="migrations/m.yaml", check=MigrationCheck(deployed_version="<2")
    )
    assert job_checksum(checked, JOB) != base
    deprecated = Migration("m", "pre", job="migrations/m.yaml", deprecated=Deprecation("2.0.0"))
    assert job_checksum(deprecated, JOB) == base


def test_python_checksum_follows_the_distribution_version() -> None:
    m = Migration("m", "pre", python="ledger-m")
    assert python_checksum(m, "ledger-migrations", "0.1.0") != python_checksum(
        m, "ledger-migrations", "0.2.0"
    )
    version = AppVersion(
        app="ledger",
        version=parse_version("2.0.0"),
        directory="apps/ledger/versions/2.0.0",
        migration_jobs={"j": Template("j.yaml", 0, JOB)},
    )
    dists = {"ledger-m": ("ledger-migrations", "0.1.0")}
    assert migration_checksum(version, m, dists) == python_checksum(m, "ledger-migrations", "0.1.0")
    j = Migration("j", "pre", job="migrations/j.yaml")
    assert migration_checksum(version, j) == job_checksum(j, JOB)
