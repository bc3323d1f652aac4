"""The sandbox's shortcuts give exactly what the work they skip would give.

Each shortcut skips work whose result it can tell in advance; each test here draws
inputs at random (hypothesis) and checks the skipped work would have produced the
same thing.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.sandbox import fieldschema
from reconciler.sandbox.apply import _changed_paths, _item_markers, _scoped, track_update
from reconciler.sandbox.endpoints import (
    endpoint_view,
    serving_groups,
    slice_endpoints,
    subsets,
)
from reconciler.sandbox.fieldsets import add_to_fields_v1
from tests.sandbox.test_pure import _objects


def _maybe(key: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``{key: value}`` or ``{}``."""
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


# mostly pods the Service selects (app: a), so that most draws are in its endpoints
_LABELS = st.sampled_from([{"app": "a"}, {"app": "a", "tier": "b"}, {"app": "b"}, {}])
_CONTAINERS = st.lists(
    st.fixed_dictionaries(
        {"name": st.just("c"), "image": st.sampled_from(["x:1", "x:2"])},
        optional={
            "ports": st.lists(
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["http", "admin"])},
                    optional={
                        "containerPort": st.sampled_from([8080, 9090]),
                        "protocol": st.sampled_from(["TCP", "UDP"]),
                    },
                ),
                max_size=2,
            )
        },
    ),
    min_size=1,
    max_size=2,
)
_CONDITIONS = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["Ready", "Ready", "ContainersReady"]),
            "status": st.sampled_from(["True", "False"]),
        }
    ),
    max_size=3,
)


# Every strategy is built once, here: hypothesis validates a strategy the first time it
# draws from it, so one built inside ``_pods`` was validated again at every example (two
# thirds of these tests' CPU); the draws are the same.
_UIDS = st.sampled_from(["u1", "u2"])
_VERSIONS = st.integers(1, 3).map(str)
_ANNOTATIONS = _maybe("annotations", st.dictionaries(st.just("note"), st.text(max_size=2)))
_DELETION = _maybe("deletionTimestamp", st.just("2026-01-01T00:00:00Z"))
_NODE = _maybe("nodeName", st.sampled_from(["n1", "n2", ""]))
_PHASES = st.sampled_from(["Running", "Running", "Pending", "Failed"])
_IPS = st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.2", ""])
_RESTARTS = _maybe("restartCount", st.integers(0, 2))


@st.composite
def _pods(draw: st.DrawFn) -> dict[str, Any]:
    """A pod as the store may hold it, with fields the endpoints read and fields they don't."""
    meta: dict[str, Any] = {"name": "p", "namespace": "default"}
    meta["uid"] = draw(_UIDS)
    meta["resourceVersion"] = draw(_VERSIONS)
    meta["labels"] = draw(_LABELS)
    meta |= draw(_ANNOTATIONS)
    meta |= draw(_DELETION)
    spec: dict[str, Any] = {"containers": draw(_CONTAINERS)}
    spec |= draw(_NODE)
    status: dict[str, Any] = {}
    status["phase"] = draw(_PHASES)
    status["podIP"] = draw(_IPS)
    status["conditions"] = draw(_CONDITIONS)
    status |= draw(_RESTARTS)
    return {"metadata": meta, "spec": spec, "status": status}


_POD = _pods()
_OTHER = {
    "metadata": {"name": "q", "namespace": "default", "uid": "u9", "labels": {"app": "a"}},
    "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 80}]}]},
    "status": {"phase": "Running", "podIP": "10.0.0.3", "conditions": []},
}


def _service(publish: bool) -> dict[str, Any]:
    ports = [{"port": 80, "targetPort": "http"}, {"name": "raw", "port": 81, "targetPort": 8081}]
    spec = {"selector": {"app": "a"}, "ports": ports, "publishNotReadyAddresses": publish}
    return {"metadata": {"name": "web", "namespace": "default"}, "spec": spec}


def _endpoints_of(service: dict[str, Any], pods: list[dict[str, Any]], publish: bool) -> Any:
    """What the controller writes for ``service``: the Endpoints' subsets and each
    slice's endpoints by the ports it serves."""
    groups = serving_groups(service, pods)
    slices = {ports: slice_endpoints(members, publish) for ports, members in groups.items()}
    return subsets(groups, publish), slices


# where a pod's fields live: (section, field)
_FIELDS = [
    ("metadata", "uid"),
    ("metadata", "resourceVersion"),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "deletionTimestamp"),
    ("spec", "containers"),
    ("spec", "nodeName"),
    ("status", "phase"),
    ("status", "podIP"),
    ("status", "conditions"),
    ("status", "restartCount"),
]


_ANY_FIELD = st.sampled_from(_FIELDS)


