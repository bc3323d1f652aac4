"""Batch targets and merged settings (SPEC section 4, "Batches")."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.catalog import load_catalog
from reconciler.model.catalog import Batch, RolloutPlan
from reconciler.rollout import PlanError, RolloutSettings, merge_plans, plan_batches
from tests.factories import write_catalog


def plan(*items: int | str) -> tuple[Batch, ...]:
    return tuple(
        Batch(int(i[:-1]), percent=True) if isinstance(i, str) else Batch(i) for i in items
    )


@pytest.mark.parametrize(
    ("replicas", "batches", "targets"),
    [
        (5, plan(1, "50%", "50%"), (1, 3, 5)),
        (10, plan(1, "50%", "50%"), (1, 5, 10)),
        (10, plan("50%", 1, 2), (5, 6, 10)),
        (10, plan(3, "20%", "90%"), (3, 3, 10)),
        (5, plan("20%", "40%", "40%"), (1, 3, 5)),
        (1, plan(1, "50%", "50%"), (1, 1, 1)),
        (0, plan(1, "50%"), ()),
        (3, plan(5, 5), (3, 3)),
        (10, plan("10%", "10%"), (1, 10)),  # below 100%: the last batch reaches every replica
        (4, plan(1), (4,)),
        (4, (), ()),
    ],
)
def test_targets(replicas: int, batches: tuple[Batch, ...], targets: tuple[int, ...]) -> None:
    assert plan_batches(replicas, batches) == targets


def test_negative_replicas_is_an_error() -> None:
    with pytest.raises(PlanError, match="replicas"):
        plan_batches(-1, plan(1))


def test_bad_percentage_is_an_error() -> None:
    with pytest.raises(PlanError, match="150%"):
        plan_batches(3, (Batch(150, percent=True),))


batch_items = st.one_of(
    st.integers(min_value=1, max_value=20).map(Batch),
    st.integers(min_value=1, max_value=100).map(lambda v: Batch(v, percent=True)),
)


@given(st.integers(min_value=1, max_value=200), st.lists(batch_items, min_size=1, max_size=8))
def test_targets_are_monotonic_bounded_and_complete(replicas: int, batches: list[Batch]) -> None:
    targets = plan_batches(replicas, tuple(batches))
    assert len(targets) == len(batches)
    assert all(a <= b for a, b in itertools.pairwise(targets))
    assert all(1 <= t <= replicas for t in targets)
    assert targets[-1] == replicas


def test_instance_wins_key_by_key() -> None:
    version = RolloutPlan(
        batches=plan(1, "50%", "50%"),
        on_failure="rollback",
        health_timeout_seconds=60,
        given=frozenset({"batches", "onFailure", "healthTimeoutSeconds"}),
    )
    instance = RolloutPlan(partition=1, given=frozenset({"partition"}))
    merged = merge_plans(version, instance)
    assert merged == RolloutSettings(
        batches=plan(1, "50%", "50%"),
        partition=1,
        on_failure="rollback",
        health_timeout_seconds=60,
    )


def test_instance_batches_override_the_versions() -> None:
    version = RolloutPlan(batches=plan(1, "50%", "50%"), given=frozenset({"batches"}))
    instance = RolloutPlan(batches=plan("50%"), paused=True, given=frozenset({"batches", "paused"}))
    merged = merge_plans(version, instance)
    assert merged is not None
    assert merged.batches == plan("50%")
    assert merged.paused is True


def test_no_batches_anywhere_means_apply_at_once() -> None:
    assert merge_plans(None, None) is None
    gates_only = RolloutPlan(partition=1, given=frozenset({"partition"}))
    assert merge_plans(None, gates_only) is None


def test_bad_on_failure_is_an_error() -> None:
    bad = RolloutPlan(
        batches=plan(1), on_failure="retry", given=frozenset({"batches", "onFailure"})
    )
    with pytest.raises(PlanError, match="retry"):
        merge_plans(bad, None)


def test_settings_merge_from_catalog_files(tmp_path: Path) -> None:
    write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": """\
                apiVersion: reconciler/v1
                kind: Instance
                name: web
                app: podinfo
                channel: fast
                namespace: web
                rollout: {partition: 1, pauseSeconds: 30, analysis: checks/smoke.yaml}
                """,
            "apps/podinfo/versions/6.6.0/checks/smoke.yaml": """\
                apiVersion: batch/v1
                kind: Job
                metadata: {name: smoke}
                spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}
                """,
        },
    )
    catalog = load_catalog(tmp_path)
    assert not [p for p in catalog.problems if p.is_error]
    version = catalog.apps["podinfo"].versions["6.6.0"]
    instance = catalog.clusters["prod"].instances["web"]
    merged = merge_plans(version.rollout, instance.rollout)
    assert merged == RolloutSettings(
        batches=plan(1, "50%", "50%"),
        partition=1,
        pause_seconds=30,
        analysis="checks/smoke.yaml",
    )


def test_unknown_rollout_keys_are_still_validation_errors(tmp_path: Path) -> None:
    write_catalog(
        tmp_path,
        {
            "clusters/prod/instances/web.yaml": """\
                apiVersion: reconciler/v1
                kind: Instance
                name: web
                app: podinfo
                channel: fast
                namespace: web
                rollout: {pauseSeconds: -1}
                """
        },
    )
    errors = [p for p in load_catalog(tmp_path).problems if p.is_error]
    assert errors and "pauseSeconds" in str(errors[0])
