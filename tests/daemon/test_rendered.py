"""A plan keeps its rendered objects packed (``daemon.rendered``) and still says the same.

A pass holds every instance's plan at once, so the objects are kept as compact
JSON; everything read from them (the objects, their references, their count, the
plan's fingerprint, the pass's records and health) must be what the plain objects
would give.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import plan_cluster, plan_fingerprint
from reconciler.daemon.rendered import RenderedObjects, keys_of, refs_of
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from reconciler.render import object_key
from tests.daemon.conftest import World
from tests.factories import write_catalog

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "web", "labels": {"a": "b"}},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
}
CONFIGMAP: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "web"},
    "data": {"ratio": 0.5, "empty": None, "on": True},
}


def test_packed_objects_read_back_equal_in_order_with_their_references() -> None:
    packed = RenderedObjects.pack([DEPLOYMENT, CONFIGMAP])
    assert isinstance(packed, RenderedObjects)
    assert len(packed) == 2
    assert list(packed) == [DEPLOYMENT, CONFIGMAP]
    assert packed == (DEPLOYMENT, CONFIGMAP) and packed == (DEPLOYMENT, CONFIGMAP)
    assert packed != (CONFIGMAP, DEPLOYMENT)
    assert packed[1] == CONFIGMAP and packed[-1] == CONFIGMAP
    assert list(reversed(packed)) == [CONFIGMAP, DEPLOYMENT]
    assert refs_of(packed) == [
        ObjectRef("apps/v1", "Deployment", "web", "web"),
        ObjectRef("v1", "ConfigMap", "web", "settings"),
    ]
    assert refs_of(packed) == refs_of((DEPLOYMENT, CONFIGMAP))
    # the one-owner check's keys, without decoding
    assert keys_of(packed) == [object_key(DEPLOYMENT), object_key(CONFIGMAP)]
    assert keys_of(packed) == keys_of((DEPLOYMENT, CONFIGMAP))


def test_each_read_is_a_fresh_copy_so_a_caller_cannot_change_the_plan() -> None:
    packed = RenderedObjects.pack([DEPLOYMENT])
    first = packed[0]
    first["spec"]["replicas"] = 9
    assert packed[0]["spec"]["replicas"] == 2


def test_objects_json_would_change_are_kept_as_they_are() -> None:
    """A value JSON has no exact form for (a tuple, a non-string key) is not packed."""
    odd = {**CONFIGMAP, "data": {1: "one"}}
    assert RenderedObjects.pack([odd]) == (odd,) and isinstance(RenderedObjects.pack([odd]), tuple)
    listed = {**CONFIGMAP, "data": {"items": ("a", "b")}}
    kept = RenderedObjects.pack([listed])
    assert isinstance(kept, tuple) and kept[0]["data"]["items"] == ("a", "b")
    assert RenderedObjects.pack([]) == ()
    # without a name its key is not what its reference says: kept, so keys stay exact
    nameless = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    assert isinstance(RenderedObjects.pack([nameless]), tuple)
    assert keys_of(RenderedObjects.pack([nameless])) == [object_key(nameless)]


def test_a_planned_instance_holds_packed_objects_and_its_fingerprint_is_unchanged(
    tmp_path: Path,
) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    plans = [p for p in plan_cluster(catalog, "prod") if p.objects]
    assert plans
    for plan in plans:
        assert isinstance(plan.objects, RenderedObjects)
        plain = list(plan.objects)
        assert len(plan.objects) == len(plain)
        assert refs_of(plan.objects) == [ObjectRef.of(o) for o in plain]
        # the fingerprint is the one of the plain objects (the backoff compares it
        # with the one of a plan made in an earlier pass)
        unpacked = replace(plan, objects=())
        object.__setattr__(unpacked, "objects", tuple(plain))
        assert plan_fingerprint(plan) == plan_fingerprint(unpacked)
        # ``replace`` keeps the packed objects as they are
        moved = replace(plan, message="x")
        assert moved.objects is plan.objects


def test_a_pass_over_packed_plans_records_counts_and_health(world: World) -> None:
    outcome = world.daemon.run_pass()
    assert outcome.ok, outcome
    report = outcome.report
    assert report is not None
    counts = {p.name: len(list(p.objects)) for p in report.plans}
    assert all(isinstance(p.objects, RenderedObjects) for p in report.plans)
    for status in report.statuses:
        assert status.phase is Phase.READY
        assert status.objects == counts[status.instance] > 0
