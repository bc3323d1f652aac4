"""Change set values and error translation (no I/O)."""

from __future__ import annotations

import json

from reconciler.kube.errors import ConflictError, KubeApiError, NotFoundError, api_error
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef


def test_change_set_round_trip_and_summary() -> None:
    ref = ObjectRef("apps/v1", "Deployment", "web", "podinfo")
    cs = ChangeSet.of(
        [
            ChangeSetEntry.for_ref("web", ref, Action.CONFIGURED),
            ChangeSetEntry.for_ref(
                "web", ObjectRef("v1", "ClusterRole", "", "r"), Action.FAILED, "boom"
            ),
        ]
    )
    assert ChangeSet.from_dict(json.loads(json.dumps(cs.to_dict()))) == cs
    assert cs.failed and cs.changed
    assert cs.summary() == "1 configured, 1 failed"
    assert str(cs.entries[0]) == "Deployment/web/podinfo configured"
    assert str(cs.entries[1]) == "ClusterRole/r failed: boom"
    assert cs.entries[0].to_dict()["action"] == "configured"
    assert ChangeSet().summary() == "no objects"


def test_change_set_by_instance_keeps_each_instance_entries_in_order() -> None:
    def entry(instance: str, name: str) -> ChangeSetEntry:
        return ChangeSetEntry.for_ref(
            instance, ObjectRef("v1", "ConfigMap", "ns", name), Action.CREATED
        )

    cs = ChangeSet.of([entry("web", "a"), entry("api", "b"), entry("web", "c")])
    index = cs.by_instance()
    assert index == {name: cs.for_instance(name) for name in ("web", "api")}
    assert [e.name for e in index["web"].entries] == ["a", "c"]
    assert ChangeSet().by_instance() == {}


def test_status_body_becomes_named_error() -> None:
    body = json.dumps(
        {"kind": "Status", "reason": "Invalid", "message": "spec.replicas: must be >= 0"}
    ).encode()
    err = api_error("Deployment/web/podinfo", "apply", 422, "Unprocessable", body)
    assert isinstance(err, KubeApiError)
    assert str(err) == "Deployment/web/podinfo: apply failed (Invalid): spec.replicas: must be >= 0"
    assert err.reason == "ApplyFailed"


def test_conflict_names_managers() -> None:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-edit" using apps/v1',
            "field": ".spec.replicas",
        },
        {"reason": "FieldManagerConflict", "message": 'conflict with "other"', "field": ".data.a"},
    ]
    body = json.dumps(
        {"reason": "Conflict", "message": "Apply failed", "details": {"causes": causes}}
    ).encode()
    err = api_error("Deployment/web/podinfo", "apply", 409, "Conflict", body)
    assert isinstance(err, ConflictError)
    assert err.managers == ("kubectl-edit", "other")


def test_non_json_and_not_found_bodies() -> None:
    err = api_error("/apis/x/v1", "discovery", 404, "Not Found", b"<html>nope</html>")
    assert isinstance(err, NotFoundError)
    assert "nope" in str(err)
    err = api_error("ConfigMap/a/b", "get", 503, "Service Unavailable", b"")
    assert str(err) == "ConfigMap/a/b: get failed (Service Unavailable): Service Unavailable"
