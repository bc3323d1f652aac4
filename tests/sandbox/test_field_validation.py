"""Field validation: unknown and duplicate fields on create, update, patch and apply.

https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
Messages follow the real server's integration test
(kubernetes/kubernetes test/integration/apiserver/field_validation_test.go).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, eventually, http

DOCS = "https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = "application/apply-patch+yaml"

# A Deployment with unknown fields (metadata, spec, a container) and repeated ones.
INVALID_JSON = """{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "web", "unknownMeta": "x"},
  "spec": {
    "replicass": 3,
    "paused": true,
    "paused": false,
    "selector": {"matchLabels": {"app": "web"}},
    "template": {
      "metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{
        "name": "app", "image": "nginx", "unknownNested": 1,
        "imagePullPolicy": "Always", "imagePullPolicy": "Never"
      }]}
    }
  }
}"""
INVALID_PROBLEMS = [
    'unknown field "metadata.unknownMeta"',
    'unknown field "spec.replicass"',
    'duplicate field "spec.paused"',
    'unknown field "spec.template.spec.containers[0].unknownNested"',
    'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
]

INVALID_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  replicas: 2
  replicass: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx
        image: nginx:1.25
"""


def send(
    sandbox: SandboxHandle,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any, list[str]]:
    """A raw request: (status, JSON body, raw ``Warning`` header values)."""
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    request = urllib.request.Request(sandbox.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, raw, headers = response.status, response.read(), response.headers
    except urllib.error.HTTPError as e:
        status, raw, headers = e.code, e.read(), e.headers
    return status, json.loads(raw), headers.get_all("Warning") or []


def texts(headers: list[str]) -> list[str]:
    """The texts of ``299 - "<text>"`` warning headers."""
    found = []
    for header in headers:
        match = re.fullmatch(r'299 - "((?:[^"\\]|\\.)*)"', header)
        assert match, header
        found.append(re.sub(r"\\(.)", r"\1", match.group(1)))
    return found


def stored(sandbox: SandboxHandle, name: str = "web") -> dict[str, Any]:
    status, obj = http(sandbox, "GET", f"{DEPLOYS}/{name}")
    assert status == 200, obj
    return dict(obj)


def assert_cleaned(obj: dict[str, Any]) -> None:
    """The stored Deployment has no unknown field and keeps the last of repeated ones."""
    assert "unknownMeta" not in obj["metadata"]
    assert "replicass" not in obj["spec"]
    assert obj["spec"]["paused"] is False
    container = obj["spec"]["template"]["spec"]["containers"][0]
    assert "unknownNested" not in container
    assert container["imagePullPolicy"] == "Never"


# --- create and update ----------------------------------------------------------------


def test_strict_create_fails_listing_every_problem_in_document_order(
    sandbox: SandboxHandle,
) -> None:
    """Strict: 400 BadRequest naming every unknown and duplicate field; nothing stored.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    status, answer, warnings = send(
        sandbox, "POST", DEPLOYS + "?fieldValidation=Strict", INVALID_JSON
    )
    assert (status, answer["reason"], answer["code"]) == (400, "BadRequest", 400)
    assert answer["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        + ", ".join(INVALID_PROBLEMS)
    )
    assert warnings == []
    assert http(sandbox, "GET", f"{DEPLOYS}/web")[0] == 404


@pytest.mark.parametrize("query", ["?fieldValidation=Warn", "", "?fieldValidation="])
def test_warn_is_the_default_and_drops_unknown_fields(sandbox: SandboxHandle, query: str) -> None:
    """Warn (also without the parameter): stored without unknown fields, one ``Warning: 299``
    header per problem.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    status, created, warnings = send(sandbox, "POST", DEPLOYS + query, INVALID_JSON)
    assert status == 201, created
    assert texts(warnings) == INVALID_PROBLEMS
    assert warnings[0] == '299 - "unknown field \\"metadata.unknownMeta\\""'
    assert_cleaned(created)
    assert_cleaned(stored(sandbox))


def test_ignore_drops_unknown_fields_silently(sandbox: SandboxHandle) -> None:
    """Ignore: the same object is stored, and no warning is sent.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    status, created, warnings = send(
        sandbox, "POST", DEPLOYS + "?fieldValidation=Ignore", INVALID_JSON
    )
    assert status == 201 and warnings == []
    assert_cleaned(created)
    assert_cleaned(stored(sandbox))


@pytest.mark.parametrize(
    ("method", "suffix", "content_type", "options"),
    [
        ("POST", "", "application/json", "CreateOptions"),
        ("PUT", "/web", "application/json", "UpdateOptions"),
        ("PATCH", "/web", "application/merge-patch+json", "PatchOptions"),
        ("PATCH", "/web?fieldManager=m", APPLY, "PatchOptions"),
    ],
)
@pytest.mark.parametrize("value", ["strict", "Fatal"])
def test_an_unsupported_directive_is_invalid(
    sandbox: SandboxHandle, method: str, suffix: str, content_type: str, options: str, value: str
) -> None:
    """Any value but Strict, Warn, Ignore (case matters) is a 422 on the request's options.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    path = DEPLOYS + suffix + ("&" if "?" in suffix else "?") + f"fieldValidation={value}"
    status, answer, _ = send(sandbox, method, path, deployment("web"), content_type)
    why = f'Unsupported value: "{value}": supported values: "", "Ignore", "Strict", "Warn"'
    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == f'{options}.meta.k8s.io "" is invalid: fieldValidation: {why}'
    assert answer["details"] == {
        "group": "meta.k8s.io",
        "kind": options,
        "causes": [
            {"reason": "FieldValueNotSupported", "message": why, "field": "fieldValidation"}
        ],
    }


def test_update_strict_fails_and_warn_drops(sandbox: SandboxHandle) -> None:
    """PUT decodes the body like create: Strict refuses, Warn stores it cleaned.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    assert http(sandbox, "POST", DEPLOYS, deployment("web"))[0] == 201
    status, answer, _ = send(sandbox, "PUT", f"{DEPLOYS}/web?fieldValidation=Strict", INVALID_JSON)
    assert status == 400 and answer["message"].endswith(", ".join(INVALID_PROBLEMS))
    assert stored(sandbox)["spec"].get("paused") is None
    status, _, warnings = send(sandbox, "PUT", f"{DEPLOYS}/web", INVALID_JSON)
    assert status == 200 and texts(warnings) == INVALID_PROBLEMS
    assert_cleaned(stored(sandbox))


def test_yaml_body_lists_repeated_keys_by_line_first(sandbox: SandboxHandle) -> None:
    """A YAML body's repeated keys are go-yaml's ``line N: key ... already set in map``,
    reported before the unknown fields.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    path = DEPLOYS + "?fieldValidation=Strict"
    status, answer, _ = send(sandbox, "POST", path, INVALID_YAML, "application/yaml")
    assert status == 400
    assert answer["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        "yaml: unmarshal errors:\n"
        '  line 7: key "replicas" already set in map\n'
        '  line 18: key "image" already set in map, unknown field "spec.replicass"'
    )
    status, created, warnings = send(sandbox, "POST", DEPLOYS, INVALID_YAML, "application/yaml")
    assert status == 201
    assert texts(warnings) == [
        'line 7: key "replicas" already set in map',
        'line 18: key "image" already set in map',
        'unknown field "spec.replicass"',
    ]
    assert created["spec"]["replicas"] == 2 and "replicass" not in created["spec"]
    assert created["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"


def test_free_form_maps_and_status_fields_are_declared(sandbox: SandboxHandle) -> None:
    """Maps with free keys (labels, annotations, ConfigMap data, resource limits,
    nodeSelector) and known status fields never warn; an unknown status field does.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    body = deployment("web")
    body["metadata"]["labels"] = {"any/key": "v"}
    body["metadata"]["annotations"] = {"example.com/anything": "v"}
    pod = body["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"disk": "ssd"}
    pod["containers"][0]["resources"] = {"limits": {"cpu": "1", "example.com/gpu": "1"}}
    pod["containers"][0]["ports"] = [{"containerPort": 80, "protocol": "TCP"}]
    body["status"] = {"replicas": 1, "bogus": True}
    status, _, warnings = send(sandbox, "POST", DEPLOYS, body)
    assert status == 201 and texts(warnings) == ['unknown field "status.bogus"']
    cm = {"metadata": {"name": "c"}, "data": {"any.key": "v"}, "binaryData": {"b": "AA=="}}
    status, _, warnings = send(sandbox, "POST", "/api/v1/namespaces/default/configmaps", cm)
    assert status == 201 and warnings == []


def test_crd_schema_and_preserved_fields_are_not_unknown(sandbox: SandboxHandle) -> None:
    """A CRD's openAPIV3Schema is free JSON Schema (recursive properties, defaults of any
    shape): creating one warns about nothing.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    status, _, warnings = send(
        sandbox,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?fieldValidation=Strict",
        GADGET_CRD,
    )
    assert status == 201 and warnings == []


# --- patch ----------------------------------------------------------------------------


MERGE_PATCH = """{"spec": {
  "unknown1": 1, "paused": true, "paused": false,
  "template": {"spec": {"containers": [{"name": "app", "image": "nginx", "unknownNested": 1}]}}
}}"""


@pytest.mark.parametrize(
    "content_type", ["application/merge-patch+json", "application/strategic-merge-patch+json"]
)
def test_patch_lists_duplicates_then_sorted_unknown_fields(
    sandbox: SandboxHandle, content_type: str
) -> None:
    """A merge or strategic merge patch: the patch's repeated keys first, then the patched
    object's unknown fields in sorted order; Warn stores the object without them.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    assert http(sandbox, "POST", DEPLOYS, deployment("web"))[0] == 201
    problems = [
        'duplicate field "spec.paused"',
        'unknown field "spec.template.spec.containers[0].unknownNested"',
        'unknown field "spec.unknown1"',
    ]
    path = f"{DEPLOYS}/web?fieldValidation=Strict"
    status, answer, _ = send(sandbox, "PATCH", path, MERGE_PATCH, content_type)
    assert (status, answer["message"]) == (400, "strict decoding error: " + ", ".join(problems))
    status, patched, warnings = send(sandbox, "PATCH", f"{DEPLOYS}/web", MERGE_PATCH, content_type)
    assert status == 200 and texts(warnings) == problems
    for obj in (patched, stored(sandbox)):
        assert "unknown1" not in obj["spec"] and obj["spec"]["paused"] is False
        assert "unknownNested" not in obj["spec"]["template"]["spec"]["containers"][0]


def test_json_patch_checks_its_operations_too(sandbox: SandboxHandle) -> None:
    """A JSON patch: unknown or repeated keys of the operations, then unknown fields.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    assert http(sandbox, "POST", DEPLOYS, deployment("web"))[0] == 201
    ops = """[
      {"op": "add", "path": "/spec/unknown1", "value": 1, "foo": "bar"},
      {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": 1},
      {"op": "replace", "path": "/spec/replicas", "value": 3}
    ]"""
    problems = [
        'json patch unknown field "[0].foo"',
        'json patch duplicate field "[1].path"',
        'unknown field "spec.unknown1"',
        'unknown field "spec.unknown3"',
    ]
    path = f"{DEPLOYS}/web?fieldValidation=Strict"
    status, answer, _ = send(sandbox, "PATCH", path, ops, "application/json-patch+json")
    assert (status, answer["message"]) == (400, "strict decoding error: " + ", ".join(problems))
    status, _, warnings = send(
        sandbox,
        "PATCH",
        f"{DEPLOYS}/web?fieldValidation=Ignore",
        ops,
        "application/json-patch+json",
    )
    assert status == 200 and warnings == []
    spec = stored(sandbox)["spec"]
    assert spec["replicas"] == 3 and not {"unknown1", "unknown2", "unknown3"} & set(spec)


def test_scale_subresource_decodes_a_scale(sandbox: SandboxHandle) -> None:
    """/scale bodies are autoscaling/v1 Scale objects, checked against Scale's fields.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    assert http(sandbox, "POST", DEPLOYS, deployment("web"))[0] == 201
    _, scale = http(sandbox, "GET", f"{DEPLOYS}/web/scale")
    # an unconditional update: the Deployment controller may write status (a new
    # resourceVersion) between the GET and the PUT, and a conflict is not what this tests
    del scale["metadata"]["resourceVersion"]
    scale["spec"] = {"replicas": 4, "replicass": 5}
    status, answer, _ = send(sandbox, "PUT", f"{DEPLOYS}/web/scale?fieldValidation=Strict", scale)
    assert (status, answer["message"]) == (
        400,
        'Scale in version "v1" cannot be handled as a Scale: strict decoding error: '
        'unknown field "spec.replicass"',
    )
    status, answer, warnings = send(sandbox, "PUT", f"{DEPLOYS}/web/scale", scale)
    assert status == 200 and texts(warnings) == ['unknown field "spec.replicass"']
    assert stored(sandbox)["spec"]["replicas"] == 4
    patch = {"spec": {"replicas": 5, "bogus": 1}}
    status, answer, warnings = send(
        sandbox, "PATCH", f"{DEPLOYS}/web/scale", patch, "application/merge-patch+json"
    )
    assert status == 200 and texts(warnings) == ['unknown field "spec.bogus"']
    assert answer["spec"] == {"replicas": 5}


# --- server-side apply ----------------------------------------------------------------


@pytest.mark.parametrize("directive", ["Strict", "Warn", "Ignore"])
def test_apply_refuses_undeclared_fields_whatever_the_directive(
    sandbox: SandboxHandle, directive: str
) -> None:
    """Server-side apply's typed conversion refuses an undeclared field in every mode;
    a real server answers 500 without a reason (kubernetes/kubernetes#122480).

    https://kubernetes.io/docs/reference/using-api/server-side-apply/
    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    body = deployment("web")
    body["metadata"]["namespace"] = "default"
    body["spec"]["replicass"] = 3
    path = f"{DEPLOYS}/web?fieldManager=m&fieldValidation={directive}"
    status, answer, _ = send(sandbox, "PATCH", path, body, APPLY)
    assert status == 500 and "reason" not in answer
    assert answer["message"] == (
        "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): "
        ".spec.replicass: field not declared in schema"
    )
    assert http(sandbox, "GET", f"{DEPLOYS}/web")[0] == 404


def test_apply_names_list_items_by_merge_key_and_lists_several(sandbox: SandboxHandle) -> None:
    """structured-merge-diff names a container by its merge key and lists several errors.

    https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy
    """
    body = deployment("web")
    body["metadata"]["bogus"] = 1
    body["spec"]["template"]["spec"]["containers"][0]["imagee"] = "nginx"
    status, answer, _ = send(sandbox, "PATCH", f"{DEPLOYS}/web?fieldManager=m", body, APPLY)
    assert status == 500
    assert answer["message"] == (
        "failed to create typed patch object (/web; apps/v1, Kind=Deployment): errors:\n"
        "  .metadata.bogus: field not declared in schema\n"
        '  .spec.template.spec.containers[name="app"].imagee: field not declared in schema'
    )


def test_apply_repeated_yaml_keys_follow_the_directive(sandbox: SandboxHandle) -> None:
    """In apply, fieldValidation governs repeated YAML keys: Strict 400, Warn warnings.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    body = INVALID_YAML.replace("  replicass: 3\n", "")
    path = f"{DEPLOYS}/web?fieldManager=m"
    status, answer, _ = send(sandbox, "PATCH", path + "&fieldValidation=Strict", body, APPLY)
    assert (status, answer["message"]) == (
        400,
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 7: key "replicas" already set in map\n'
        '  line 17: key "image" already set in map',
    )
    status, applied, warnings = send(sandbox, "PATCH", path, body, APPLY)
    assert status == 201 and texts(warnings) == [
        'line 7: key "replicas" already set in map',
        'line 17: key "image" already set in map',
    ]
    assert applied["spec"]["replicas"] == 2


def test_a_clean_apply_sends_no_warning(sandbox: SandboxHandle) -> None:
    """No problem, no header.

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    path = f"{DEPLOYS}/web?fieldManager=m&fieldValidation=Strict"
    status, _, warnings = send(sandbox, "PATCH", path, deployment("web"), APPLY)
    assert status == 201 and warnings == []


# --- custom resources -----------------------------------------------------------------

GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer", "default": 1},
                                    "ports": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {"port": {"type": "integer"}},
                                        },
                                    },
                                    "labels": {
                                        "type": "object",
                                        "additionalProperties": {"type": "string"},
                                    },
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                    "template": {
                                        "type": "object",
                                        "x-kubernetes-embedded-resource": True,
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"ready": {"type": "boolean"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}
GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"


def test_custom_resources_are_pruned_by_their_structural_schema(sandbox: SandboxHandle) -> None:
    """Fields outside a CRD's schema are unknown (and pruned); preserved subtrees, free maps
    and embedded resources keep theirs, but an embedded resource's metadata is ObjectMeta.

    https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning
    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    assert (
        http(
            sandbox, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", GADGET_CRD
        )[0]
        == 201
    )
    gadget = """{
      "apiVersion": "example.com/v1", "kind": "Gadget",
      "metadata": {"name": "g", "unknownMeta": 1},
      "spec": {
        "size": 2, "size": 3, "colour": "red",
        "ports": [{"port": 80, "name": "http"}],
        "labels": {"any": "thing"},
        "extra": {"free": {"form": true}},
        "template": {"apiVersion": "v1", "kind": "Pod", "spec": {"x": 1},
                     "metadata": {"name": "p", "bogus": 1}}
      }
    }"""
    problems = [
        'duplicate field "spec.size"',
        'unknown field "metadata.unknownMeta"',
        'unknown field "spec.colour"',
        'unknown field "spec.ports[0].name"',
        'unknown field "spec.template.metadata.bogus"',
    ]
    status, answer, _ = send(sandbox, "POST", GADGETS + "?fieldValidation=Strict", gadget)
    assert (status, answer["message"]) == (
        400,
        'Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: '
        + ", ".join(problems),
    )
    status, created, warnings = send(sandbox, "POST", GADGETS, gadget)
    assert status == 201 and texts(warnings) == problems
    assert "unknownMeta" not in created["metadata"]
    assert created["spec"] == {
        "size": 3,
        "ports": [{"port": 80}],
        "labels": {"any": "thing"},
        "extra": {"free": {"form": True}},
        "template": {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {"x": 1},
            "metadata": {"name": "p"},
        },
    }
    status, _, warnings = send(
        sandbox, "PUT", f"{GADGETS}/g/status", {**created, "status": {"ready": True, "x": 1}}
    )
    assert status == 200 and texts(warnings) == ['unknown field "status.x"']
    status, answer, _ = send(
        sandbox,
        "PATCH",
        f"{GADGETS}/g?fieldManager=m",
        {
            "apiVersion": "example.com/v1",
            "kind": "Gadget",
            "metadata": {"name": "g"},
            "spec": {"colour": 1},
        },
        APPLY,
    )
    assert status == 500 and answer["message"].endswith(
        ".spec.colour: field not declared in schema"
    )


def test_a_preserve_unknown_root_keeps_everything_but_metadata(sandbox: SandboxHandle) -> None:
    """A schemaless CRD (``x-kubernetes-preserve-unknown-fields`` at the root) keeps any field;
    metadata is still ObjectMeta.

    https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#controlling-pruning
    """
    crd = json.loads(json.dumps(GADGET_CRD))
    crd["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    }
    assert (
        http(sandbox, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0]
        == 201
    )
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "bogus": 1},
        "spec": {"anything": {"goes": [1]}},
        "top": True,
    }
    status, created, warnings = send(sandbox, "POST", GADGETS, body)
    assert status == 201 and texts(warnings) == ['unknown field "metadata.bogus"']
    assert created["spec"] == {"anything": {"goes": [1]}} and created["top"] is True


# --- what the server writes itself --------------------------------------------------------


def test_every_object_the_server_wrote_reads_back_under_strict(sandbox: SandboxHandle) -> None:
    """Objects a real server returns hold only declared fields, so writing one back with
    Strict never fails; that holds for what the sandbox's controllers, defaults and
    managedFields add (a stray field there would break every later patch).

    https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
    """
    failing = deployment("bad")
    failing["spec"]["template"]["metadata"]["annotations"] = {
        "sandbox.reconciler.dev/fail": "CrashLoopBackOff"
    }
    sts = deployment("db")
    sts.update(kind="StatefulSet", apiVersion="apps/v1")
    sts["spec"]["serviceName"] = "db"
    ds = deployment("agent")
    ds.update(kind="DaemonSet")
    del ds["spec"]["replicas"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
            }
        },
    }
    rs = deployment("web-1")
    rs.update(kind="ReplicaSet")
    pod = {
        "metadata": {"name": "p", "annotations": {"sandbox.reconciler.dev/fail": "true"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    for path, body in [
        (DEPLOYS, deployment("web")),
        ("/apis/apps/v1/namespaces/default/replicasets", rs),
        ("/api/v1/namespaces/default/pods", pod),
        (DEPLOYS, failing),
        ("/apis/apps/v1/namespaces/default/statefulsets", sts),
        ("/apis/apps/v1/namespaces/default/daemonsets", ds),
        ("/apis/batch/v1/namespaces/default/jobs", job),
        (
            "/api/v1/namespaces/default/services",
            {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
        ),
    ]:
        status, answer = http(sandbox, "POST", path + "?fieldValidation=Strict", body)
        assert status == 201, answer

    def settled() -> bool:
        _, web = http(sandbox, "GET", f"{DEPLOYS}/web")
        _, once = http(sandbox, "GET", "/apis/batch/v1/namespaces/default/jobs/once")
        _, p = http(sandbox, "GET", "/api/v1/namespaces/default/pods/p")
        return bool(
            web["status"].get("availableReplicas")
            and once["status"].get("succeeded")
            and p["status"].get("containerStatuses")
        )

    eventually(settled)
    _, groups = http(sandbox, "GET", "/apis")
    versions = ["/api/v1"] + [
        f"/apis/{v['groupVersion']}" for g in groups["groups"] for v in g["versions"]
    ]
    checked = set()
    for base in versions:
        _, resources = http(sandbox, "GET", base)
        for resource in resources["resources"]:
            # only what can be listed and written back (not the read-only metrics API)
            if "/" in resource["name"] or not {"list", "update"} <= set(resource["verbs"]):
                continue
            _, listed = http(sandbox, "GET", f"{base}/{resource['name']}")
            for item in listed["items"]:
                meta = item["metadata"]
                ns = f"/namespaces/{meta['namespace']}" if resource["namespaced"] else ""
                path = f"{base}{ns}/{resource['name']}/{meta['name']}?fieldValidation=Strict"
                status, answer = http(sandbox, "PUT", path, item)
                for _ in range(5):  # the simulated controllers keep writing pods and workloads
                    if status != 409:
                        break
                    _, fresh = http(sandbox, "GET", path.split("?")[0])
                    status, answer = http(sandbox, "PUT", path, fresh)
                assert status in (200, 404), (path, answer.get("message"))  # 404: replaced pod
                checked.add(item["kind"])
    assert {"Deployment", "ReplicaSet", "Pod", "StatefulSet", "DaemonSet", "Job"} <= checked
    assert {"Namespace", "ServiceAccount", "Service"} <= checked


def test_json_apply_body_with_a_repeated_key_is_read_as_yaml(sandbox: SandboxHandle) -> None:
    """An apply body is YAML (``application/apply-patch+yaml``), and JSON is YAML: a JSON
    body is parsed as JSON when it can be, and one that repeats a key still gets go-yaml's
    ``already set in map`` (the sandbox's JSON fast path must not hide it).

    https://kubernetes.io/docs/reference/using-api/server-side-apply/#serialization
    """
    body = json.dumps(deployment("web"))
    repeated = body.replace('"replicas": 2', '"replicas": 2, "replicas": 3', 1)
    assert repeated != body
    path = f"{DEPLOYS}/web?fieldManager=me&fieldValidation=Strict"
    status, answer, _ = send(sandbox, "PATCH", path, repeated, "application/apply-patch+yaml")
    assert status == 400
    assert 'line 1: key "replicas" already set in map' in answer["message"]
    status, created, _ = send(sandbox, "PATCH", path, body, "application/apply-patch+yaml")
    assert status == 201 and created["spec"]["replicas"] == 2
