"""Take over what client-side ``kubectl apply`` owns before applying server-side.

An object created or updated by client-side ``kubectl apply`` belongs, field by
field, to an ``Update`` manager (``kubectl-client-side-apply``) that also owns the
``kubectl.kubernetes.io/last-applied-configuration`` annotation. When our manager
then applies the same values, the API server makes the two share those fields
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts), so a
field later removed from Git is never deleted: the client-side manager still owns
it. kube-apiserver only upgrades such ownership for the manager ``kubectl``
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#upgrading-from-client-side-apply-to-server-side-apply);
kubectl itself then rewrites ``managedFields`` with a JSON patch that moves the
client-side fields into its own ``Apply`` entry (client-go's ``csaupgrade``).

:func:`upgrade_patch` builds that same patch for our manager: every ``Update``
entry of the main resource that owns the last-applied annotation is merged into
our ``Apply`` entry and removed, and ``resourceVersion`` is set so a concurrent
write makes the patch fail with 409 instead of losing it. The apply that follows
then deletes whatever the old client-side configuration had and Git does not,
the annotation included. Other managers (``kubectl edit``, controllers) keep
their fields. ``apply.py`` sends the patch before applying an adopted object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
JSON_PATCH = "application/json-patch+json"

JsonObject = dict[str, Any]


def _owns_last_applied(entry: Mapping[str, Any]) -> bool:
    fields = entry.get("fieldsV1") or {}
    annotations = (fields.get("f:metadata") or {}).get("f:annotations") or {}
    return f"f:{LAST_APPLIED}" in annotations


def _is_update(entry: Mapping[str, Any]) -> bool:
    return entry.get("operation") == "Update" and not entry.get("subresource")


def _is_client_side(entry: Mapping[str, Any], names: set[str]) -> bool:
    return entry.get("manager") in names and _is_update(entry)


def client_side_managers(live: Mapping[str, Any]) -> set[str]:
    """Managers that wrote the last-applied annotation with client-side apply."""
    entries = (live.get("metadata") or {}).get("managedFields") or ()
    return {
        str(e.get("manager"))
        for e in entries
        if isinstance(e, Mapping) and _is_update(e) and _owns_last_applied(e)
    }


def _union(a: Mapping[str, Any], b: Mapping[str, Any]) -> JsonObject:
    """Two FieldsV1 trees merged."""
    merged: JsonObject = {k: v for k, v in a.items()}
    for key, value in b.items():
        if key in merged and isinstance(merged[key], Mapping) and isinstance(value, Mapping):
            merged[key] = _union(merged[key], value)
        else:
            merged[key] = value
    return merged


def upgrade_patch(live: Mapping[str, Any], manager: str) -> list[JsonObject] | None:
    """The JSON patch giving ``manager`` (Apply) the client-side fields; None if none."""
    names = client_side_managers(live)
    if not names:
        return None
    meta = live.get("metadata") or {}
    entries = [dict(e) for e in meta.get("managedFields") or () if isinstance(e, Mapping)]
    target = next(
        (
            i
            for i, e in enumerate(entries)
            if e.get("manager") == manager
            and e.get("operation") == "Apply"
            and not e.get("subresource")
        ),
        None,
    )
    if target is None:
        target = next(i for i, e in enumerate(entries) if _is_client_side(e, names))
        entries[target] = {**entries[target], "manager": manager, "operation": "Apply"}
    version = entries[target].get("apiVersion")
    fields: JsonObject = dict(entries[target].get("fieldsV1") or {})
    for entry in entries:
        if _is_client_side(entry, names) and entry.get("apiVersion") == version:
            fields = _union(fields, entry.get("fieldsV1") or {})
    entries[target] = {**entries[target], "fieldsType": "FieldsV1", "fieldsV1": fields}
    kept = [e for e in entries if not _is_client_side(e, names)]
    return [
        {"op": "replace", "path": "/metadata/managedFields", "value": kept},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
    ]
