"""CRUD and metadata contract.

Follows https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions
(a global counter, stale writes get 409), .../api-concepts/#dry-run, and
https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/
(uid, creationTimestamp, generation bumped on spec changes only).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.namespaces import ROOT_CA
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data}


def test_create_sets_server_metadata(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", cm("a", x="1"))
    meta = created.metadata
    assert meta.uid and meta.creation_timestamp and meta.namespace == "default"
    assert int(meta.resource_version) > 0
    again = core.read_namespaced_config_map("a", "default")
    assert again.metadata.uid == meta.uid and again.data == {"x": "1"}


def test_resource_version_is_a_global_counter(core: client.CoreV1Api) -> None:
    a = core.create_namespaced_config_map("default", cm("a"))
    b = core.create_namespaced_config_map("kube-system", cm("b"))
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    listed = core.list_config_map_for_all_namespaces()
    assert int(listed.metadata.resource_version) >= int(b.metadata.resource_version)


def test_list_kind_and_api_version(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a"))
    status, body = http(sandbox, "GET", "/api/v1/namespaces/default/configmaps")
    assert status == 200 and body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"]
    # every namespace also holds the cluster's root CA (standard objects, as on a cluster)
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", ROOT_CA]


def test_already_exists_and_not_found(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a"))
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_config_map("default", cm("a"))
    assert exists.value.status == 409 and '"reason":"AlreadyExists"' in exists.value.body.replace(
        " ", ""
    )
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("nope", "default")
    assert missing.value.status == 404


def test_create_in_missing_namespace_is_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("ghost", cm("a"))
    assert e.value.status == 404 and "namespaces" in e.value.body


@pytest.mark.parametrize("name", ["Bad_Name", "-x", "a" * 254, ""])
def test_invalid_names_are_rejected(sandbox: SandboxHandle, name: str) -> None:
    status, body = http(
        sandbox, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}}
    )
    assert status == 422 and body["reason"] == "Invalid"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"kind": "Secret", "metadata": {"name": "a"}}, 400),
        ({"apiVersion": "v2", "metadata": {"name": "a"}}, 400),
        ({"metadata": {"name": "a", "namespace": "other"}}, 400),
        ({"metadata": "nope"}, 400),
        ([1, 2], 400),
        # a value its Go type cannot hold fails decoding: 400, as api-concepts says of
        # bodies the server cannot decode
        ({"metadata": {"name": "a", "labels": ["x"]}}, 400),
        ({"metadata": {"name": "a", "annotations": {"a": 1}}}, 400),
        ({"metadata": {"name": "a", "finalizers": "x"}}, 400),
        ({"metadata": {"name": "a", "ownerReferences": [{"name": "x"}]}}, 422),
        # ConfigMap.data is map[string]string: https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/config-map-v1/
        ({"metadata": {"name": "a"}, "data": {"replicas": 3}}, 400),
        ({"metadata": {"name": "a"}, "data": {"debug": True}}, 400),
        ("{not json", 400),
    ],
)
def test_bad_bodies_are_rejected(sandbox: SandboxHandle, body: object, code: int) -> None:
    status, reply = http(sandbox, "POST", "/api/v1/namespaces/default/configmaps", body)
    assert status == code and reply["kind"] == "Status" and reply["status"] == "Failure"


def test_replace_with_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", cm("a", x="1"))
    created.data = {"x": "2"}
    core.replace_namespaced_config_map("a", "default", created)
    created.data = {"x": "3"}
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("a", "default", created)
    assert e.value.status == 409 and "the object has been modified" in e.value.body
    assert core.read_namespaced_config_map("a", "default").data == {"x": "2"}


def test_replace_without_resource_version_is_unconditional(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a", x="1"))
    replaced = core.replace_namespaced_config_map("a", "default", cm("a", x="9"))
    assert replaced.data == {"x": "9"}


def test_replace_name_mismatch_and_missing(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a"))
    status, _ = http(sandbox, "PUT", "/api/v1/namespaces/default/configmaps/a", cm("b"))
    assert status == 400
    status, _ = http(sandbox, "PUT", "/api/v1/namespaces/default/configmaps/zz", cm("zz"))
    assert status == 404


def test_noop_update_keeps_resource_version(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", cm("a", x="1"))
    same = core.replace_namespaced_config_map("a", "default", created)
    assert same.metadata.resource_version == created.metadata.resource_version


def test_generation_tracks_spec_only(apps: client.AppsV1Api) -> None:
    created = apps.create_namespaced_deployment("default", deployment("web"))
    assert created.metadata.generation == 1
    apps.patch_namespaced_deployment("web", "default", {"metadata": {"labels": {"x": "y"}}})
    assert apps.read_namespaced_deployment("web", "default").metadata.generation == 1
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 5}})
    assert apps.read_namespaced_deployment("web", "default").metadata.generation == 2


def test_dry_run_stores_nothing(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run on every write."""
    result = core.create_namespaced_config_map("default", cm("a"), dry_run="All")
    assert result.metadata.name == "a"
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("a", "default")
    core.create_namespaced_config_map("default", cm("a", x="1"))
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "2"}}, dry_run="All")
    core.replace_namespaced_config_map("a", "default", cm("a", x="3"), dry_run="All")
    status, _ = http(
        sandbox,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/a?fieldManager=t&dryRun=All&force=true",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "4"}},
        "application/apply-patch+yaml",
    )
    assert status == 200
    core.delete_namespaced_config_map("a", "default", dry_run="All")
    assert core.read_namespaced_config_map("a", "default").data == {"x": "1"}


