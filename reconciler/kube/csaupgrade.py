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
their fields. ``apply.py`` sends the patch before applying an adopted object;
``diff.py`` shows the same outcome with :func:`without_leftovers`.
"""

from __future__ import annotations

import copy
import json
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


# --- what the take-over will delete, for ``diff`` ------------------------------------------

Path = tuple[str, ...]


def _leaves(tree: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    """The owned paths of a FieldsV1 tree (``.`` marks a list item owned as such)."""
    paths: set[Path] = set()
    for element, below in tree.items():
        path = (*prefix, element)
        if isinstance(below, Mapping) and below:
            paths |= _leaves(below, path)
        else:
            paths.add(path)
    return paths


_MISSING = object()


def _item_index(items: list[Any], element: str) -> int | None:
    wanted = json.loads(element[2:])
    for index, item in enumerate(items):
        if element.startswith("v:") and item == wanted:
            return index
        keyed = element.startswith("k:") and isinstance(item, Mapping)
        if keyed and all(item.get(k) == v for k, v in wanted.items()):
            return index
    return None


def _resolve(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        if element.startswith("f:") and isinstance(node, dict) and element[2:] in node:
            node = node[element[2:]]
        elif element[:2] in ("k:", "v:") and isinstance(node, list):
            index = _item_index(node, element)
            if index is None:
                return _MISSING
            node = node[index]
        else:
            return _MISSING
    return node


def _delete_child(parent: Any, element: str) -> None:
    if element.startswith("f:") and isinstance(parent, dict):
        parent.pop(element[2:], None)
    elif isinstance(parent, list):
        index = _item_index(parent, element)
        if index is not None:
            del parent[index]


def _remove(obj: Any, path: Path) -> None:
    """Delete what ``path`` names, then the maps and lists it leaves empty."""
    if path and path[-1] == ".":
        path = path[:-1]
    if not path or _resolve(obj, path) is _MISSING:
        return
    _delete_child(_resolve(obj, path[:-1]), path[-1])
    for depth in range(len(path) - 1, 0, -1):
        if _resolve(obj, path[:depth]) not in ({}, []):
            return
        _delete_child(_resolve(obj, path[: depth - 1]), path[depth - 1])


def without_leftovers(after: Mapping[str, Any]) -> dict[str, Any]:
    """A dry-run apply answer as the take-over plus apply will leave it.

    Fields that only client-side managers own (no other manager, ours included,
    owns them or anything above or below them) are deleted by the real apply.
    """
    result: dict[str, Any] = copy.deepcopy(dict(after))
    names = client_side_managers(after)
    if not names:
        return result
    entries = [e for e in (after.get("metadata") or {}).get("managedFields") or ()]
    theirs: set[Path] = set()
    kept: set[Path] = set()
    for entry in entries:
        leaves = _leaves(entry.get("fieldsV1") or {})
        if _is_client_side(entry, names):
            theirs |= leaves
        else:
            kept |= leaves
    owned = {_bare(k) for k in kept}
    gone = {p for p in theirs if not _is_key(p) and not any(_related(_bare(p), k) for k in owned)}
    # whole list items first (what they hold goes with them), then the deepest leaves
    for path in sorted(gone, key=lambda p: (p[-1] != ".", -len(p))):
        _remove(result, path)
    return result


def _is_key(path: Path) -> bool:
    """A list item's key field goes with its item, never alone."""
    if len(path) < 2 or not path[-2].startswith("k:") or not path[-1].startswith("f:"):
        return False
    return path[-1][2:] in json.loads(path[-2][2:])


def _bare(path: Path) -> Path:
    return path[:-1] if path and path[-1] == "." else path


def _related(a: Path, b: Path) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a
