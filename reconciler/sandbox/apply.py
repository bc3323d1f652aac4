"""Server-side apply and managedFields bookkeeping.

Follows https://kubernetes.io/docs/reference/using-api/server-side-apply/: every
write records which manager owns which fields (``metadata.managedFields``, FieldsV1).
An apply (``PATCH`` with ``application/apply-patch+yaml``) merges the applied
configuration, conflicts (409) when another manager owns a field with a different
value unless ``force``, takes ownership when forced, and removes fields the manager
applied before, stopped applying, and owned alone. Any other write (create, PUT,
patch) makes its manager (operation ``Update``) own the fields it changed; such a
write may also set ``metadata.managedFields`` itself (a valid, non-empty list
replaces the server's), which is how clients upgrade field ownership.

Upgrading from client-side apply
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#upgrading-from-client-side-apply-to-server-side-apply):
when the manager ``kubectl`` applies and conflicts only on fields whose live values
still equal those recorded in the ``kubectl.kubernetes.io/last-applied-configuration``
annotation, the apply is forced (kube-apiserver's lastAppliedManager); after any
``kubectl`` apply, an existing annotation is rewritten to the applied configuration
(lastAppliedUpdater). Other managers get ordinary conflicts. kubectl then moves
the ``kubectl-client-side-apply`` fields to its own entry with a JSON patch of
``managedFields`` (client-side, kubectl's csaupgrade).
``api.py`` calls :func:`server_side_apply` and :func:`track_update`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import IdentityMemo, clone
from reconciler.sandbox.fieldsets import (
    ABSENT,
    FieldSet,
    Path,
    add_to_fields_v1,
    changed_paths,
    child_schema,
    dotted,
    drop_prefixes,
    field_paths,
    fields_v1_of,
    from_fields_v1,
    get_path,
    is_set_list,
    item_schema,
    list_keys,
    prune_empty,
    prune_fields_v1,
    remove_path,
    to_fields_v1,
)
from reconciler.sandbox.structural import Schema

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# The only manager whose applies upgrade client-side apply ownership (kubectl's default).
KUBECTL_MANAGER = "kubectl"

# Fields the server owns; no manager ever does.
_UNMANAGED: tuple[Path, ...] = (
    ("f:apiVersion",),
    ("f:kind",),
    *(
        ("f:metadata", f"f:{name}")
        for name in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        )
    ),
)


@dataclass
class ManagedEntry:
    manager: str
    operation: str  # Apply | Update
    api_version: str
    subresource: str = ""
    time: str = ""
    fields: FieldSet = field(default_factory=set)

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.manager, self.operation, self.subresource)

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(self.fields),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ManagedEntry:
        return cls(
            manager=str(data.get("manager", "")),
            operation=str(data.get("operation", "Update")),
            api_version=str(data.get("apiVersion", "")),
            subresource=str(data.get("subresource", "")),
            time=str(data.get("time", "")),
            fields=from_fields_v1(data.get("fieldsV1") or {}),
        )


# (the whole second, its text): every write stamps managedFields, and formatting the
# same second again was 2% of the sandbox's CPU during an install
_last_stamp: tuple[int, str] = (-1, "")


def now() -> str:
    """The current time as managedFields and timestamps carry it (whole seconds, UTC)."""
    global _last_stamp
    moment = datetime.now(UTC)
    second = int(moment.timestamp())
    if _last_stamp[0] != second:
        _last_stamp = (second, moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _last_stamp[1]


# ``_UNMANAGED`` as two sets: the top-level names and the metadata names. Every
# write filters every path it changed through ``_unmanaged``: slicing each path to
# each length was a tenth of the managedFields bookkeeping of an install.
_UNMANAGED_TOP = frozenset(u[0] for u in _UNMANAGED if len(u) == 1)
_UNMANAGED_META = frozenset(u[1] for u in _UNMANAGED if len(u) == 2)
assert all(len(u) == 1 or (len(u) == 2 and u[0] == "f:metadata") for u in _UNMANAGED)


def _unmanaged(path: Path) -> bool:
    """``path`` is, or is under, a field the server owns."""
    if not path:
        return False
    head = path[0]
    if head in _UNMANAGED_TOP:
        return True
    return head == "f:metadata" and len(path) > 1 and path[1] in _UNMANAGED_META


def _scoped(paths: FieldSet, subresource: str, has_status: bool) -> FieldSet:
    """Only the fields this endpoint may write: status for /status (and the metadata a
    status strategy lets through, such as a Deployment's revision annotation, which a
    real cluster lists under the controller's ``subresource: status`` entry), the rest
    otherwise."""
    if not has_status:
        return {p for p in paths if not _unmanaged(p)}
    if subresource == "status":
        return {p for p in paths if p[:1] in _STATUS_SCOPE and not _unmanaged(p)}
    return {p for p in paths if p[:1] != ("f:status",) and not _unmanaged(p)}


_STATUS_SCOPE = frozenset({("f:status",), ("f:metadata",)})


def _entries(obj: Mapping[str, Any] | None) -> list[ManagedEntry]:
    if not obj:
        return []
    raw = obj.get("metadata", {}).get("managedFields") or []
    return [ManagedEntry.from_dict(e) for e in raw if isinstance(e, Mapping)]


def _identity(data: Mapping[str, Any]) -> tuple[str, str, str]:
    """``ManagedEntry.from_dict(data).identity`` without decoding its fieldsV1."""
    return (
        str(data.get("manager", "")),
        str(data.get("operation", "Update")),
        str(data.get("subresource", "")),
    )


def _with_fields(data: Mapping[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``ManagedEntry.from_dict(data).to_dict()`` with ``fields`` as its fieldsV1 (the
    entry normalized as the server writes it), without a round trip through a field
    set: every write re-states every other manager's entry this way."""
    entry: dict[str, Any] = {
        "manager": str(data.get("manager", "")),
        "operation": str(data.get("operation", "Update")),
        "apiVersion": str(data.get("apiVersion", "")),
        "time": str(data.get("time", "")),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    subresource = str(data.get("subresource", ""))
    if subresource:
        entry["subresource"] = subresource
    return entry


def _store_entries(obj: dict[str, Any], entries: list[ManagedEntry]) -> None:
    kept = [e for e in entries if e.fields]
    if kept:
        obj["metadata"]["managedFields"] = [e.to_dict() for e in kept]
    else:
        obj["metadata"].pop("managedFields", None)


def _requested_entries(obj: Mapping[str, Any]) -> list[ManagedEntry] | None:
    """managedFields written by the client, if every entry decodes as the server requires."""
    raw = (obj.get("metadata") or {}).get("managedFields")
    if not isinstance(raw, list) or not raw:
        return None
    for entry in raw:
        if not isinstance(entry, Mapping) or entry.get("operation") not in ("Apply", "Update"):
            return None
        if not entry.get("apiVersion") or entry.get("fieldsType") != "FieldsV1":
            return None
        if not isinstance(entry.get("fieldsV1") or {}, Mapping):
            return None
    return [ManagedEntry.from_dict(e) for e in raw]


# managedFields lists known to be exactly the pruning of the object that holds them
# (every leaf of every fieldsV1 exists there; keys sorted, leaves ``{}``), by the
# list's id: (the list, that object). ``track_update`` makes such a list for each
# update of a stored object (``commit``: after it only the generation and the
# resourceVersion change, both the server's); the next write of that object prunes
# the others' entries only where it changed something. Both are checked by identity,
# and stored objects are never changed in place; a copy (``clone``) or a list built
# elsewhere (apply, create, the garbage collector's own writes) is not in here and is
# pruned in full. Taken out when its object is written again; at most 100,000
# (the oldest go first: a forgotten one only costs a full pruning).
_PRUNED: IdentityMemo[Mapping[str, Any]] = IdentityMemo(100_000)


def _pruned_for(entries: Any, obj: Mapping[str, Any]) -> bool:
    """``entries`` are ``obj``'s own exact pruning (and are forgotten: ``obj`` is being
    replaced)."""
    return _PRUNED.pop(entries) is obj


def _exists(obj: Any, path: Path) -> bool:
    return get_path(obj, path)[0]


def track_update(
    old: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    subresource: str,
    has_status: bool,
    schema: Schema | None = None,
) -> None:
    """Give ``manager`` (operation Update) the fields this write changed, in place.

    ``new`` may carry managedFields of its own: when they are a valid non-empty list
    they replace the stored ones (never on a subresource), else the stored ones stay.
    """
    # the stored entries sent back as they are (most writes) give the same result as
    # none sent: told by comparing them before decoding them
    sent = new["metadata"].get("managedFields")
    same = sent == (old or {}).get("metadata", {}).get("managedFields")
    requested = None if subresource or same else _requested_entries(new)
    if old is None and requested is None and not subresource:
        created = created_fields(new, has_status, schema)
        if created:
            entry = ManagedEntry(manager, "Update", new.get("apiVersion", ""), subresource)
            entry.time = now()
            new["metadata"]["managedFields"] = [{**entry.to_dict(), "fieldsV1": created}]
        else:
            new["metadata"].pop("managedFields", None)
        return
    changed = _scoped(
        _changed_paths(old, new, subresource, has_status, schema), subresource, has_status
    )
    identity = (manager, "Update", subresource)
    if requested is None:
        # The stored entries: each one's fieldsV1 is pruned as a tree (the fields
        # this write changed, or removed, are dropped); only the writer's own entry
        # is taken apart into paths, to add what it changed.
        raw = (old or {}).get("metadata", {}).get("managedFields") or []
        stored = [e for e in raw if isinstance(e, Mapping)]
        # the value ``old`` itself when its entries are its own exact pruning
        # (``_PRUNED``): the subtrees this write left alone are kept without a walk
        basis = old if old is not None and _pruned_for(raw, old) else ABSENT
        mine_at = (
            next((i for i, e in enumerate(stored) if _identity(e) == identity), None)
            if changed
            else None
        )
        # (a create has no stored entries to prune: no prefixes to compute)
        under = drop_prefixes(changed) if stored else frozenset()
        mine: dict[str, Any] | None = None
        if changed:
            if mine_at is None:
                entry = ManagedEntry(manager, "Update", new.get("apiVersion", ""), subresource)
                tree: dict[str, Any] = {}
            else:
                entry = ManagedEntry.from_dict({**stored[mine_at], "fieldsV1": {}})
                kept = stored[mine_at].get("fieldsV1") or {}
                tree = (
                    prune_fields_v1(kept, new, changed, under=under, old=basis)
                    if isinstance(kept, Mapping)
                    else {}
                )
            entry.time = now()
            added = add_to_fields_v1(tree, changed | _item_markers(new, changed))
            mine = {**entry.to_dict(), "fieldsV1": added}
        out: list[dict[str, Any]] = []
        for i, data in enumerate(stored):
            if i == mine_at and mine is not None:
                out.append(mine)
                continue
            tree = data.get("fieldsV1") or {}
            pruned = (
                prune_fields_v1(tree, new, changed, under=under, old=basis)
                if isinstance(tree, Mapping)
                else {}
            )
            if pruned:
                out.append(_with_fields(data, pruned))
        if mine is not None and mine_at is None:
            out.append(mine)
        if out:
            new["metadata"]["managedFields"] = out
            if old is not None:
                _PRUNED.put(out, new)
        else:
            new["metadata"].pop("managedFields", None)
        return
    for entry in requested:
        entry.fields = {p for p in entry.fields - changed if _exists(new, p)}
    if changed:
        found = next((e for e in requested if e.identity == identity), None)
        if found is None:
            found = ManagedEntry(manager, "Update", new.get("apiVersion", ""), subresource)
            requested.append(found)
        found.fields |= changed | _item_markers(new, changed)
        found.time = now()
    _store_entries(new, requested)


def created_fields(
    obj: Mapping[str, Any], has_status: bool, schema: Schema | None
) -> dict[str, Any]:
    """The FieldsV1 of the manager that creates ``obj``: every field it sets but the
    server's own (and status, where a status subresource writes it), list items marked.

    What the general path makes of a create (``changed_paths`` from nothing, scoped,
    with ``_item_markers``, sorted into a tree), in one walk of the object: every
    pod a ReplicaSet creates went through that path.
    """
    tree = fields_v1_of(obj, schema)
    out = {
        k: v
        for k, v in tree.items()
        if k not in _UNMANAGED_TOP and not (has_status and k == "f:status")
    }
    meta = out.get("f:metadata")
    if meta:  # (an empty one is the leaf of an empty metadata map: kept)
        kept = {k: v for k, v in meta.items() if k not in _UNMANAGED_META}
        if kept:
            out["f:metadata"] = kept
        else:
            del out["f:metadata"]
    return out


def _changed_paths(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    subresource: str,
    has_status: bool,
    schema: Schema | None,
) -> FieldSet:
    """The leaf paths a write changed (no item markers): only the status subtree's for
    /status, without walking the spec and metadata of every pod on each of the
    kubelet's status writes."""
    if subresource == "status" and has_status:
        before = old or {}
        paths: FieldSet = set()
        if new.get("status") is not None:
            paths = changed_paths(
                before.get("status"),
                "status" in before,
                new["status"],
                ("f:status",),
                "status",
                child_schema(schema, "status", ()),
            )
        # annotations a status strategy let through (a Deployment's revision)
        was = (before.get("metadata") or {}).get("annotations")
        annotations = (new.get("metadata") or {}).get("annotations")
        if annotations and annotations != was:
            paths |= changed_paths(
                was, was is not None, annotations, ("f:metadata", "f:annotations"), "annotations"
            )
        return paths
    return changed_paths(old or {}, True, new, schema=schema)


def _item_markers(obj: Any, paths: FieldSet) -> FieldSet:
    """The ``.`` entries of list items that hold any of ``paths``."""
    markers: FieldSet = set()
    for path in paths:
        for depth, element in enumerate(path):
            if element[:2] == "k:":
                markers.add((*path[: depth + 1], "."))
    return {m for m in markers if _exists(obj, m)}


def _merge_applied(
    live: Any,
    applied: Any,
    name: str | None = None,
    schema: Schema | None = None,
    prefix: Path = (),
) -> Any:
    if isinstance(live, dict) and isinstance(applied, Mapping):
        result = dict(live)
        for key, value in applied.items():
            if key in live:
                sub = child_schema(schema, key, prefix)
                result[key] = _merge_applied(live.get(key), value, key, sub, (*prefix, key))
            else:
                result[key] = value
        return result
    if isinstance(live, list) and isinstance(applied, list):
        if is_set_list(name, applied, schema) and is_set_list(name, live, schema):
            return live + [v for v in applied if v not in live]
        keys = list_keys(name, applied, schema)
        if keys and list_keys(name, live, schema) == keys:
            merged = list(live)
            for item in applied:
                index = next(
                    (i for i, v in enumerate(merged) if all(v.get(k) == item[k] for k in keys)),
                    None,
                )
                if index is None:
                    merged.append(item)
                else:
                    merged[index] = _merge_applied(
                        merged[index], item, None, item_schema(schema), (*prefix, "[]")
                    )
            return merged
    return clone(applied)


def _without_nulls(value: Any) -> Any:
    if type(value) is dict or isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _conflicts(
    entries: list[ManagedEntry], me: tuple[str, str, str], new: FieldSet, applied: Any, live: Any
) -> list[tuple[ManagedEntry, Path]]:
    found = []
    for entry in entries:
        if entry.identity == me:
            continue
        for path in sorted(entry.fields & new):
            if path[-1] != "." and get_path(applied, path) != get_path(live, path):
                found.append((entry, path))
    return found


def _conflict_error(conflicts: list[tuple[ManagedEntry, Path]], kind: str, name: str) -> ApiError:
    lines = [f'conflict with "{e.manager}"' + _using(e) + f": {dotted(p)}" for e, p in conflicts]
    plural = "conflict" if len(lines) == 1 else "conflicts"
    message = f"Apply failed with {len(lines)} {plural}: " + "\n".join(lines)
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{e.manager}"' + _using(e),
            "field": dotted(p),
        }
        for e, p in conflicts
    ]
    return ApiError(409, message, reason="Conflict", name=name, kind=kind, causes=causes)


