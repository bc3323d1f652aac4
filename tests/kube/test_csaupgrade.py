"""The managedFields rewrite that moves client-side apply ownership to our manager.

Mirrors what kubectl does after ``apply --server-side``
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#upgrading-from-client-side-apply-to-server-side-apply).
"""

from __future__ import annotations

from typing import Any

from reconciler.kube.csaupgrade import client_side_managers, upgrade_patch, without_leftovers

ANNOTATION = {
    "f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}
}


def entry(manager: str, operation: str, fields: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": extra.pop("apiVersion", "v1"),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


def live(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "cfg", "resourceVersion": "42", "managedFields": list(entries)}}


def test_nothing_to_do_without_client_side_apply() -> None:
    obj = live(entry("kubectl-edit", "Update", {"f:data": {"f:a": {}}}))
    assert client_side_managers(obj) == set()
    assert upgrade_patch(obj, "reconciler") is None
    assert upgrade_patch({"metadata": {}}, "reconciler") is None


def test_client_side_entry_becomes_our_apply_entry() -> None:
    csa = entry("kubectl-client-side-apply", "Update", {**ANNOTATION, "f:data": {"f:a": {}}})
    edit = entry("kubectl-edit", "Update", {"f:data": {"f:b": {}}})
    patch = upgrade_patch(live(csa, edit), "reconciler")
    assert patch == [
        {
            "op": "replace",
            "path": "/metadata/managedFields",
            "value": [
                {**csa, "manager": "reconciler", "operation": "Apply"},
                edit,
            ],
        },
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "42"},
    ]


def test_client_side_fields_merge_into_an_existing_apply_entry() -> None:
    ours = entry("reconciler", "Apply", {"f:data": {"f:a": {}}})
    csa = entry("kubectl-client-side-apply", "Update", {**ANNOTATION, "f:data": {"f:b": {}}})
    old_version = entry("kubectl-client-side-apply", "Update", {"f:spec": {}}, apiVersion="v0")
    status = entry("kubectl-client-side-apply", "Update", {"f:status": {}}, subresource="status")
    patch = upgrade_patch(live(ours, csa, old_version, status), "reconciler")
    assert patch is not None
    entries = patch[0]["value"]
    assert entries == [
        {
            **ours,
            "fieldsV1": {
                "f:data": {"f:a": {}, "f:b": {}},
                **ANNOTATION,
            },
        },
        status,
    ]


def test_without_leftovers_drops_only_what_client_side_apply_alone_owns() -> None:
    csa = entry(
        "kubectl-client-side-apply",
        "Update",
        {
            **ANNOTATION,
            "f:data": {"f:a": {}, "f:b": {}},
            "f:spec": {
                "f:ports": {
                    'k:{"port":80}': {".": {}, "f:port": {}},
                    'k:{"port":81}': {".": {}, "f:port": {}},
                },
                "f:template": {"f:x": {}},
            },
        },
    )
    ours = entry("reconciler", "Apply", {"f:data": {"f:a": {}}, "f:spec": {"f:template": {}}})
    # someone else owns a field inside the item for port 81: the item stays
    edit = entry(
        "kubectl-edit", "Update", {"f:spec": {"f:ports": {'k:{"port":81}': {"f:name": {}}}}}
    )
    after = {
        "metadata": {
            "name": "cfg",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "managedFields": [csa, ours, edit],
        },
        "data": {"a": "1", "b": "2"},
        "spec": {"ports": [{"port": 80}, {"port": 81, "name": "n"}], "template": {"x": 1}},
    }
    result = without_leftovers(after)
    assert result["data"] == {"a": "1"}
    assert result["spec"] == {"ports": [{"port": 81, "name": "n"}], "template": {"x": 1}}
    assert "annotations" not in result["metadata"]
    assert after["data"] == {"a": "1", "b": "2"}  # the answer itself is untouched
    plain = {"metadata": {"managedFields": [ours]}, "data": {"b": "2"}}
    assert without_leftovers(plain) == plain
