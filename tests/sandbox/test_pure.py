"""The sandbox's pure pieces: selectors, patches and FieldsV1 paths, without HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.copying import IdentityMemo
from reconciler.sandbox.fieldsets import (
    add_to_fields_v1,
    changed_paths,
    dotted,
    drop_prefixes,
    field_paths,
    from_fields_v1,
    get_path,
    item_element,
    prune_fields_v1,
    to_fields_v1,
)
from reconciler.sandbox.patch import apply_patch, json_patch, merge_patch, strategic_merge
from reconciler.sandbox.selectors import parse_label_selector, selector_to_string


@pytest.mark.parametrize("text", ["a in b", "a notin", "!a=b", "=x", "a in (b"])
def test_bad_label_selectors(text: str) -> None:
    with pytest.raises(ApiError) as e:
        parse_label_selector(text)
    assert e.value.code == 400


def test_selector_to_string_round_trips_through_parser() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "x", "operator": "Exists"},
            {"key": "y", "operator": "DoesNotExist"},
        ],
    }
    text = selector_to_string(selector)
    assert text == "app=web,tier in (a,b),env notin (dev),x,!y"
    match = parse_label_selector(text)
    assert match({"metadata": {"labels": {"app": "web", "tier": "b", "env": "prod", "x": ""}}})
    assert not match({"metadata": {"labels": {"app": "web", "tier": "c", "x": ""}}})


def test_merge_patch_rfc7386_example() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    patch = {"a": "z", "c": {"f": None}}
    assert merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1]}, {"a": [2]}) == {"a": [2]}


def test_json_patch_move_and_append() -> None:
    doc = {"a": {"b": 1}, "l": [1]}
    ops = [{"op": "move", "from": "/a/b", "path": "/c"}, {"op": "add", "path": "/l/-", "value": 2}]
    assert json_patch(doc, ops) == {"a": {}, "c": 1, "l": [1, 2]}
    assert doc == {"a": {"b": 1}, "l": [1]}  # the input is not modified
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "add", "path": "/l/9", "value": 0}])
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "add", "path": "relative", "value": 0}])


def test_strategic_merge_directives() -> None:
    live = {
        "metadata": {"finalizers": ["a"]},
        "spec": {"env": [{"name": "A", "value": "1"}], "args": ["x", "y"], "map": {"k": 1}},
    }
    patch: dict[str, Any] = {
        "metadata": {"finalizers": ["b", "a"]},
        "spec": {
            "env": [{"name": "B", "value": "2"}],
            "args": ["z"],
            "map": {"$patch": "replace", "n": 2},
            "$deleteFromPrimitiveList/tags": ["t"],
        },
    }
    result = strategic_merge(live, patch)
    assert result["metadata"]["finalizers"] == ["a", "b"]
    assert result["spec"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert result["spec"]["args"] == ["z"] and result["spec"]["map"] == {"n": 2}
    replaced = strategic_merge(live, {"spec": {"env": [{"$patch": "replace"}, {"name": "C"}]}})
    assert replaced["spec"]["env"] == [{"name": "C"}]
    with pytest.raises(ApiError):
        apply_patch("application/strategic-merge-patch+json", live, [1])
    with pytest.raises(ApiError):
        apply_patch("application/merge-patch+json", live, [1])


def test_field_paths_for_keyed_lists_and_sets() -> None:
    obj = {
        "metadata": {"finalizers": ["x"]},
        "spec": {
            "containers": [{"name": "a", "ports": [{"containerPort": 80}]}],
            "args": ["p"],
            "empty": {},
        },
    }
    paths = field_paths(obj)
    assert ("f:metadata", "f:finalizers", 'v:"x"') in paths
    assert ("f:spec", "f:containers", 'k:{"name":"a"}', ".") in paths
    assert (
        "f:spec",
        "f:containers",
        'k:{"name":"a"}',
        "f:ports",
        'k:{"containerPort":80}',
        "f:containerPort",
    ) in paths
    assert ("f:spec", "f:args") in paths and ("f:spec", "f:empty") in paths
    path = ("f:spec", "f:containers", 'k:{"name":"a"}', "f:image")
    assert dotted(path) == '.spec.containers[name="a"].image'


keys = st.text(alphabet="abcxyz", min_size=1, max_size=3)
trees = st.recursive(
    st.dictionaries(keys, st.integers(), max_size=3),
    lambda children: st.dictionaries(keys, children, min_size=1, max_size=3),
    max_leaves=12,
)


@given(trees)
def test_fields_v1_round_trip(tree: dict[str, Any]) -> None:
    paths = field_paths(tree)
    assert from_fields_v1(to_fields_v1(paths)) == paths


# JSON-like objects with the lists managedFields keys by merge key (containers by
# name) and as sets (finalizers), for the FieldsV1 pruning properties below
_leaves = st.one_of(st.integers(0, 3), st.sampled_from(["a", "b"]))
_objects = st.recursive(
    st.dictionaries(keys, _leaves, max_size=3),
    lambda children: st.one_of(
        st.dictionaries(keys, children, min_size=1, max_size=3),
        st.fixed_dictionaries(
            {
                "containers": st.lists(
                    st.fixed_dictionaries(
                        {"name": st.sampled_from(["a", "b", "c"])}, optional={"x": children}
                    ),
                    max_size=3,
                ),
                "finalizers": st.lists(st.sampled_from(["f", "g"]), max_size=2),
            }
        ),
    ),
    max_leaves=15,
)


def _rewritten(value: Any, data: st.DataObject) -> Any:
    """``value`` after a write: each map kept as the very same object, or a new map
    whose values are themselves kept or rewritten, with keys dropped and added."""
    if not isinstance(value, dict) or data.draw(st.booleans()):
        return value if data.draw(st.booleans()) else data.draw(_objects)
    out = {k: _rewritten(v, data) for k, v in value.items() if data.draw(st.integers(0, 4))}
    out.update(data.draw(st.dictionaries(keys, _objects, max_size=1)))
    return out


@given(_objects, st.data())
def test_pruning_skips_what_a_write_shares_with_the_object_it_replaces(
    old: dict[str, Any], data: st.DataObject
) -> None:
    """A tree known to be exactly the pruning of ``old`` is pruned against ``new`` with
    the subtrees ``new`` shares with ``old`` taken as they are: the same result as a
    full walk. (The sandbox's shortcut for status writes; managedFields semantics per
    https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management.)"""
    extra = data.draw(
        st.sets(
            st.tuples(
                st.sampled_from(["f:a", "f:x", "f:containers"]),
                st.sampled_from(["f:b", 'k:{"name":"a"}', "."]),
            ),
            max_size=3,
        )
    )
    owned = {p for p in field_paths(old) if data.draw(st.booleans())} | extra
    tree = prune_fields_v1(to_fields_v1(owned), old, set())  # exact for ``old``
    new = _rewritten(old, data)
    drop = changed_paths(old, True, new)
    copy = json.loads(json.dumps(tree))
    assert prune_fields_v1(tree, new, drop, old=old) == prune_fields_v1(tree, new, drop)
    assert tree == copy  # the stored tree is never changed


@given(trees, st.sets(st.tuples(keys.map("f:".__add__), keys.map("f:".__add__)), max_size=4))
def test_adding_to_fields_v1_leaves_the_tree_it_was_given_alone(
    tree: dict[str, Any], added: set[tuple[str, str]]
) -> None:
    """The result is the union as ``to_fields_v1`` writes it, and the given tree (which
    may share maps with a stored object's managedFields) is unchanged."""
    tree = to_fields_v1(field_paths(tree))
    copy = json.loads(json.dumps(tree))
    result = add_to_fields_v1(tree, added)
    assert result == to_fields_v1(from_fields_v1(copy) | added)
    assert list(result) == sorted(result)
    assert tree == copy


@given(_objects, st.data())
def test_changed_paths_are_the_paths_whose_value_a_write_changed(
    old: dict[str, Any], data: st.DataObject
) -> None:
    """What an Update's manager comes to own: each leaf path of the new object whose
    value differs from the old one's (the walk skips equal subtrees and decides
    leaves in place)."""
    new = _rewritten(old, data)
    expected = {
        p for p in field_paths(new) if p[-1] != "." and get_path(old, p) != get_path(new, p)
    }
    assert changed_paths(old, True, new) == expected


def test_identity_memo_answers_only_for_the_very_object_and_stays_bounded() -> None:
    """Values remembered for stored objects: an equal copy is a different object (it
    may be changed), and the oldest entries go once the bound is reached."""
    memo: IdentityMemo[str] = IdentityMemo(limit=2)
    first, second, third = {"a": 1}, {"a": 1}, {"b": 2}
    memo.put(first, "one")
    assert memo.get(first) == "one"
    assert memo.get(second) is None  # equal, but not the same object
    memo.put(second, "two")
    memo.put(third, "three")
    assert memo.get(first) is None  # the oldest, forgotten at the bound
    assert (memo.get(second), memo.get(third)) == ("two", "three")
    assert memo.pop(third) == "three"
    assert memo.get(third) is None


_KEY_VALUES = st.one_of(
    st.text(max_size=8), st.integers(), st.booleans(), st.floats(allow_nan=False), st.none()
)


@given(value=_KEY_VALUES, other=_KEY_VALUES)
def test_an_item_element_is_its_keys_json_whatever_was_asked_before(value: Any, other: Any) -> None:
    """``k:`` elements (cached for one string or integer key) are always the key's JSON:
    ``true`` never answers for ``1`` nor ``1.0`` for ``1``, however the cache was filled."""
    for v in (other, value):
        assert item_element({"port": v}, "port") == "k:" + json.dumps(
            {"port": v}, separators=(",", ":")
        )
    both = {"port": value, "protocol": other}
    assert item_element(both, ("protocol", "port")) == "k:" + json.dumps(
        {"port": value, "protocol": other}, separators=(",", ":")
    )


_ELEMENTS = st.sampled_from(["f:status", "f:conditions", 'k:{"type":"Ready"}', "f:a", "."])


@given(paths=st.sets(st.lists(_ELEMENTS, max_size=5).map(tuple), max_size=12))
def test_drop_prefixes_are_every_proper_prefix(paths: set[tuple[str, ...]]) -> None:
    """Every proper prefix of every path, ``()`` included (when there is a path with
    an element), however the paths share their prefixes."""
    assert drop_prefixes(paths) == {p[:i] for p in paths for i in range(len(p))}
