"""State checks against the sandbox: the cluster's state decides, the version filters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.migrations import evaluate_check, field_at, render_check
from reconciler.model.catalog import AppVersion, Instance, Parameter
from reconciler.model.migrations import MigrationCheck
from reconciler.model.version import parse_version


@pytest.fixture
def client(sandbox: Any) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ledger"}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "ledger-schema", "namespace": "ledger"},
                "data": {"schema": "1"},
            }
        )
        yield kube


def cm(name: str, namespace: str | None = None) -> dict[str, Any]:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name}
    return ref if namespace is None else {**ref, "namespace": namespace}


def check(client: KubeClient, raw: dict[str, Any], deployed: str | None = "1.5.0") -> Any:
    return evaluate_check(
        MigrationCheck.from_dict(raw), client, namespace="ledger", deployed_version=deployed
    )


def test_object_missing_and_exists(client: KubeClient) -> None:
    assert check(client, {"objectMissing": cm("ledger-schema-v2")}).needed
    result = check(client, {"objectMissing": cm("ledger-schema")})
    assert not result.needed
    assert result.reason == "ConfigMap/ledger/ledger-schema exists"
    assert check(client, {"objectExists": cm("ledger-schema", "ledger")}).needed
    assert not check(client, {"objectExists": cm("ledger-schema", "other")}).needed


def test_field_equals_compares_the_live_field(client: KubeClient) -> None:
    def fe(path: str, value: Any, name: str = "ledger-schema") -> Any:
        return check(client, {"fieldEquals": {"ref": cm(name), "path": path, "value": value}})

    assert fe("data.schema", "1").needed
    assert fe("data.schema", 1).needed  # ConfigMap data are strings
    result = fe("data.schema", "2")
    assert not result.needed
    assert result.reason == "ConfigMap/ledger/ledger-schema data.schema is '1' (wanted '2')"
    assert not fe("data.absent", "1").needed
    assert fe("data.schema", "1", name="nope").reason == "ConfigMap/ledger/nope is missing"


def test_deployed_version_is_a_filter_on_top_of_the_state(client: KubeClient) -> None:
    raw = {"objectMissing": cm("ledger-schema-v2"), "deployedVersion": "<2.0.0"}
    assert check(client, raw, deployed="1.5.0").needed
    assert not check(client, raw, deployed="2.0.0").needed
    first_install = check(client, raw, deployed=None)
    assert not first_install.needed
    assert "nothing deployed yet" in first_install.reason


def test_all_conditions_must_hold_and_an_empty_check_runs_once(client: KubeClient) -> None:
    raw = {"objectMissing": cm("ledger-schema-v2"), "objectExists": cm("nothing")}
    assert not check(client, raw).needed
    empty = check(client, {})
    assert empty.needed and empty.reason == "no check: runs once"


def test_a_check_that_cannot_read_the_cluster_is_an_error(client: KubeClient) -> None:
    result = check(
        client, {"objectMissing": {"apiVersion": "example.com/v1", "kind": "Nope", "name": "x"}}
    )
    assert not result.needed
    assert result.error is not None and result.error.startswith("check failed: ")
    bad_range = check(client, {"objectMissing": cm("x"), "deployedVersion": ">>1"})
    assert bad_range.error is not None and bad_range.error.startswith("deployedVersion >>1:")


def test_a_slow_check_is_a_warning(client: KubeClient) -> None:
    ticks = iter([10.0, 11.5])
    result = evaluate_check(
        MigrationCheck.from_dict({"objectMissing": cm("x")}),
        client,
        namespace="ledger",
        deployed_version=None,
        clock=lambda: next(ticks),
    )
    assert result.slow and result.duration == 1.5
    assert result.warning == (
        "check took 1.5s (over 1s): a migrated cluster should pass its hooks in no time"
    )
    fast = check(client, {"objectMissing": cm("x")})
    assert not fast.slow and fast.warning is None


def test_placeholders_render_like_manifests() -> None:
    version = AppVersion(
        app="ledger",
        version=parse_version("2.0.0"),
        directory="apps/ledger/versions/2.0.0",
        parameters={"schema": Parameter("schema", default="v2")},
    )
    instance = Instance(name="books", cluster="prod", app="ledger", namespace="fin")
    raw = MigrationCheck.from_dict(
        {"objectMissing": cm("${instance.name}-schema-${params.schema}", "${instance.namespace}")}
    )
    rendered, problems = render_check(raw, instance, version)
    assert problems == ()
    assert rendered.object_missing is not None
    assert (rendered.object_missing.name, rendered.object_missing.namespace) == (
        "books-schema-v2",
        "fin",
    )
    bad = Instance(name="b", cluster="prod", app="ledger", namespace="fin", parameters={"x": 1})
    _, problems = render_check(raw, bad, version)
    assert problems and 'unknown parameter "x"' in problems[0].message


def test_field_at_walks_maps_and_lists() -> None:
    obj = {"spec": {"ports": [{"port": 80}]}}
    assert field_at(obj, "spec.ports.0.port") == (True, 80)
    assert field_at(obj, "spec.ports.1.port") == (False, None)
