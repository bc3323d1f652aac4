"""One migration from check to ledger record, against the sandbox.

Job execution itself arrives with the sandbox's Jobs with pods; here a recording
``JobRunner`` stands in for it, so what is tested is what the stage decides and
records around the Job (rendered env, outcome, message), not a fake cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.migrations import (
    GROUP,
    JobOutcome,
    MigrationContext,
    Registry,
    Runtime,
    execute_migration,
    undo_migration,
)
from reconciler.model.catalog import AppVersion, Instance, Migration, Template
from reconciler.model.changeset import ObjectRef
from reconciler.model.migrations import MigrationCheck
from reconciler.model.version import parse_version
from tests.migrations import samples

REGISTRY = Registry.from_entry_points(
    EntryPoint(name, f"tests.migrations.samples:{target}", GROUP)
    for name, target in {
        "marker": "CreatesMarker",
        "raises": "Raises",
        "hangs": "Hangs",
        "not-bool": "NotBool",
        "no-undo": "NoUndo",
    }.items()
)
INSTANCE = Instance(name="books", cluster="prod", app="ledger", namespace="fin")
JOB = Template(
    "apps/ledger/versions/2.0.0/migrations/m.yaml",
    0,
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "${instance.name}-m"},
        "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "busybox"}]}}},
    },
)


class RecordingJobRunner:
    def __init__(self, outcome: JobOutcome) -> None:
        self.outcome = outcome
        self.jobs: list[tuple[Mapping[str, Any], float]] = []

    def run_job(self, job: Mapping[str, Any], timeout: float) -> JobOutcome:
        self.jobs.append((job, timeout))
        return self.outcome


def version(*migrations: Migration, key: str = "2.0.0") -> AppVersion:
    return AppVersion(
        app="ledger",
        version=parse_version(key),
        directory=f"apps/ledger/versions/{key}",
        migrations=migrations,
        migration_jobs={m.name: JOB for m in migrations if m.job},
        undo_jobs={m.name: JOB for m in migrations if m.undo},
    )


@pytest.fixture
def client(sandbox: Any) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}})
        yield kube


def ctx(client: KubeClient, migration: str, timeout: float = 10) -> MigrationContext:
    return MigrationContext(
        client=client,
        cluster="prod",
        instance="books",
        namespace="fin",
        app="ledger",
        from_version="1.5.0",
        to_version="2.0.0",
        phase="pre",
        migration=migration,
        deadline=time.monotonic() + timeout,
    )


def run(client: KubeClient, m: Migration, runner: Any = None, timeout: float = 10) -> Any:
    return execute_migration(
        m,
        version(m),
        INSTANCE,
        ctx(client, m.name, timeout),
        checksum="sha256:c",
        deployed_version="1.5.0",
        runtime=Runtime(client, REGISTRY, runner, now=lambda: "2026-01-01T00:00:00Z"),
    )


def test_python_migration_runs_once_then_is_not_needed(client: KubeClient) -> None:
    m = Migration("mark", "pre", python="marker")
    first = run(client, m)
    assert first.record.outcome == "succeeded"
    assert first.record.to_dict() | {"duration": 0, "checkDuration": 0} == {
        "name": "mark",
        "version": "2.0.0",
        "checksum": "sha256:c",
        "phase": "pre",
        "scope": "app",
        "startedAt": "2026-01-01T00:00:00Z",
        "duration": 0,
        "checkDuration": 0,
        "outcome": "succeeded",
    }
    assert client.get(ObjectRef("v1", "ConfigMap", "fin", "books-migrated")) is not None
    second = run(client, m)
    assert (second.record.outcome, second.record.message) == (
        "notNeeded",
        "needed() returned False",
    )


def test_the_declarative_check_decides_before_any_code_runs(client: KubeClient) -> None:
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "books-v2", "namespace": "fin"},
        }
    )
    check = MigrationCheck.from_dict(
        {"objectMissing": {"apiVersion": "v1", "kind": "ConfigMap", "name": "${instance.name}-v2"}}
    )
    result = run(client, Migration("mark", "pre", check=check, python="raises"))
    assert result.record.outcome == "notNeeded"
    assert result.record.message == "ConfigMap/fin/books-v2 exists"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("raises", 'python migration "raises": run() raised RuntimeError: orders table is locked'),
        ("hangs", 'python migration "hangs": run() did not finish within'),
        ("not-bool", 'python migration "not-bool": needed() must return True or False'),
        ("unknown", 'python migration "unknown" is not registered (registered: hangs, marker, '),
    ],
)
def test_a_failing_python_migration_fails_only_itself(
    client: KubeClient, name: str, message: str
) -> None:
    samples.RELEASE.clear()
    try:
        result = run(client, Migration("m", "pre", python=name), timeout=0.2)
    finally:
        samples.RELEASE.set()
    assert result.failed
    assert result.record.message.startswith(message)


def test_job_migration_goes_through_the_job_runner(client: KubeClient) -> None:
    ok = RecordingJobRunner(JobOutcome(True, 12.5))
    result = run(client, Migration("m", "pre", job="migrations/m.yaml", timeout_seconds=90), ok)
    assert (result.record.outcome, result.record.duration) == ("succeeded", 12.5)
    job, timeout = ok.jobs[0]
    assert (job["metadata"]["name"], job["metadata"]["namespace"], timeout) == (
        "books-m",
        "fin",
        90.0,
    )
    failing = RecordingJobRunner(JobOutcome(False, 3.0, "pod books-m-x: Error: exit 1; log: boom"))
    failed = run(client, Migration("m", "pre", job="migrations/m.yaml"), failing)
    assert failed.failed and failed.record.message == "pod books-m-x: Error: exit 1; log: boom"
    nothing = run(client, Migration("m", "pre", job="migrations/m.yaml"))
    assert nothing.record.message == "job migrations cannot run here: no job runner configured"


def test_a_check_error_fails_the_migration(client: KubeClient) -> None:
    check = MigrationCheck.from_dict(
        {"objectExists": {"apiVersion": "example.com/v1", "kind": "Unknown", "name": "x"}}
    )
    result = run(client, Migration("m", "pre", check=check, python="marker"))
    assert result.failed and result.record.message.startswith("check failed: ")


def test_undo_uses_the_job_or_the_python_undo(client: KubeClient) -> None:
    rt = Runtime(client, REGISTRY)
    m = Migration("mark", "pre", python="marker")
    run(client, m)
    ok, message, _ = undo_migration(m, version(m), INSTANCE, ctx(client, "mark"), runtime=rt)
    assert ok and message == ""
    assert client.get(ObjectRef("v1", "ConfigMap", "fin", "books-migrated")) is None
    plain = Migration("p", "pre", python="no-undo")
    assert undo_migration(plain, version(plain), INSTANCE, ctx(client, "p"), runtime=rt)[:2] == (
        True,
        "nothing to undo",
    )
    runner = RecordingJobRunner(JobOutcome(True, 1.0))
    with_job = Migration("j", "pre", job="migrations/m.yaml", undo="migrations/m.yaml")
    ok, _, _ = undo_migration(
        with_job,
        version(with_job),
        INSTANCE,
        ctx(client, "j"),
        runtime=Runtime(client, REGISTRY, runner),
    )
    assert ok and len(runner.jobs) == 1


def test_a_slow_check_is_recorded_with_its_duration_and_a_warning(client: KubeClient) -> None:
    ticks = iter([0.0, 2.5, 2.5, 2.5, 2.5, 2.5])
    check = MigrationCheck.from_dict(
        {"objectExists": {"apiVersion": "v1", "kind": "ConfigMap", "name": "absent"}}
    )
    m = Migration("slow", "pre", check=check, python="marker")
    result = execute_migration(
        m,
        version(m),
        INSTANCE,
        ctx(client, "slow"),
        checksum="sha256:c",
        deployed_version=None,
        runtime=Runtime(client, REGISTRY, clock=lambda: next(ticks)),
    )
    assert (result.record.outcome, result.record.check_duration) == ("notNeeded", 2.5)
    assert result.warnings == (
        "check took 2.5s (over 1s): a migrated cluster should pass its hooks in no time",
    )