def _using(entry: ManagedEntry) -> str:
    return f" using {entry.api_version}" if entry.operation == "Update" else ""


def server_side_apply(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    subresource: str,
    has_status: bool,
    schema: Schema | None = None,
) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` over ``live`` (None: create)."""
    configuration = applied
    applied = _without_nulls(applied)
    base: dict[str, Any] = clone(dict(live)) if live else {"metadata": {}}
    entries = _entries(live)
    me = (manager, "Apply", subresource)
    new = _scoped(field_paths(applied, schema=schema), subresource, has_status)
    conflicts = _conflicts(entries, me, new, applied, base)
    if conflicts and not force:
        upgradable = _upgradable_from_client_side(base, applied, manager, schema)
        remaining = [(e, p) for e, p in conflicts if p not in upgradable]
        if remaining:
            name = str(applied.get("metadata", {}).get("name", ""))
            raise _conflict_error(remaining, str(applied.get("kind", "")), name)
    for entry, path in conflicts:
        entry.fields.discard(path)
    mine = next((e for e in entries if e.identity == me), None)
    previous = mine.fields if mine else set()
    merged: dict[str, Any] = _merge_applied(base, applied, schema=schema)
    others = [e for e in entries if e.identity != me]
    _remove_dropped(merged, previous - new, new, others)
    if mine is None:
        mine = ManagedEntry(manager, "Apply", str(applied.get("apiVersion", "")), subresource)
        entries.append(mine)
    mine.fields, mine.time = set(new), now()
    mine.api_version = str(applied.get("apiVersion", mine.api_version))
    for entry in others:
        entry.fields = {p for p in entry.fields if _exists(merged, p)}
    _store_entries(merged, entries)
    annotations = merged["metadata"].get("annotations")
    if (
        manager == KUBECTL_MANAGER
        and isinstance(annotations, dict)
        and annotations.get(LAST_APPLIED)
    ):
        annotations[LAST_APPLIED] = _encode_last_applied(configuration)
    return merged


def _upgradable_from_client_side(
    live: Mapping[str, Any], applied: Mapping[str, Any], manager: str, schema: Schema | None
) -> FieldSet:
    """Fields ``kubectl`` may take without a conflict: client-side applied, unchanged since.

    Those are the fields of the last-applied annotation (for the applied apiVersion)
    whose live value is still the annotated one; anything else conflicts as usual.
    """
    if manager != KUBECTL_MANAGER:
        return set()
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    try:
        last = json.loads(annotations.get(LAST_APPLIED) or "null")
    except ValueError:
        return set()
    if not isinstance(last, Mapping) or last.get("apiVersion") != applied.get("apiVersion"):
        return set()
    last = _without_nulls(last)
    return {
        p
        for p in field_paths(last, schema=schema)
        if p[-1] != "." and get_path(live, p) == get_path(last, p)
    }


def _encode_last_applied(configuration: Mapping[str, Any]) -> str:
    """The applied configuration minus the annotation, as Go's JSON encoder writes it."""
    obj = clone(dict(configuration))
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text + "\n"


def _remove_dropped(
    obj: dict[str, Any], dropped: FieldSet, new: FieldSet, others: list[ManagedEntry]
) -> None:
    """Delete fields no longer applied that no other manager owns (leaves, then items).

    A dropped leaf that is a prefix of an owned path is kept: a manager that applied
    ``data: {}`` (the leaf ``f:data``) and now applies ``data: {k: v}`` still wants
    ``data``, it only owns it through ``f:data.f:k`` now.
    """
    owned = set(new).union(*(e.fields for e in others)) if others else set(new)
    leaves = [
        p
        for p in dropped
        if p[-1] != "." and not _is_key_field(p) and not any(o[: len(p)] == p for o in owned)
    ]
    items = [p for p in dropped if p[-1] == "." and p not in owned]
    for path in sorted(leaves, key=len, reverse=True):
        remove_path(obj, path)
        prune_empty(obj, path, owned)
    for path in sorted(items, key=len, reverse=True):
        item = path[:-1]
        if not any(p[: len(item)] == item for p in owned):
            remove_path(obj, path)
            prune_empty(obj, item, owned)


def _is_key_field(path: Path) -> bool:
    """A list item's key (``name`` of a container) goes with the item, never alone."""
    if len(path) < 2 or not path[-2].startswith("k:"):
        return False
    return path[-1][2:] in json.loads(path[-2][2:])
