"""Deciding "unchanged" without a request: normalisation and subset comparison."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from reconciler.kube.compare import (
    display_form,
    fingerprint,
    matches,
    merge_key,
    overlay,
    parse_quantity,
    scalars_equal,
)


def deployment(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "labels": {"a": "1"}},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "app", "image": "x:1", **container}]}},
        },
    }


def live_of(desired: dict[str, Any]) -> dict[str, Any]:
    """What an API server would store: defaults added everywhere."""
    live: dict[str, Any] = overlay({}, desired)
    live["metadata"].update(resourceVersion="7", uid="u", managedFields=[{"manager": "x"}])
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    for c in live["spec"]["template"]["spec"]["containers"]:
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
    live["status"] = {"replicas": 2}
    return live


def test_live_with_server_defaults_matches() -> None:
    desired = deployment(ports=[{"containerPort": 80}])
    live = live_of(desired)
    live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    assert matches(desired, live)


def test_changed_value_is_drift() -> None:
    desired = deployment()
    live = live_of(desired)
    live["spec"]["replicas"] = 5
    assert not matches(desired, live)


def test_missing_label_is_drift() -> None:
    desired = deployment()
    live = live_of(desired)
    del live["metadata"]["labels"]["a"]
    assert not matches(desired, live)


def test_missing_live_object_never_matches() -> None:
    assert not matches(deployment(), None)


@pytest.mark.parametrize(
    ("a", "b"),
    [("500m", 0.5), ("500m", "0.5"), ("1Gi", "1024Mi"), ("1", 1), (8080, "8080"), ("1k", 1000)],
)
def test_normalised_scalars_are_equal(a: Any, b: Any) -> None:
    assert scalars_equal(a, b)


@pytest.mark.parametrize(("a", "b"), [("500m", "1"), (True, "true"), (1, True), ("a", "b")])
def test_different_scalars_are_not_equal(a: Any, b: Any) -> None:
    assert not scalars_equal(a, b)


def test_resources_quantities_match() -> None:
    desired = deployment(resources={"limits": {"cpu": 0.5, "memory": "128Mi"}})
    live = live_of(desired)
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "500m"
    assert matches(desired, live)


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5q", None, True])
def test_bad_quantities_do_not_parse(text: Any) -> None:
    assert parse_quantity(text) is None


def test_keyed_list_tolerates_items_added_by_others() -> None:
    desired = deployment(env=[{"name": "A", "value": "1"}])
    live = live_of(desired)
    live["spec"]["template"]["spec"]["containers"][0]["env"].insert(0, {"name": "B", "value": "2"})
    assert matches(desired, live)


def test_keyed_list_detects_changed_item() -> None:
    desired = deployment(env=[{"name": "A", "value": "1"}])
    live = live_of(desired)
    live["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "9"
    assert not matches(desired, live)


def test_scalar_lists_must_be_equal() -> None:
    desired = deployment(args=["a", "b"])
    live = live_of(desired)
    live["spec"]["template"]["spec"]["containers"][0]["args"] = ["a"]
    assert not matches(desired, live)


def test_merge_key_falls_back_when_names_repeat() -> None:
    mounts = [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/b"}]
    assert merge_key(mounts) == "mountPath"
    assert merge_key(["a", "b"]) is None
    assert merge_key([{"x": 1}, {"x": 1}]) is None


def test_secret_string_data_compares_as_data() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns"},
        "stringData": {"token": "abc"},
    }
    live: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns"},
        "data": {"token": base64.b64encode(b"abc").decode()},
        "type": "Opaque",
    }
    assert matches(desired, live)
    live["data"]["token"] = base64.b64encode(b"changed").decode()
    assert not matches(desired, live)
    # a server never stores stringData: its data is what counts
    assert not matches(desired, {**live, "stringData": {"token": "abc"}})


def test_empty_and_null_values_claim_nothing() -> None:
    desired = deployment(securityContext={}, workingDir=None)
    assert matches(desired, live_of(deployment()))


def test_fingerprint_is_stable_and_sensitive() -> None:
    a, b = deployment(), deployment()
    assert fingerprint(a) == fingerprint(b)
    b["spec"]["replicas"] = 3
    assert fingerprint(a) != fingerprint(b)


def test_display_form_drops_server_bookkeeping() -> None:
    shown = display_form(live_of(deployment()))
    assert "status" not in shown
    assert set(shown["metadata"]) == {"name", "namespace", "labels"}
    assert display_form(None) == {}


def test_overlay_merges_keyed_lists() -> None:
    live = live_of(deployment())
    merged = overlay(live, deployment(image="x:2"))
    container = merged["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "x:2"
    assert container["imagePullPolicy"] == "IfNotPresent"
