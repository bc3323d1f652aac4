"""Field paths and FieldsV1: the vocabulary of server-side apply's managedFields.

A field set is a set of paths; a path is a tuple of FieldsV1 elements: ``f:<name>``
for a map key, ``k:{...}`` for a list item picked by its merge key, ``v:<json>`` for
a member of a set list (finalizers) and a trailing ``.`` for "this list item
itself". See https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management.

For built-in kinds, which lists are keyed is a fixed table (the sandbox has no
OpenAPI schemas for them): ``LIST_KEYS`` below, shared with the strategic merge
patch in ``patch.py``. Every other list is atomic: owned, merged and replaced as a
whole. A custom resource's lists follow its CRD schema instead: atomic unless
``x-kubernetes-list-type`` says ``set`` (``v:`` members) or ``map`` (``k:`` items
keyed by ``x-kubernetes-list-map-keys``, possibly several keys), as
https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy
describes. Functions take ``schema``: None for a built-in kind, else the CRD
schema node of the value (``structural.EMPTY`` below what the schema describes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import Any

from reconciler.sandbox import structural
from reconciler.sandbox.structural import Schema

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

# JSON's types that are not maps: ``_is_map`` answers for them (and dict) without
# ``isinstance(..., Mapping)``, an ABC check that was a tenth of walking an object
_NOT_MAPS = frozenset({str, int, float, bool, type(None), list})


def _is_map(value: Any) -> bool:
    kind = type(value)
    return kind is dict or (kind not in _NOT_MAPS and isinstance(value, Mapping))


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
    if any(v is None for v in values):
        return None
    if all(type(v) is str for v in values):  # names: their JSON is as unique as they are
        return key if len(set(values)) == len(values) else None
    if len({json.dumps(v) for v in values}) != len(values):
        return None
    return key


def is_set_list(field: str | None, items: list[Any], schema: Schema | None = None) -> bool:
    if schema is not None:
        scalar = all(isinstance(i, str | int | float | bool) for i in items)
        return structural.list_type(schema)[0] == "set" and scalar
    return field in SET_LISTS and all(isinstance(i, str | int | float | bool) for i in items)


def list_keys(field: str | None, items: list[Any], schema: Schema | None) -> tuple[str, ...]:
    """The merge keys of a list field (by name, or from a CRD schema); () when atomic."""
    if schema is None:
        key = list_key(field, items)
        return (key,) if key else ()
    kind, keys = structural.list_type(schema)
    complete = all(isinstance(i, Mapping) and all(k in i for k in keys) for i in items)
    if kind != "map" or not complete:
        return ()
    return keys


def child_schema(schema: Schema | None, name: str, prefix: Path) -> Schema | None:
    """The schema of field ``name`` below ``prefix``; metadata follows built-in rules."""
    if schema is None or (not prefix and name == "metadata"):
        return None
    found = structural.child(schema, name)
    return found if found is not None else structural.EMPTY


def item_schema(schema: Schema | None) -> Schema | None:
    return None if schema is None else structural.items(schema)


def item_element(item: Mapping[str, Any], keys: str | tuple[str, ...]) -> str:
    names = (keys,) if isinstance(keys, str) else keys
    if len(names) == 1:
        value = item.get(names[0])
        kind = type(value)
        if kind is str or kind is int:  # a name, a type, a port: one of a few, cached
            return _one_key_element(names[0], value)
    return "k:" + json.dumps({k: item.get(k) for k in sorted(names)}, separators=(",", ":"))


@lru_cache(maxsize=16_384)
def _one_key_element(name: str, value: str | int) -> str:
    """``item_element`` of an item keyed by one string or integer field: every write of
    a pod names its containers and conditions by the same few elements, and encoding
    them again each time was a tenth of tracking a controller's status write. (Only
    ``str`` and ``int`` values come here: ``True == 1`` must not share an entry.)"""
    return "k:" + json.dumps({name: value}, separators=(",", ":"))


def field_paths(
    value: Any, prefix: Path = (), field: str | None = None, schema: Schema | None = None
) -> FieldSet:
    """Every leaf path of ``value``: scalars, atomic lists, empty maps, list items."""
    if _is_map(value):
        if not value:
            return {prefix} if prefix else set()
        paths: FieldSet = set()
        for name, child in value.items():
            if child is None:
                continue
            kind = type(child)
            if kind is str or kind is int or kind is bool or kind is float:
                paths.add((*prefix, f"f:{name}"))  # a leaf, decided without a call
                continue
            sub = child_schema(schema, name, prefix)
            paths |= field_paths(child, (*prefix, f"f:{name}"), name, sub)
        return paths
    if isinstance(value, list) and value:
        if is_set_list(field, value, schema):
            return {(*prefix, "v:" + json.dumps(v)) for v in value}
        keys = list_keys(field, value, schema)
        if keys:
            paths = set()
            for item in value:
                item_path = (*prefix, item_element(item, keys))
                paths.add((*item_path, "."))
                paths |= field_paths(item, item_path, None, item_schema(schema))
            return paths
    return {prefix}


def fields_v1_of(value: Any, schema: Schema | None = None) -> dict[str, Any]:
    """``to_fields_v1`` of a map's leaf paths (``field_paths``), where a list item's
    ``.`` comes only with a leaf below it: the fields of a created object, built in one
    walk instead of a set of paths sorted into a tree (a fifth of tracking a create).
    Keys come sorted at each level, as ``to_fields_v1`` writes them."""
    return _map_fields(value, schema, True) or {}


_BELOW_ROOT: Path = ("",)


def _map_fields(value: Any, schema: Schema | None, root: bool = False) -> dict[str, Any] | None:
    """The FieldsV1 tree below a non-empty map; None when it holds no leaf at all."""
    out: dict[str, Any] = {}
    for name, child in value.items():
        if child is None:
            continue
        kind = type(child)
        if kind is str or kind is int or kind is bool or kind is float:
            out[f"f:{name}"] = {}
            continue
        # (a prefix only tells ``child_schema`` whether this is the root: metadata)
        sub = child_schema(schema, name, () if root else _BELOW_ROOT)
        tree = _value_fields(child, name, sub)
        if tree is not None:
            out[f"f:{name}"] = tree
    return dict(sorted(out.items())) if out else None


def _value_fields(value: Any, field: str | None, schema: Schema | None) -> dict[str, Any] | None:
    """The FieldsV1 tree of one value: ``{}`` for a leaf, None when it holds no leaf."""
    if _is_map(value):
        return _map_fields(value, schema) if value else {}
    if not isinstance(value, list) or not value:
        return {}
    if is_set_list(field, value, schema):
        return dict(sorted(("v:" + json.dumps(v), {}) for v in value))
    keys = list_keys(field, value, schema)
    if not keys:
        return {}
    items: dict[str, Any] = {}
    for item in value:
        # an empty item is a leaf itself; one whose fields are all null has none
        below = _map_fields(item, item_schema(schema)) if item else {}
        if below is None:
            continue
        element = item_element(item, keys)
        tree = {".": {}, **below}
        items[element] = _merged(items[element], tree) if element in items else tree
    return dict(sorted(items.items())) if items else None


@lru_cache(maxsize=4096)
def _element_value(element: str) -> Any:
    """The JSON after ``k:``/``v:``, decoded once: every write of a pod looks up its
    containers and conditions by the same few elements (never mutate the result)."""
    return json.loads(element[2:])


def changed_paths(
    old: Any,
    old_found: bool,
    new: Any,
    prefix: Path = (),
    field: str | None = None,
    schema: Schema | None = None,
) -> FieldSet:
    """``field_paths(new, ...)`` less list-item markers and the paths whose value
    (``get_path``) is the same in ``old``: what a write changed.

    ``old`` is the value at ``prefix`` in the object before the write (``old_found``:
    whether there is one). The same set as comparing every path of ``new`` with
    ``get_path`` on both objects, without walking the subtrees a write leaves equal
    (a pod's spec and metadata on each of the kubelet's status writes).
    """
    if not old_found:  # all of it is new (a created object): every leaf path
        return {p for p in field_paths(new, prefix, field, schema) if p[-1] != "."}
    if old == new:
        return set()
    if _is_map(new):
        if not new:
            return {prefix} if prefix else set()
        paths: FieldSet = set()
        old_map = old if old_found and _is_map(old) else None
        for name, child in new.items():
            if child is None:
                continue
            found = old_map is not None and name in old_map
            kind = type(child)
            if kind is str or kind is int or kind is bool or kind is float:
                # a leaf, as the call below would decide it (most fields are leaves:
                # a call each was most of walking a created object)
                if not found or old_map[name] != child:  # type: ignore[index]
                    paths.add((*prefix, f"f:{name}"))
                continue
            paths |= changed_paths(
                old_map[name] if old_map is not None and found else None,
                found,
                child,
                (*prefix, f"f:{name}"),
                name,
                child_schema(schema, name, prefix),
            )
        return paths
    if isinstance(new, list) and new:
        keys = () if is_set_list(field, new, schema) else list_keys(field, new, schema)
        elements = [item_element(item, keys) for item in new] if keys else []
        if not keys or len(set(elements)) != len(elements):
            # set members, or items sharing a key: compare each path as ``get_path`` would
            base = len(prefix)
            missing: tuple[bool, Any] = (False, None)
            return {
                p
                for p in field_paths(new, prefix, field, schema)
                if p[-1] != "."
                and (get_path(old, p[base:]) if old_found else missing) != get_path(new, p[base:])
            }
        old_list = old if old_found and isinstance(old, list) else None
        items: FieldSet = set()
        for item, element in zip(new, elements, strict=True):
            index = _find_item(old_list, element) if old_list is not None else None
            items |= changed_paths(
                old_list[index] if old_list is not None and index is not None else None,
                index is not None,
                item,
                (*prefix, element),
                None,
                item_schema(schema),
            )
        return items
    return {prefix}


# ``prune_fields_v1``'s ``old`` when the tree was not verified against an object
ABSENT: Any = object()


def prune_fields_v1(
    tree: Mapping[str, Any],
    obj: Any,
    drop: FieldSet,
    prefix: Path = (),
    under: AbstractSet[Path] | None = None,
    old: Any = ABSENT,
) -> dict[str, Any]:
    """``to_fields_v1`` of the leaf paths of ``tree`` that exist in ``obj`` and are not
    in ``drop``, without taking the tree apart into paths and putting it back.

    A path exists as ``get_path`` finds it. Like ``to_fields_v1``, keys come sorted at
    each level and leaves are ``{}``. ``under``: the proper prefixes of ``drop``'s
    paths (``drop_prefixes``), for a caller pruning many trees with one ``drop``; a
    subtree no path of ``drop`` reaches only needs its paths to exist.

    ``old``: an object ``tree`` is known to be exactly that pruning of (every leaf of
    it exists there, keys sorted, leaves ``{}``), such as the stored object whose
    managedFields it came from. A subtree no path of ``drop`` reaches, whose value
    in ``obj`` is the very value it has in ``old`` (a status write shares the spec
    and the metadata's maps with the object it replaces), is returned as it is,
    without walking it again: that walk was the biggest part of a pod's status write.
    The result may then share maps with ``tree``: never change it in place.
    """
    if under is None:
        under = drop_prefixes(drop)
    if prefix not in under:
        return _existing(tree, obj, old)
    out: dict[str, Any] = {}
    for key in sorted(tree):
        found, node = _step(obj, key)
        if not found:
            continue
        child = tree[key]
        path = (*prefix, key)
        if child and _is_map(child):
            was = ABSENT
            if old is not ABSENT:
                known, was = _step(old, key)
                was = was if known else ABSENT
            sub = prune_fields_v1(child, node, drop, path, under, was)
            if sub:
                out[key] = sub
        elif path not in drop:
            out[key] = {}
    return out


def drop_prefixes(paths: FieldSet) -> frozenset[Path]:
    """Every proper prefix of ``paths`` (``()`` included when there are any).

    Longest first, stopping at a prefix already found: the paths of one write share
    most of their prefixes (a status's conditions), and slicing every prefix of
    every path again was a tenth of tracking a Deployment's status write.
    """
    found: set[Path] = set()
    for path in paths:
        for i in range(len(path) - 1, -1, -1):
            prefix = path[:i]
            if prefix in found:
                break
            found.add(prefix)
    return frozenset(found)


def _existing(tree: Mapping[str, Any], obj: Any, old: Any = ABSENT) -> dict[str, Any]:
    """``prune_fields_v1`` with nothing to drop: the leaves of ``tree`` found in ``obj``;
    a subtree whose value in ``obj`` is the very one in ``old`` comes back as it is.

    Every write walks every other manager's tree through here, so ``_step`` is inlined
    for a map (the common case) and a dict is told from a leaf without
    ``isinstance(..., Mapping)``, whose ABC check was a tenth of this walk.
    """
    if old is obj and type(tree) is dict:
        return tree
    out: dict[str, Any] = {}
    is_map = type(obj) is dict or isinstance(obj, Mapping)
    old_map = old is not ABSENT and (type(old) is dict or isinstance(old, Mapping))
    for key in sorted(tree):
        was = ABSENT
        if is_map and key[:2] == "f:":
            name = key[2:]
            if name not in obj:
                continue
            node = obj[name]
            if old_map and name in old:
                was = old[name]
        else:
            found, node = _step(obj, key)
            if not found:
                continue
            if old is not ABSENT:
                known, value = _step(old, key)
                was = value if known else ABSENT
        child = tree[key]
        if child and (type(child) is dict or isinstance(child, Mapping)):
            sub = _existing(child, node, was)
            if sub:
                out[key] = sub
        else:
            out[key] = {}
    return out


def _step(obj: Any, element: str) -> tuple[bool, Any]:
    """One element of ``get_path``: (found, the value it names)."""
    if element == ".":
        return True, obj
    if element[:2] == "f:" and _is_map(obj):
        name = element[2:]
        return (True, obj[name]) if name in obj else (False, None)
    if element[:2] in ("k:", "v:") and isinstance(obj, list):
        index = _find_item(obj, element)
        return (True, obj[index]) if index is not None else (False, None)
    return False, None


def add_to_fields_v1(tree: Mapping[str, Any], paths: Iterable[Path]) -> dict[str, Any]:
    """``to_fields_v1(from_fields_v1(tree) | paths)`` for a tree ``to_fields_v1`` made
    (keys sorted, leaves ``{}``), without taking ``tree`` apart into paths.

    ``tree`` itself is left as it is (it may share maps with a stored object's
    managedFields, ``prune_fields_v1``): the result copies only the maps the paths
    add to, and shares the rest with it."""
    return _merged(tree, to_fields_v1(paths))


def _merged(tree: Mapping[str, Any], added: dict[str, Any]) -> dict[str, Any]:
    """The union of two FieldsV1 trees, keys sorted; ``tree`` is never changed."""
    if not added:
        return tree if type(tree) is dict else dict(tree)
    if not tree:
        return added
    out = dict(tree)
    grown = False
    for key, child in added.items():
        if key in out:
            out[key] = _merged(out[key], child)
        else:
            out[key] = child
            grown = True
    return dict(sorted(out.items())) if grown else out


def _find_item(items: list[Any], element: str) -> int | None:
    if element.startswith("v:"):
        wanted = _element_value(element)
        return next((i for i, v in enumerate(items) if v == wanted), None)
    want = _element_pairs(element)
    if len(want) == 1:  # one merge key (a container's name, a condition's type)
        ((key, value),) = want
        for i, item in enumerate(items):
            if (type(item) is dict or isinstance(item, Mapping)) and item.get(key) == value:
                return i
        return None
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and all(item.get(k) == v for k, v in want):
            return i
    return None


@lru_cache(maxsize=4096)
def _element_pairs(element: str) -> tuple[tuple[str, Any], ...]:
    """The (key, value) pairs of a ``k:`` element, decoded once (never mutate them)."""
    return tuple(_element_value(element).items())


def get_path(obj: Any, path: Path) -> tuple[bool, Any]:
    """(found, value) at ``path``; ``.`` resolves to the node it follows."""
    current = obj
    for element in path:
        if element == ".":
            continue
        if element[:2] == "f:" and _is_map(current):
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
        if child and _is_map(child):
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
