"""cluster.yaml limits: allowed namespaces (globs) and cluster-scoped objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.kube.limits import Limits, violations
from reconciler.model.catalog import Cluster
from reconciler.model.changeset import ObjectRef


def obj(kind: str, name: str, namespace: str = "") -> dict[str, object]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


def namespaced(o: Mapping[str, Any]) -> bool:
    return bool(ObjectRef.of(o).namespace)


def test_no_limits_allow_everything() -> None:
    objects = [obj("ConfigMap", "a", "anywhere"), obj("ClusterRole", "r")]
    assert violations(objects, Limits.of(None), namespaced) == {}


def test_glob_namespaces() -> None:
    limits = Limits.of(Cluster("prod", allowed_namespaces=("web", "team-*")))
    objects = [
        obj("ConfigMap", "a", "web"),
        obj("ConfigMap", "b", "team-x"),
        obj("ConfigMap", "c", "kube-system"),
    ]
    found = violations(objects, limits, namespaced)
    assert list(found) == [ObjectRef("v1", "ConfigMap", "kube-system", "c")]
    message = found[ObjectRef("v1", "ConfigMap", "kube-system", "c")]
    assert "ConfigMap/kube-system/c" in message and "kube-system" in message and "team-*" in message


def test_cluster_scoped_refused_when_not_allowed() -> None:
    limits = Limits.of(Cluster("prod", allow_cluster_scoped=False))
    found = violations([obj("ClusterRole", "r"), obj("Namespace", "web")], limits, namespaced)
    assert set(found) == {
        ObjectRef("v1", "ClusterRole", "", "r"),
        ObjectRef("v1", "Namespace", "", "web"),
    }
    assert "allowClusterScoped" in found[ObjectRef("v1", "ClusterRole", "", "r")]


def test_namespace_objects_must_be_allowed_namespaces() -> None:
    limits = Limits(allowed_namespaces=("web",))
    found = violations([obj("Namespace", "web"), obj("Namespace", "other")], limits, namespaced)
    assert list(found) == [ObjectRef("v1", "Namespace", "", "other")]


def test_plain_names_are_listed_per_namespace_and_a_pattern_lists_all() -> None:
    def listed(*allowed: str) -> tuple[str, ...] | None:
        return Limits.of(Cluster("prod", allowed_namespaces=allowed)).listed_namespaces()

    assert Limits.of(None).listed_namespaces() is None
    assert Limits.of(Cluster("prod")).listed_namespaces() is None
    assert listed("web", "team-api", "web") == ("team-api", "web")
    assert listed("web", "team-*") is None
    assert listed("web", "app-?") is None
    assert listed("web", "[ab]") is None
    assert listed("web", "Not_A_Label") == ("web",)  # can hold nothing: never listed
    assert listed() == ()