CMS = "/api/v1/namespaces/default/configmaps"
APPLY = "application/apply-patch+yaml"


@pytest.mark.parametrize(
    ("method", "path", "content_type", "options"),
    [
        ("POST", CMS, "application/json", "CreateOptions"),
        ("PUT", f"{CMS}/a", "application/json", "UpdateOptions"),
        ("PATCH", f"{CMS}/a", "application/merge-patch+json", "PatchOptions"),
        ("PATCH", f"{CMS}/a?fieldManager=t", APPLY, "PatchOptions"),
    ],
)
def test_a_dry_run_other_than_all_is_refused_and_writes_nothing(
    sandbox: SandboxHandle,
    core: client.CoreV1Api,
    method: str,
    path: str,
    content_type: str,
    options: str,
) -> None:
    """``All`` is the only value of ``dryRun``
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run): any other is
    a 422 of the write's options, never a write (it used to create and persist)."""
    if method != "POST":
        core.create_namespaced_config_map("default", cm("a", x="1"))
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "2"}}
    joined = "&" if "?" in path else "?"
    status, answer = http(sandbox, method, f"{path}{joined}dryRun=Bogus", body, content_type)
    assert status == 422, answer
    assert answer["reason"] == "Invalid" and answer["details"]["kind"] == options
    assert answer["message"] == (
        f'{options}.meta.k8s.io "" is invalid: '
        'dryRun: Unsupported value: ["Bogus"]: supported values: "All"'
    )
    assert answer["details"]["causes"][0]["field"] == "dryRun"
    listed = core.list_namespaced_config_map("default").items
    # kube-root-ca.crt is the cluster's own, in every namespace
    assert [(c.metadata.name, c.data) for c in listed if c.metadata.name != ROOT_CA] == (
        [] if method == "POST" else [("a", {"x": "1"})]
    )


