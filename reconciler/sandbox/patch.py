"""The three non-apply PATCH flavours a Kubernetes API server accepts.

https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/
describes them: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic
merge patch. The strategic one here is a documented subset: lists named in
``fieldsets.LIST_KEYS`` (containers, env, volumes, ports, conditions, ...) merge by
their key, ``finalizers`` merge as a set, every other list is replaced; the
directives ``$patch: delete|replace|merge`` work, ``$setElementOrder``,
``$retainKeys`` and ``$deleteFromPrimitiveList`` are accepted (the first two are
ignored). ``api.py`` calls :func:`apply_patch`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import clone
from reconciler.sandbox.fieldsets import list_key

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# Custom resources have no patch strategies: no strategic merge patch, 415 instead
# (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#advanced-topics).
CUSTOM_RESOURCE_PATCHES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)


def apply_patch(content_type: str, obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    """The object after ``patch``; raises ApiError 422/415 for a patch that cannot apply."""
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise ApiError(400, "json patch must be a list of operations")
        result = json_patch(obj, patch)
    elif content_type == MERGE_PATCH:
        result = merge_patch(obj, patch)
    elif content_type == STRATEGIC_PATCH:
        if not isinstance(patch, Mapping):
            raise ApiError(400, "strategic merge patch must be an object")
        result = strategic_merge(obj, patch)
    else:
        raise ApiError(415, f"unsupported patch content type {content_type!r}")
    if not isinstance(result, dict):
        raise ApiError(422, "patch did not produce an object")
    return result


# --- RFC 7386 -------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return clone(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 -------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        try:
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise ApiError(422, f"json patch: path {path!r} does not exist") from e
    return doc


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return clone(value)
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else _index(last, len(parent) + 1, path)
        parent.insert(index, clone(value))
    elif isinstance(parent, dict):
        parent[last] = clone(value)
    else:
        raise ApiError(422, f"json patch: cannot add at {path!r}")
    return doc


def _index(text: str, bound: int, path: str) -> int:
    if not text.isdigit() or int(text) >= bound:
        raise ApiError(422, f"json patch: bad array index in {path!r}")
    return int(text)


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise ApiError(422, "json patch: cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), path))
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    raise ApiError(422, f"json patch: path {path!r} does not exist")


def json_patch(doc: Any, operations: list[Any]) -> Any:
    doc = clone(doc)
    for op in operations:
        if not isinstance(op, Mapping) or "op" not in op or "path" not in op:
            raise ApiError(422, f"json patch: malformed operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _remove(doc, path)
            doc = _add(doc, path, op.get("value"))
        elif kind in ("move", "copy"):
            source = op.get("from", "")
            value = clone(_walk(doc, _pointer(source), source))
            if kind == "move":
                _remove(doc, source)
            doc = _add(doc, path, value)
        elif kind == "test":
            if _walk(doc, _pointer(path), path) != op.get("value"):
                raise ApiError(422, f"json patch: test failed at {path!r}")
        else:
            raise ApiError(422, f"json patch: unknown operation {kind!r}")
    return doc


# --- strategic merge patch ------------------------------------------------------------

_IGNORED_PREFIXES = ("$setElementOrder/", "$retainKeys")


def strategic_merge(target: Any, patch: Mapping[str, Any]) -> Any:
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key == "$patch" or key.startswith(_IGNORED_PREFIXES):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = clone(value)
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if any(isinstance(i, Mapping) and i.get("$patch") == "replace" for i in patch):
        return [clone(i) for i in patch if not (isinstance(i, Mapping) and "$patch" in i)]
    live = list(current) if isinstance(current, list) else []
    if field == "finalizers":
        return live + [v for v in patch if v not in live]
    key = list_key(field, [i for i in patch if isinstance(i, Mapping)] or [{}])
    if key is None or not all(isinstance(i, Mapping) for i in patch):
        return clone(patch)
    for item in patch:
        index = next(
            (n for n, i in enumerate(live) if isinstance(i, Mapping) and i.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del live[index]
        elif index is None:
            live.append(strategic_merge({}, item))
        else:
            live[index] = strategic_merge(live[index], item)
    return live


def parse_patch_body(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError as e:
        raise ApiError(400, f"invalid patch body: {e}") from e
