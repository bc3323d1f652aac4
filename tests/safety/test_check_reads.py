"""Issue 28, serious 2: a migration check must not read another namespace's Secret.

``fieldEquals: {ref: {kind: Secret, namespace: kube-system, name: topsecret}, path: data}``
ignored the cluster's ``allowedNamespaces``, and the status commit and the ledger
ConfigMap then carried the base64 value (``repr(live)``). A check's reference must
lie inside its instance's cluster limits (a validation error naming the line, and
refused again at run time), and a value read from a Secret is never shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, cast

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.migration_steps import MigrationSteps
from reconciler.daemon.plan import check_catalog
from reconciler.kube import KubeClient, Limits
from reconciler.migrations import GROUP, Registry, evaluate_check
from reconciler.model.catalog import Catalog
from reconciler.model.migrations import FAILED, NOT_NEEDED, MigrationCheck
from reconciler.sandbox.testing import SandboxHandle
from tests.factories import write_catalog
from tests.kube.conftest import FAST_RETRY

REGISTRY = Registry.from_entry_points(
    [EntryPoint("counting", "tests.migrations.samples:CountingMarker", GROUP)]
)
VERSION = "apps/podinfo/versions/6.6.0/version.yaml"
PLAIN = "hunter2-the-password"
ENCODED = "aHVudGVyMi10aGUtcGFzc3dvcmQ="  # base64 of PLAIN, as the API returns it


def version_with_check(namespace: str, path: str = "data", value: Any = "{}") -> str:
    """podinfo 6.6.0 (api's version) with a migration whose check reads a Secret."""
    ns = f"namespace: {namespace}, " if namespace else ""
    return (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: 6.6.0\n"
        "images:\n  podinfo: ghcr.io/stefanprodan/podinfo:6.6.0\n"
        "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
        "migrations:\n"
        "  - name: peek\n"
        "    phase: pre\n"
        "    check:\n"
        "      fieldEquals:\n"
        f"        ref: {{apiVersion: v1, kind: Secret, {ns}name: topsecret}}\n"
        f"        path: {path}\n"
        f"        value: {value}\n"
        "    python: counting\n"
    )


def catalog_with(tmp_path: Path, namespace: str, **kw: Any) -> Catalog:
    return load_catalog(
        write_catalog(tmp_path / "c", {VERSION: version_with_check(namespace, **kw)})
    )


def test_a_check_reading_outside_the_allowed_namespaces_is_a_validation_error(
    tmp_path: Path,
) -> None:
    catalog = catalog_with(tmp_path, "kube-system")
    problems = [p for p in check_catalog(catalog, REGISTRY) if p.is_error]
    [problem] = [p for p in problems if "kube-system" in p.message]
    assert problem.file == VERSION and problem.line == 11  # the migration's entry
    assert 'migration "peek": check fieldEquals.ref: Secret topsecret' in problem.message
    assert 'namespace "kube-system" is not allowed in cluster prod' in problem.message
    assert "instance api" in problem.message


@pytest.mark.parametrize("namespace", ["", '"${instance.namespace}"', "team-api"])
def test_a_check_inside_the_instance_s_namespaces_is_fine(tmp_path: Path, namespace: str) -> None:
    catalog = catalog_with(tmp_path, namespace)
    assert [p for p in check_catalog(catalog, REGISTRY) if p.is_error] == []


@pytest.fixture
def kube(sandbox: SandboxHandle) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY) as client:
        for ns in ("kube-system", "team-api"):
            client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            client.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "topsecret", "namespace": ns},
                    "data": {"password": ENCODED},
                }
            )
        yield client


def run_check(kube: KubeClient, catalog: Catalog) -> tuple[str, str]:
    """Run api's ``peek`` migration as the daemon does (validation skipped): outcome, message."""
    version = catalog.apps["podinfo"].versions["6.6.0"]
    instance = catalog.clusters["prod"].instances["api"]
    nothing = cast(Any, None)  # a check-only run starts no Job and needs no view
    steps = MigrationSteps(
        kube,
        nothing,
        "prod",
        registry=REGISTRY,
        job_runner=nothing,
        limits=Limits.of(catalog.clusters["prod"].cluster),
    )
    [migration] = version.migrations
    run = steps.execute(migration, version, instance, "pre", "sum", "6.5.0")
    record = cast(Any, run).record
    return record.outcome, record.message


def test_a_read_outside_the_limits_is_refused_at_run_time(tmp_path: Path, kube: KubeClient) -> None:
    outcome, message = run_check(kube, catalog_with(tmp_path, "kube-system"))
    assert outcome == FAILED
    assert 'namespace "kube-system" is not allowed in this cluster' in message
    assert ENCODED not in message and PLAIN not in message


def test_a_secret_s_value_is_never_shown(tmp_path: Path, kube: KubeClient) -> None:
    outcome, message = run_check(kube, catalog_with(tmp_path, "team-api", value="{password: nope}"))
    assert outcome == NOT_NEEDED
    assert ENCODED not in message and PLAIN not in message and "nope" not in message
    assert message == (
        "Secret/team-api/topsecret data differs from the wanted value "
        "(*** (changed); Secret values are not shown)"
    )


def test_a_matching_or_absent_secret_field_says_so_without_its_value(kube: KubeClient) -> None:
    def reason(path: str) -> str:
        ref = {"apiVersion": "v1", "kind": "Secret", "name": "topsecret"}
        check = MigrationCheck.from_dict(
            {"fieldEquals": {"ref": ref, "path": path, "value": ENCODED}}
        )
        result = evaluate_check(check, kube, namespace="team-api", deployed_version=None)
        return result.reason

    assert reason("data.password") == (
        "Secret/team-api/topsecret data.password is the wanted value "
        "(***; Secret values are not shown)"
    )
    assert reason("data.other") == "Secret/team-api/topsecret data.other is absent (wanted ***)"