@st.composite
def _writes(draw: st.DrawFn, field: tuple[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod and the pod a write made of it: ``field``, and maybe another, drawn again."""
    old, other = draw(_POD), draw(_POD)
    new = {section: dict(old[section]) for section in old}
    for section, name in {field, draw(_ANY_FIELD)}:
        new[section].pop(name, None)
        if name in other[section]:
            new[section][name] = other[section][name]
    return old, new


_WRITES = {field: _writes(field) for field in _FIELDS}


@pytest.mark.parametrize("field", _FIELDS, ids=".".join)
@settings(max_examples=100)
@given(data=st.data(), publish=st.booleans())
def test_a_pod_write_that_keeps_its_endpoint_view_changes_no_services_endpoints(
    field: tuple[str, str], data: st.DataObject, publish: bool
) -> None:
    """``EndpointsController.affected`` skips a pod write whose ``endpoint_view`` did not
    change: a sync after it would write the very Endpoints and slices it holds."""
    old, new = data.draw(_WRITES[field])
    service = _service(publish)
    if endpoint_view(old) == endpoint_view(new):
        assert _endpoints_of(service, [old, _OTHER], publish) == _endpoints_of(
            service, [new, _OTHER], publish
        )


@given(_POD, st.booleans())
def test_a_pod_without_a_view_is_in_no_services_endpoints(
    pod: dict[str, Any], publish: bool
) -> None:
    """A pod created or deleted while it has no view (no IP yet, or finished) needs no sync."""
    service = _service(publish)
    if endpoint_view(pod) is None:
        assert _endpoints_of(service, [pod], publish) == ([], {})


def test_the_model_snapshot_is_what_the_installed_client_declares() -> None:
    """``builtin_models.json`` holds every model the built-in kinds reach, each field as
    the client's class types it: the schemas built from it are the client's own."""
    data = json.loads(fieldschema.SNAPSHOT.read_text())
    regenerate = (
        'take it again: python -c "from reconciler.sandbox.fieldschema import '
        'write_snapshot; write_snapshot()"'
    )
    assert data["kubernetes"] == importlib.metadata.version("kubernetes"), regenerate
    roots = fieldschema.snapshot_roots()
    assert data["models"] == fieldschema.snapshot_models(roots), regenerate
    for name, fields in data["models"].items():
        assert fields == fieldschema.client_fields(name)
        # every model a field names is in it too: building never reads the client
        assert {n for n in fieldschema.referenced(fields) if fieldschema.client_fields(n)} <= set(
            data["models"]
        )


def test_schemas_are_built_without_importing_the_client() -> None:
    """What the snapshot saves: a sandbox process decodes its first write without
    importing the client's models (a second of CPU), with the same schemas."""
    script = (
        "import sys\n"
        "from reconciler.sandbox import fieldschema as f\n"
        "tree = {n: repr(f.model_schema(n)) for n in f.snapshot_roots()}\n"
        "shapes = {n: sorted(s.fields) for n, s in f._STRUCTS.items()}\n"
        "print('kubernetes' in sys.modules, len(shapes))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    imported, count = done.stdout.split()
    assert imported == "False" and int(count) > 100
    for name in fieldschema.snapshot_roots():
        assert fieldschema.model_schema(name) is not None
    for name, struct in fieldschema._STRUCTS.items():
        fields = fieldschema.client_fields(name)
        assert fields is not None and list(struct.fields) == list(fields)


_meta = st.fixed_dictionaries(
    {"name": st.just("o"), "namespace": st.just("default"), "uid": st.just("u")},
    optional={
        "labels": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", ""])),
        "finalizers": st.lists(st.sampled_from(["f", "g"]), max_size=2),
        "ownerReferences": st.lists(
            st.fixed_dictionaries({"uid": st.sampled_from(["1", "2"]), "kind": st.just("K")}),
            max_size=2,
        ),
        "annotations": st.just({}),
        "generateName": st.sampled_from(["o-", None]),
    },
)
_created = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod"), "metadata": _meta},
    optional={"spec": _objects, "status": _objects, "data": _objects},
)


@settings(max_examples=300)
@given(obj=_created, has_status=st.booleans())
def test_a_creates_fields_are_what_the_general_path_records(
    obj: dict[str, Any], has_status: bool
) -> None:
    """``track_update`` of a create builds the creator's FieldsV1 in one walk
    (``created_fields``): byte for byte the tree of every leaf path the create set,
    scoped to the manager and with its list items marked."""
    changed = _scoped(_changed_paths(None, obj, "", has_status, None), "", has_status)
    expected = add_to_fields_v1({}, changed | _item_markers(obj, changed))
    new = copy.deepcopy(obj)
    track_update(None, new, manager="m", subresource="", has_status=has_status)
    entries = new["metadata"].get("managedFields")
    if not expected:
        assert entries is None
        return
    (entry,) = entries
    assert json.dumps(entry["fieldsV1"]) == json.dumps(expected)
    assert (entry["manager"], entry["operation"]) == ("m", "Update")