def test_field_selectors_a_kind_does_not_support_are_bad_requests(
    sandbox: SandboxHandle,
) -> None:
    """https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/
    #supported-fields: every kind takes ``metadata.name`` and ``metadata.namespace``,
    a few kinds more (a Pod's ``status.phase``, an Event's ``involvedObject.name``);
    any other field is a 400 with the server's message, for list, watch and
    deletecollection alike."""
    for query in ("metadata.name=a", "metadata.namespace=default"):
        assert http(sandbox, "GET", f"{CMS}?fieldSelector={query}")[0] == 200
    assert http(sandbox, "GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning")[0] == 200
    events = "/api/v1/events?fieldSelector=involvedObject.name%3Dweb,type%3DWarning"
    assert http(sandbox, "GET", events)[0] == 200
    for method, query in (("GET", ""), ("GET", "&watch=true"), ("DELETE", "")):
        status, body = http(sandbox, method, f"{CMS}?fieldSelector=data.x%3D1{query}")
        assert status == 400 and body["reason"] == "BadRequest", body
        assert body["message"] == (
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    status, body = http(sandbox, "GET", "/api/v1/secrets?fieldSelector=status.phase%3DActive")
    assert status == 400 and '"type"' in body["message"]  # what Secrets do support


def test_an_error_body_ends_with_a_newline_as_go_encodes_it(sandbox: SandboxHandle) -> None:
    """The API server writes a Status with Go's ``json.Encoder``, which ends every value
    with a newline (https://pkg.go.dev/encoding/json#Encoder.Encode;
    https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/)."""
    for path in (f"{CMS}/missing", "/api/v1/nothing-here", f"{CMS}?labelSelector=a%20in%20b"):
        request = urllib.request.Request(sandbox.url + path)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        raw = refused.value.read()
        assert raw.endswith(b"}\n") and raw.count(b"\n") == 1, raw
        assert json.loads(raw)["kind"] == "Status"


def test_generate_name(core: client.CoreV1Api) -> None:
    made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "job-"}})
    assert made.metadata.name.startswith("job-") and len(made.metadata.name) > 4


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d", ROOT_CA]),
        ("tier in (front, back)", ["a", "c"]),
        ("tier notin (front)", ["b", "c", "d", ROOT_CA]),
        ("tier", ["a", "c"]),
        ("!tier", ["b", "d", ROOT_CA]),
        ("app=web,tier=front", ["a"]),
    ],
)
def test_label_selectors(core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    """https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"""
    core.create_namespaced_config_map("default", cm("a", {"app": "web", "tier": "front"}))
    core.create_namespaced_config_map("default", cm("b", {"app": "web"}))
    core.create_namespaced_config_map("default", cm("c", {"app": "db", "tier": "back"}))
    core.create_namespaced_config_map("default", cm("d"))
    listed = core.list_namespaced_config_map("default", label_selector=selector)
    assert [i.metadata.name for i in listed.items] == expected


def test_field_selectors(core: client.CoreV1Api) -> None:
    """https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/"""
    core.create_namespaced_config_map("default", cm("a"))
    core.create_namespaced_config_map("kube-system", cm("a"))
    core.create_namespaced_config_map("default", cm("b"))
    by_name = core.list_config_map_for_all_namespaces(field_selector="metadata.name=a")
    assert sorted(i.metadata.namespace for i in by_name.items) == ["default", "kube-system"]
    both = core.list_config_map_for_all_namespaces(
        field_selector="metadata.namespace=default,metadata.name!=a"
    )
    assert [i.metadata.name for i in both.items] == ["b", ROOT_CA]


@pytest.mark.parametrize("query", ["labelSelector=a%20in%20b", "fieldSelector=metadata.name"])
def test_malformed_selectors_are_bad_requests(sandbox: SandboxHandle, query: str) -> None:
    status, body = http(sandbox, "GET", f"/api/v1/configmaps?{query}")
    assert status == 400 and body["reason"] == "BadRequest"


def test_delete_collection(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a", {"drop": "yes"}))
    core.create_namespaced_config_map("default", cm("b"))
    core.delete_collection_namespaced_config_map("default", label_selector="drop=yes")
    listed = core.list_namespaced_config_map("default").items
    assert [i.metadata.name for i in listed] == ["b", ROOT_CA]


def test_cluster_scoped_and_unknown_paths(sandbox: SandboxHandle) -> None:
    assert http(sandbox, "GET", "/api/v1/namespaces/default/namespaces")[0] == 404
    assert http(sandbox, "GET", "/api/v1/widgets")[0] == 404
    assert http(sandbox, "GET", "/api/v1/configmaps/a")[0] == 404
    assert http(sandbox, "GET", "/api/v1/namespaces/default/configmaps/a/b/c")[0] == 404
    assert http(sandbox, "POST", "/api/v1/namespaces/default/configmaps/a")[0] == 405
    assert http(sandbox, "GET", "/api/v1/namespaces/default/configmaps/a/status")[0] == 404


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/apis/apps/v1/namespaces/default/deployments", {"spec": [1]}, "Deployment.spec"),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            {"spec": {"replicas": "2"}},
            "DeploymentSpec.spec.replicas",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            {"spec": {"template": "x"}},
            "DeploymentSpec.spec.template",
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            {"spec": {"updateStrategy": {"rollingUpdate": {"partition": "x"}}}},
            "RollingUpdateStatefulSetStrategy.spec.updateStrategy.rollingUpdate.partition",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            {"spec": {"template": {"metadata": {"annotations": {"a": 1}}}}},
            "ObjectMeta.spec.template.metadata.annotations",
        ),
        ("/api/v1/namespaces/default/configmaps", {"data": "x"}, "ConfigMap.data"),
    ],
)
def test_malformed_fields_are_bad_requests(
    sandbox: SandboxHandle, path: str, body: dict, field: str
) -> None:
    """A body the kind's type cannot decode is a 400 naming the Go field, before any
    validation: https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation"""
    status, reply = http(sandbox, "POST", path, {"metadata": {"name": "x"}, **body})
    assert status == 400 and reply["reason"] == "BadRequest"
    assert f"into Go struct field {field} of type " in reply["message"]


