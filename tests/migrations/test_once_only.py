"""Once in a cluster's life: an upgrade through four versions runs each migration once.

The daemon drives these stage calls in a pass (``tests/daemon/test_migrations.py``);
this test drives the same calls by hand, so the once-only rule, the state checks
and the undo order are proved against a real (sandbox) cluster on their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.migrations import (
    GROUP,
    MigrationContext,
    Registry,
    Runtime,
    execute_migration,
    migration_checksum,
    undo_migration,
)
from reconciler.model.catalog import AppVersion, Instance, Migration
from reconciler.model.migrations import MigrationLedger, to_consider
from reconciler.model.version import parse_version
from tests.migrations import samples

REGISTRY = Registry.from_entry_points(
    [EntryPoint("counting", "tests.migrations.samples:CountingMarker", GROUP)]
)


def mig(name: str) -> Migration:
    return Migration(name, "pre", python="counting")


# add-index ships in 1.5.0 and again, unchanged, in 2.0.0 and 2.0.1.
CATALOG = {
    "1.4.0": (),
    "1.5.0": (mig("add-index"),),
    "2.0.0": (mig("add-index"), mig("split-totals")),
    "2.0.1": (mig("add-index"), mig("split-totals"), mig("drop-legacy")),
}
VERSIONS = {
    key: AppVersion(
        app="ledger", version=parse_version(key), directory=f"v/{key}", migrations=migrations
    )
    for key, migrations in CATALOG.items()
}


@pytest.fixture
def client(sandbox: Any) -> Iterator[KubeClient]:
    samples.RUNS.clear()
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        for ns in ("fin", "fin2"):
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        yield kube


def ctx(
    client: KubeClient, instance: Instance, name: str, frm: str | None, to: str
) -> MigrationContext:
    return MigrationContext(
        client=client,
        cluster="prod",
        instance=instance.name,
        namespace=instance.namespace,
        app="ledger",
        from_version=frm,
        to_version=to,
        phase="pre",
        migration=name,
        deadline=time.monotonic() + 10,
    )


def upgrade(client: KubeClient, instance: Instance, path: list[str]) -> MigrationLedger:
    ledger = MigrationLedger("app", instance.name)
    runtime = Runtime(client, REGISTRY)
    deployed: str | None = None
    for key in path:
        version = VERSIONS[key]
        by_name = {m.name: m for m in version.migrations}
        pairs = [
            (m.name, migration_checksum(version, m, REGISTRY.distributions()))
            for m in version.migrations
        ]
        for verdict, (_, checksum) in zip(to_consider(pairs, ledger), pairs, strict=True):
            if not verdict.consider:
                continue
            run = execute_migration(
                by_name[verdict.name],
                version,
                instance,
                ctx(client, instance, verdict.name, deployed, key),
                checksum=checksum,
                deployed_version=deployed,
                runtime=runtime,
            )
            ledger = ledger.with_record(run.record)
        deployed = key
    return ledger


def test_each_migration_runs_exactly_once_along_the_path(client: KubeClient) -> None:
    books = Instance(name="books", cluster="prod", app="ledger", namespace="fin")
    ledger = upgrade(client, books, ["1.4.0", "1.5.0", "2.0.0", "2.0.1"])
    assert samples.RUNS == [
        ("run", "books", "add-index", "1.5.0"),
        ("run", "books", "split-totals", "2.0.0"),
        ("run", "books", "drop-legacy", "2.0.1"),
    ]
    assert [(r.name, r.version, r.outcome) for r in ledger.records] == [
        ("add-index", "1.5.0", "succeeded"),
        ("split-totals", "2.0.0", "succeeded"),
        ("drop-legacy", "2.0.1", "succeeded"),
    ]
    assert MigrationLedger.from_dict(ledger.to_dict()) == ledger

    # Uninstall: the undo of every applied migration, newest first, each from its own version.
    for record in ledger.applied():
        version = VERSIONS[record.version]
        migration = next(m for m in version.migrations if m.name == record.name)
        ok, message, _ = undo_migration(
            migration,
            version,
            books,
            ctx(client, books, record.name, "2.0.1", record.version),
            runtime=Runtime(client, REGISTRY),
        )
        assert ok, message
    assert samples.RUNS[3:] == [
        ("undo", "books", "drop-legacy", "2.0.1"),
        ("undo", "books", "split-totals", "2.0.0"),
        ("undo", "books", "add-index", "1.5.0"),
    ]


def test_a_cluster_already_in_shape_runs_nothing(client: KubeClient) -> None:
    other = Instance(name="books", cluster="prod", app="ledger", namespace="fin2")
    for name in ("add-index", "split-totals", "drop-legacy"):
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"books-{name}", "namespace": "fin2"},
            }
        )
    ledger = upgrade(client, other, ["1.4.0", "1.5.0", "2.0.0", "2.0.1"])
    assert samples.RUNS == []
    assert [(r.name, r.outcome) for r in ledger.records] == [
        ("add-index", "notNeeded"),
        ("split-totals", "notNeeded"),
        ("drop-legacy", "notNeeded"),
    ]
