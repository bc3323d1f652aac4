"""State checks: the cluster's state decides, the version filters.

Against the sandbox, and against a real cluster in the ``real_cluster`` lane
(``backend`` from tests/kube/conftest.py: unique namespace, cleaned up after).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.migrations import evaluate_check, field_at, render_check
from reconciler.model.catalog import AppVersion, Instance, Parameter
from reconciler.model.migrations import MigrationCheck
from reconciler.model.version import parse_version
from tests.kube.conftest import Backend


@dataclass(frozen=True)
class Live:
    """The cluster under test and this test's namespace (unique on a real cluster)."""

    client: KubeClient
    ns: str


@pytest.fixture
def live(backend: Backend) -> Iterator[Live]:
    ns = backend.namespace("ledger")
    kube = backend.client
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ledger-schema", "namespace": ns},
            "data": {"schema": "1"},
        }
    )
    yield Live(kube, ns)


def cm(name: str, namespace: str | None = None) -> dict[str, Any]:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name}
    return ref if namespace is None else {**ref, "namespace": namespace}


def check(live: Live, raw: dict[str, Any], deployed: str | None = "1.5.0") -> Any:
    return evaluate_check(
        MigrationCheck.from_dict(raw), live.client, namespace=live.ns, deployed_version=deployed
    )


def test_object_missing_and_exists(live: Live) -> None:
    assert check(live, {"objectMissing": cm("ledger-schema-v2")}).needed
    result = check(live, {"objectMissing": cm("ledger-schema")})
    assert not result.needed
    assert result.reason == f"ConfigMap/{live.ns}/ledger-schema exists"
    assert check(live, {"objectExists": cm("ledger-schema", live.ns)}).needed
    assert not check(live, {"objectExists": cm("ledger-schema", "other")}).needed


def test_field_equals_compares_the_live_field(live: Live) -> None:
    def fe(path: str, value: Any, name: str = "ledger-schema") -> Any:
        return check(live, {"fieldEquals": {"ref": cm(name), "path": path, "value": value}})

    assert fe("data.schema", "1").needed
    assert fe("data.schema", 1).needed  # ConfigMap data are strings
    result = fe("data.schema", "2")
    assert not result.needed
    assert result.reason == f"ConfigMap/{live.ns}/ledger-schema data.schema is '1' (wanted '2')"
    assert not fe("data.absent", "1").needed
    assert fe("data.schema", "1", name="nope").reason == f"ConfigMap/{live.ns}/nope is missing"


def test_deployed_version_is_a_filter_on_top_of_the_state(live: Live) -> None:
    raw = {"objectMissing": cm("ledger-schema-v2"), "deployedVersion": "<2.0.0"}
    assert check(live, raw, deployed="1.5.0").needed
    assert not check(live, raw, deployed="2.0.0").needed
    first_install = check(live, raw, deployed=None)
    assert not first_install.needed
    assert "nothing deployed yet" in first_install.reason


def test_all_conditions_must_hold_and_an_empty_check_runs_once(live: Live) -> None:
    raw = {"objectMissing": cm("ledger-schema-v2"), "objectExists": cm("nothing")}
    assert not check(live, raw).needed
    empty = check(live, {})
    assert empty.needed and empty.reason == "no check: runs once"


def test_a_check_that_cannot_read_the_cluster_is_an_error(live: Live) -> None:
    result = check(
        live, {"objectMissing": {"apiVersion": "example.com/v1", "kind": "Nope", "name": "x"}}
    )
    assert not result.needed
    assert result.error is not None and result.error.startswith("check failed: ")
    bad_range = check(live, {"objectMissing": cm("x"), "deployedVersion": ">>1"})
    assert bad_range.error is not None and bad_range.error.startswith("deployedVersion >>1:")


def test_a_slow_check_is_a_warning(live: Live) -> None:
    ticks = iter([10.0, 11.5])
    result = evaluate_check(
        MigrationCheck.from_dict({"objectMissing": cm("x")}),
        live.client,
        namespace=live.ns,
        deployed_version=None,
        clock=lambda: next(ticks),
    )
    assert result.slow and result.duration == 1.5
    assert result.warning == (
        "check took 1.5s (over 1s): a migrated cluster should pass its hooks in no time"
    )
    fast = check(live, {"objectMissing": cm("x")})
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