def test_a_container_without_a_name_is_invalid(sandbox: SandboxHandle) -> None:
    path = "/apis/apps/v1/namespaces/default/statefulsets"
    body = {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}
    status, reply = http(sandbox, "POST", path, {"metadata": {"name": "x"}, **body})
    assert (
        status == 422 and reply["details"]["causes"][0]["field"] == "spec.template.spec.containers"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "template",
                    "replicas",
                    "containers",
                    "name",
                    "metadata",
                    "labels",
                    "status",
                    "selector",
                    "matchLabels",
                    "image",
                    "ports",
                    "port",
                    "parallelism",
                    "podManagementPolicy",
                    "x",
                ]
            ),
            children,
            max_size=3,
        )
    ),
    max_leaves=10,
)


FUZZED_KINDS = [
    ("apps/v1", "Deployment", "/apis/apps/v1/namespaces/default/deployments"),
    ("apps/v1", "ReplicaSet", "/apis/apps/v1/namespaces/default/replicasets"),
    ("apps/v1", "StatefulSet", "/apis/apps/v1/namespaces/default/statefulsets"),
    ("apps/v1", "DaemonSet", "/apis/apps/v1/namespaces/default/daemonsets"),
    ("batch/v1", "Job", "/apis/batch/v1/namespaces/default/jobs"),
    ("v1", "Service", "/api/v1/namespaces/default/services"),
    ("v1", "Pod", "/api/v1/namespaces/default/pods"),
]


@settings(
    max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(
    spec=json_values,
    method=st.sampled_from(["POST", "APPLY", "MERGE"]),
    kind=st.sampled_from(FUZZED_KINDS),
)
def test_arbitrary_bodies_never_crash_the_server(
    sandbox: SandboxHandle, spec: object, method: str, kind: tuple[str, str, str]
) -> None:
    """Any body is answered, and in time: one example is one request, and a body that made
    a controller create every pod of ``replicas: 2**40`` in one step once kept the server
    from answering the next (``http`` gives up after 10 s)."""
    api_version, kind_name, base = kind
    body = {"apiVersion": api_version, "kind": kind_name, "metadata": {"name": "f"}, "spec": spec}
    if method == "POST":
        status, answer = http(sandbox, "POST", base, body)
    elif method == "APPLY":
        status, answer = http(
            sandbox,
            "PATCH",
            base + "/f?fieldManager=h&force=true",
            body,
            "application/apply-patch+yaml",
        )
    else:
        status, answer = http(
            sandbox, "PATCH", base + "/f", {"spec": spec}, "application/merge-patch+json"
        )
    # The one 500 a real server gives on purpose: server-side apply's typed conversion
    # refusing an undeclared field (kubernetes/kubernetes#122480), a Status without reason.
    if status >= 500:
        assert method == "APPLY" and "reason" not in answer, answer
        assert answer["message"].startswith("failed to create typed patch object"), answer


def test_error_status_is_compact_json_in_server_field_order(sandbox: SandboxHandle) -> None:
    """A failure body is a ``Status`` as the API server encodes it: compact JSON with the
    fields in metav1.Status order (kind, apiVersion, metadata, status, message, reason,
    details, code), and the newline Go's ``json.Encoder`` ends it with.

    https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/
    """
    url = sandbox.url + "/api/v1/namespaces/default/configmaps/missing"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=10)
    raw = caught.value.read().decode()
    assert caught.value.code == 404
    assert raw == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"configmaps \\"missing\\" not found","reason":"NotFound",'
        '"details":{"name":"missing","kind":"configmaps"},"code":404}\n'
    )
