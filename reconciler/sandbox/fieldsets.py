"""Field paths and FieldsV1: the vocabulary of server-side apply's managedFields.

A field set is a set of paths; a path is a tuple of FieldsV1 elements: ``f:<name>``
for a map key, ``k:{...}`` for a list item picked by its merge key, ``v:<json>`` for
a member of a set list (finalizers) and a trailing ``.`` for "this list item
itself". See https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management.

Which lists are keyed is a fixed table (the sandbox has no OpenAPI schemas):
``LIST_KEYS`` below, shared with the strategic merge patch in ``patch.py``. Every
other list is atomic: owned, merged and replaced as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

Path = tuple[str, ...]
FieldSet = set[Path]

LIST_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
}
SET_LISTS = frozenset({"finalizers"})


def list_key(field: str | None, items: list[Any]) -> str | None:
    """The merge key of a list field, or None when the list is atomic."""
    if field == "ports":
        has_container_port = any(isinstance(i, Mapping) and "containerPort" in i for i in items)
        key: str | None = "containerPort" if has_container_port else "port"
    else:
        key = LIST_KEYS.get(field or "")
    if not key or not all(isinstance(i, Mapping) for i in items):
        return None
    values = [i.get(key) for i in items]
    if any(v is None for v in values) or len({json.dumps(v) for v in values}) != len(values):
        return None
    return key


def is_set_list(field: str | None, items: list[Any]) -> bool:
    return field in SET_LISTS and all(isinstance(i, str | int | float | bool) for i in items)


def item_element(item: Mapping[str, Any], key: str) -> str:
    return "k:" + json.dumps({key: item.get(key)}, separators=(",", ":"))


def field_paths(value: Any, prefix: Path = (), field: str | None = None) -> FieldSet:
    """Every leaf path of ``value``: scalars, atomic lists, empty maps, list items."""
    if isinstance(value, Mapping):
        if not value:
            return {prefix} if prefix else set()
        paths: FieldSet = set()
        for name, child in value.items():
            if child is not None:
                paths |= field_paths(child, (*prefix, f"f:{name}"), name)
        return paths
    if isinstance(value, list) and value:
        if is_set_list(field, value):
            return {(*prefix, "v:" + json.dumps(v)) for v in value}
        key = list_key(field, value)
        if key:
            paths = set()
            for item in value:
                item_path = (*prefix, item_element(item, key))
                paths.add((*item_path, "."))
                paths |= field_paths(item, item_path)
            return paths
    return {prefix}


def _find_item(items: list[Any], element: str) -> int | None:
    if element.startswith("v:"):
        wanted = json.loads(element[2:])
        return next((i for i, v in enumerate(items) if v == wanted), None)
    want = json.loads(element[2:])
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and all(item.get(k) == v for k, v in want.items()):
            return i
    return None


def get_path(obj: Any, path: Path) -> tuple[bool, Any]:
    """(found, value) at ``path``; ``.`` resolves to the node it follows."""
    current = obj
    for element in path:
        if element == ".":
            continue
        if element.startswith("f:") and isinstance(current, Mapping):
            if element[2:] not in current:
                return False, None
            current = current[element[2:]]
        elif element[:2] in ("k:", "v:") and isinstance(current, list):
            index = _find_item(current, element)
            if index is None:
                return False, None
            current = current[index]
        else:
            return False, None
    return True, current


def remove_path(obj: Any, path: Path) -> None:
    """Delete what ``path`` names from ``obj`` in place (a no-op when absent)."""
    if path and path[-1] == ".":
        path = path[:-1]
    if not path:
        return
    found, parent = get_path(obj, path[:-1])
    last = path[-1]
    if not found:
        return
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif isinstance(parent, list):
        index = _find_item(parent, last)
        if index is not None:
            del parent[index]


def prune_empty(obj: Any, path: Path, keep: Iterable[Path]) -> None:
    """Drop maps left empty along ``path`` unless a kept path names or passes them."""
    kept = list(keep)
    for depth in range(len(path) - 1, 0, -1):
        parent_path = path[:depth]
        if parent_path[-1] == ".":
            continue
        found, value = get_path(obj, parent_path)
        if not found or value not in ({}, []):
            return
        if any(k[:depth] == parent_path for k in kept):
            return
        remove_path(obj, parent_path)


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def from_fields_v1(tree: Mapping[str, Any], prefix: Path = ()) -> FieldSet:
    paths: FieldSet = set()
    for element, child in tree.items():
        path = (*prefix, element)
        if isinstance(child, Mapping) and child:
            paths |= from_fields_v1(child, path)
        else:
            paths.add(path)
    return paths


def dotted(path: Path) -> str:
    """A path as kubectl prints it in conflicts: ``.spec.template...[name="web"].image``."""
    text = ""
    for element in path:
        if element.startswith("f:"):
            text += "." + element[2:]
        elif element.startswith("k:"):
            key = json.loads(element[2:])
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]"
        elif element.startswith("v:"):
            text += f"[{element[2:]}]"
    return text
