"""Defaulting and normalisation: objects read back as a real API server stores them.

Field defaults are the ones the API reference documents for each kind
(https://kubernetes.io/docs/reference/kubernetes-api/); quantities are canonical
(https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/);
Secret ``stringData`` is folded into ``data``
(https://kubernetes.io/docs/concepts/configuration/secret/); ``metadata.generation``
is set only on kinds whose spec a controller observes
(https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/).
Most tests call :class:`SandboxApi` in process (no HTTP) to stay fast; the ones about
HTTP answers and field ownership go through the server.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from reconciler.sandbox.allocation import allocate_service, assign_node_ports, free_ip, job_selector
from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.defaults import apply_defaults
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.quantity import MILLI, canonical
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http, manifest

APPLY = "application/apply-patch+yaml"
ALICE = WriteOptions("alice")


@pytest.fixture
def api() -> SandboxApi:
    return SandboxApi()


def kind_of(api: SandboxApi, api_version: str, kind: str) -> Kind:
    found = api.kinds.by_kind(api_version, kind)
    assert found is not None
    return found


def create(api: SandboxApi, body: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return api.create(kind_of(api, body["apiVersion"], body["kind"]), namespace, body, ALICE)


def container(image: str = "nginx:1.25", **extra: Any) -> dict[str, Any]:
    return {"name": "app", "image": image, **extra}


def workload(kind: str, spec: dict[str, Any], api_version: str = "apps/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": spec}


def template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "w"}},
        "spec": {"containers": list(containers or [container()]), **spec},
    }


def service(name: str = "svc", **spec: Any) -> dict[str, Any]:
    body = {"selector": {"app": "web"}, "ports": [{"port": 80}], **spec}
    return manifest("v1", "Service", name, spec=body)


POD_SPEC_DEFAULTS = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "securityContext": {},
    "terminationGracePeriodSeconds": 30,
}
CONTAINER_DEFAULTS = {
    "imagePullPolicy": "IfNotPresent",
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
}


# --- workloads ----------------------------------------------------------------------------


def test_deployment_defaults(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/deployment-v1/"""
    created = create(api, deployment("web"))
    spec = created["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    pod = spec["template"]["spec"]
    assert {k: pod[k] for k in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    assert pod["containers"][0] == {"name": "app", "image": "nginx:1.25", **CONTAINER_DEFAULTS}
    assert "enableServiceLinks" not in pod  # a Pod default, never a template's


def test_deployment_keeps_what_the_client_set(api: SandboxApi) -> None:
    """Defaults fill gaps only; ``Recreate`` gets no rollingUpdate, 0 stays 0."""
    body = workload(
        "Deployment",
        {
            "selector": {"matchLabels": {"app": "w"}},
            "template": template(restartPolicy="Always", terminationGracePeriodSeconds=0),
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 0,
        },
    )
    spec = create(api, body)["spec"]
    assert spec["strategy"] == {"type": "Recreate"} and spec["revisionHistoryLimit"] == 0
    assert spec["replicas"] == 1
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 0


def test_statefulset_defaults(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/stateful-set-v1/"""
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1024Mi"}},
        },
    }
    body = workload(
        "StatefulSet",
        {
            "selector": {"matchLabels": {"app": "w"}},
            "serviceName": "w",
            "template": template(),
            "volumeClaimTemplates": [claim],
        },
    )
    spec = create(api, body)["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert (spec["replicas"], spec["revisionHistoryLimit"]) == (1, 10)
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert spec["volumeClaimTemplates"][0] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Pending"},
    }


def test_statefulset_on_delete_gets_no_partition(api: SandboxApi) -> None:
    body = workload(
        "StatefulSet",
        {
            "selector": {"matchLabels": {"app": "w"}},
            "template": template(),
            "updateStrategy": {"type": "OnDelete"},
        },
    )
    assert create(api, body)["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_daemonset_defaults(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/daemon-set-v1/"""
    body = workload(
        "DaemonSet", {"selector": {"matchLabels": {"app": "w"}}, "template": template()}
    )
    spec = create(api, body)["spec"]
    assert spec["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert spec["revisionHistoryLimit"] == 10


def test_job_defaults_and_generated_selector(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/ and
    https://kubernetes.io/docs/concepts/workloads/controllers/job/#specifying-your-own-pod-selector
    """
    body = workload("Job", {"template": template(restartPolicy="Never")}, "batch/v1")
    created = create(api, body)
    spec, uid = created["spec"], created["metadata"]["uid"]
    assert {k: spec[k] for k in ("backoffLimit", "completions", "parallelism")} == {
        "backoffLimit": 6,
        "completions": 1,
        "parallelism": 1,
    }
    assert (spec["completionMode"], spec["suspend"]) == ("NonIndexed", False)
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # as given
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "w",
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "w",
        "controller-uid": uid,
        "job-name": "w",
    }
    assert created["metadata"]["labels"] == {"app": "w"}  # a Job without labels gets its pods'


def test_job_with_manual_selector_and_parallelism(api: SandboxApi) -> None:
    selector = {"matchLabels": {"app": "w"}}
    pods = template(restartPolicy="OnFailure")
    spec = {"manualSelector": True, "selector": selector, "parallelism": 3, "template": pods}
    created = create(api, workload("Job", spec, "batch/v1"))["spec"]
    assert created["selector"] == selector and "completions" not in created
    assert created["parallelism"] == 3
    assert created["template"]["metadata"]["labels"] == {"app": "w"}


@pytest.mark.parametrize("kind", ["Job", "CronJob"])
def test_job_pods_may_not_restart_always(api: SandboxApi, kind: str) -> None:
    """https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-template: only
    ``Never`` or ``OnFailure``; an omitted policy defaults to ``Always`` and is refused."""
    spec: dict[str, Any] = {"template": template()}
    where = "spec.template.spec.restartPolicy"
    if kind == "CronJob":
        spec = {"schedule": "@daily", "jobTemplate": {"spec": spec}}
        where = "spec.jobTemplate.spec.template.spec.restartPolicy"
    with pytest.raises(ApiError) as e:
        create(api, workload(kind, spec, "batch/v1"))
    assert e.value.code == 422 and [c["field"] for c in e.value.causes] == [where]
    assert 'Unsupported value: "Always": supported values: "OnFailure", "Never"' in e.value.message


def test_cronjob_defaults(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/cron-job-v1/"""
    job = {"template": template(restartPolicy="OnFailure")}
    body = workload("CronJob", {"schedule": "@daily", "jobTemplate": {"spec": job}}, "batch/v1")
    spec = create(api, body)["spec"]
    assert spec["concurrencyPolicy"] == "Allow" and spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    job_spec = spec["jobTemplate"]["spec"]
    assert "backoffLimit" not in job_spec  # Job defaults apply to Jobs, not to templates
    assert job_spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


# --- pods and containers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("registry.local:5000/team/app", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("registry.local:5000/team/app:v2", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
        ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ],
)
def test_image_pull_policy_follows_the_tag(api: SandboxApi, image: str, policy: str) -> None:
    """https://kubernetes.io/docs/concepts/containers/images/#imagepullpolicy-defaulting"""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {"containers": [container(image)]}
    assert create(api, pod)["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_pod_defaults(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/"""
    app = container(
        ports=[{"containerPort": 8080}],
        readinessProbe={"httpGet": {"port": 8080}},
        env=[{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        resources={"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m"}},
    )
    volumes = [
        {"name": "cfg", "configMap": {"name": "cfg"}},
        {"name": "sec", "secret": {"secretName": "s", "defaultMode": 256}},
        {"name": "scratch"},
    ]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {"containers": [app], "volumes": volumes}
    spec = create(api, pod)["spec"]
    assert {k: spec[k] for k in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    assert spec["enableServiceLinks"] is True
    got = spec["containers"][0]
    assert got["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert got["readinessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert got["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    # a Pod's missing requests default to its limits
    assert got["resources"]["requests"] == {"cpu": "100m", "memory": "1Gi"}
    assert [v.get("configMap", v.get("secret", v.get("emptyDir"))) for v in spec["volumes"]] == [
        {"name": "cfg", "defaultMode": 420},
        {"secretName": "s", "defaultMode": 256},
        {},
    ]


# --- services -------------------------------------------------------------------------------


def test_service_defaults_and_cluster_ip(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/service-resources/service-v1/"""
    spec = create(api, service(ports=[{"name": "http", "port": 80}]))["spec"]
    ip = spec["clusterIP"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12")
    assert spec["clusterIPs"] == [ip]
    assert spec["ports"] == [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]
    assert {k: spec[k] for k in ("type", "sessionAffinity", "internalTrafficPolicy")} == {
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
    }
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert "externalTrafficPolicy" not in spec


def test_cluster_ip_is_stable_per_service_and_unique(api: SandboxApi) -> None:
    first = create(api, service("a"))["spec"]["clusterIP"]
    other = create(api, service("b"))["spec"]["clusterIP"]
    assert first != other
    again = SandboxApi()  # another sandbox run gives the same Service the same address
    assert create(again, service("a"))["spec"]["clusterIP"] == first


def test_hash_collisions_take_the_next_free_address() -> None:
    first = free_ip("ns/a", set())
    second = free_ip("ns/a", {first})
    assert second == str(ipaddress.ip_address(first) + 1)
    ports = [{"port": 80}]
    spec: dict[str, Any] = {"type": "NodePort", "ports": copy.deepcopy(ports)}
    assign_node_ports(spec, "a", "ns/a", set())
    taken = spec["ports"][0]["nodePort"]
    again: dict[str, Any] = {"type": "NodePort", "ports": copy.deepcopy(ports)}
    assign_node_ports(again, "a", "ns/a", {taken})
    assert again["ports"][0]["nodePort"] == taken + 1 or (taken, again["ports"][0]["nodePort"]) == (
        32767,
        30000,
    )


def test_headless_and_external_name_services(api: SandboxApi) -> None:
    headless = create(api, service("h", clusterIP="None"))["spec"]
    assert (headless["clusterIP"], headless["clusterIPs"]) == ("None", ["None"])
    assert headless["ipFamilyPolicy"] == "SingleStack"
    bare = service("bare", clusterIP="None")
    del bare["spec"]["selector"]
    assert create(api, bare)["spec"]["ipFamilyPolicy"] == "RequireDualStack"
    external = service("ext", type="ExternalName", externalName="db.example.com")
    spec = create(api, external)["spec"]
    assert not {"clusterIP", "clusterIPs", "ipFamilies", "internalTrafficPolicy"} & set(spec)


def test_node_port_service_gets_node_ports(api: SandboxApi) -> None:
    ports = [{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30080}]
    spec = create(api, service(type="NodePort", ports=ports))["spec"]
    allocated = spec["ports"][0]["nodePort"]
    assert 30000 <= allocated <= 32767 and allocated != 30080
    assert spec["ports"][1]["nodePort"] == 30080
    assert spec["externalTrafficPolicy"] == "Cluster"
    balancer = create(api, service("lb", type="LoadBalancer"))["spec"]
    assert balancer["allocateLoadBalancerNodePorts"] is True and balancer["ports"][0]["nodePort"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"clusterIP": "10.0.0.1"}, "spec.clusterIPs", "is not in the valid range"),
        ({"clusterIP": "not-an-ip"}, "spec.clusterIPs", "must be a valid IP address"),
        ({"ipFamilies": ["IPv6"]}, "spec.ipFamilies", "not configured for dual-stack"),
        ({"ipFamilyPolicy": "RequireDualStack"}, "spec.ipFamilyPolicy", "dual-stack"),
        (
            {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]},
            "spec.ports[0].nodePort",
            "The range of valid ports is 30000-32767",
        ),
        (
            {"ports": [{"port": 80, "nodePort": 30001}]},
            "spec.ports[0].nodePort",
            "may not be used when `type` is 'ClusterIP'",
        ),
    ],
)
def test_bad_service_addresses_are_invalid(
    api: SandboxApi, spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ApiError) as e:
        create(api, service(**spec))
    assert e.value.code == 422 and message in e.value.message
    assert [c["field"] for c in e.value.causes] == [field]


def test_taken_addresses_are_refused(api: SandboxApi) -> None:
    ip = create(api, service("a"))["spec"]["clusterIP"]
    with pytest.raises(ApiError) as e:
        create(api, service("b", clusterIP=ip))
    assert e.value.code == 422 and "provided IP is already allocated" in e.value.message
    create(api, service("np", type="NodePort", ports=[{"port": 80, "nodePort": 31000}]))
    with pytest.raises(ApiError) as e:
        create(api, service("np2", type="NodePort", ports=[{"port": 80, "nodePort": 31000}]))
    assert "provided port is already allocated" in e.value.message


def test_update_keeps_allocated_values_and_type_change_drops_them(api: SandboxApi) -> None:
    kind = kind_of(api, "v1", "Service")
    created = create(api, service(type="NodePort", ports=[{"name": "a", "port": 80}]))
    ip, node_port = created["spec"]["clusterIP"], created["spec"]["ports"][0]["nodePort"]
    body = service(type="NodePort", ports=[{"name": "a", "port": 80}])  # no IP, no nodePort
    kept = api.replace(kind, "default", "svc", body, ALICE)["spec"]
    assert (kept["clusterIP"], kept["ports"][0]["nodePort"]) == (ip, node_port)
    to_cluster_ip = {**service(), "spec": {**kept, "type": "ClusterIP"}}
    spec = api.replace(kind, "default", "svc", to_cluster_ip, ALICE)["spec"]
    assert "nodePort" not in spec["ports"][0] and "externalTrafficPolicy" not in spec
    assert spec["clusterIP"] == ip
    external = {**service(), "spec": {**spec, "type": "ExternalName", "externalName": "x.example"}}
    spec = api.replace(kind, "default", "svc", external, ALICE)["spec"]
    assert not {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"} & set(spec)


def test_session_affinity_config(api: SandboxApi) -> None:
    sticky = create(api, service("s", sessionAffinity="ClientIP"))["spec"]
    assert sticky["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    config = {"clientIP": {"timeoutSeconds": 60}}
    plain = create(api, service("p", sessionAffinityConfig=config))["spec"]
    assert "sessionAffinityConfig" not in plain  # dropped with sessionAffinity None


# --- other kinds -------------------------------------------------------------------------------


def test_secret_string_data_is_folded_into_data(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/concepts/configuration/secret/ (stringData is write-only)"""
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": base64.b64encode(b"old").decode(), "b": base64.b64encode(b"b").decode()},
        "stringData": {"a": "new", "c": "c"},
    }
    created = create(api, body)
    assert "stringData" not in created and created["type"] == "Opaque"
    decoded = {k: base64.b64decode(v).decode() for k, v in created["data"].items()}
    assert decoded == {"a": "new", "b": "b", "c": "c"}  # stringData wins over data


def test_namespace_network_policy_binding_and_crd_defaults(api: SandboxApi) -> None:
    """https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name,
    https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/network-policy-v1/,
    https://kubernetes.io/docs/reference/kubernetes-api/authorization-resources/role-binding-v1/
    """
    ns = create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}, "")
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "web"}
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "np"},
        "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]},
    }
    spec = create(api, policy)["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["egress"][0]["ports"] == [{"port": 53, "protocol": "TCP"}]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "ServiceAccount", "name": "default", "namespace": "default"},
        ],
    }
    subjects = create(api, binding)["subjects"]
    assert subjects[0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert "apiGroup" not in subjects[1]


# --- quantities --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("1000m", "1"),
        ("1024Mi", "1Gi"),
        ("0.5", "500m"),
        (0.5, "500m"),
        (2, "2"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("2500000000", "2500M"),
        ("0.0001", "1m"),  # resource lists are rounded up to milli
        ("0", "0"),
    ],
)
def test_quantities_are_canonical(given: Any, stored: str) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/"""
    assert canonical(given, MILLI) == stored


def test_nano_precision_outside_resource_lists() -> None:
    assert canonical("0.0001") == "100u"
    assert canonical("1n") == "1n" and canonical("0.1n") == "1n"  # rounded up


@pytest.mark.parametrize("bad", ["", "abc", "1K", "1 ", "1.2.3", "1mi", True, None, [1]])
def test_bad_quantities_raise(bad: Any) -> None:
    with pytest.raises(ValueError):
        canonical(bad)


def test_resources_are_stored_canonical(api: SandboxApi) -> None:
    resources = {"requests": {"cpu": "1000m", "memory": "1024Mi"}, "limits": {"cpu": 0.5}}
    spec = {
        "selector": {"matchLabels": {"app": "w"}},
        "template": template(container(resources=resources)),
    }
    stored = create(api, workload("Deployment", spec))
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "500m"},
    }


def test_unparsable_quantity_is_a_bad_request(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    status, error = http(sandbox, "POST", "/apis/apps/v1/namespaces/default/deployments", body)
    assert status == 400 and error["reason"] == "BadRequest"
    assert error["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: quantities must match '
        "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


# --- generation ----------------------------------------------------------------------------------


def test_generation_only_on_kinds_with_a_spec_to_observe(api: SandboxApi) -> None:
    """ConfigMaps, Secrets, ServiceAccounts and Services have no ``metadata.generation``."""
    plain = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}},
        service(),
    ]
    for body in plain:
        assert "generation" not in create(api, body)["metadata"], body["kind"]
    assert create(api, deployment("web"))["metadata"]["generation"] == 1
    kind = kind_of(api, "v1", "ConfigMap")
    changed = {**plain[0], "data": {"a": "2"}}
    assert "generation" not in api.replace(kind, "default", "c", changed, ALICE)["metadata"]


def test_deployment_annotations_bump_generation(api: SandboxApi) -> None:
    kind = kind_of(api, "apps/v1", "Deployment")
    created = create(api, deployment("web"))
    annotated = copy.deepcopy(created)
    annotated["metadata"]["annotations"] = {"note": "x"}
    assert api.replace(kind, "default", "web", annotated, ALICE)["metadata"]["generation"] == 2
    labelled = copy.deepcopy(annotated)
    labelled["metadata"]["labels"] = {"tier": "x"}
    del labelled["metadata"]["resourceVersion"]
    assert api.replace(kind, "default", "web", labelled, ALICE)["metadata"]["generation"] == 2


# --- server-side apply and field ownership -----------------------------------------------------


def apply(sandbox: SandboxHandle, path: str, body: Any, manager: str = "alice") -> tuple[int, Any]:
    return http(sandbox, "PATCH", f"{path}?fieldManager={manager}", body, APPLY)


def owned(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    return dict(entry["fieldsV1"])


def test_applier_never_owns_defaulted_fields(sandbox: SandboxHandle) -> None:
    """https://kubernetes.io/docs/reference/using-api/server-side-apply/: the applier owns
    what it applied; defaults are on the object but belong to no manager."""
    path = "/api/v1/namespaces/default/services/svc"
    status, obj = apply(sandbox, path, service())
    assert status == 201 and obj["spec"]["clusterIP"] and obj["spec"]["type"] == "ClusterIP"
    assert owned(obj, "alice")["f:spec"] == {
        "f:ports": {'k:{"port":80}': {".": {}, "f:port": {}}},
        "f:selector": {"f:app": {}},
    }
    status, again = apply(sandbox, path, service())
    assert status == 200
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_creator_owns_the_defaults_its_body_caused(sandbox: SandboxHandle) -> None:
    """A create (operation Update) owns its decoded body, defaults included, as
    ``kubectl create`` does; storage-assigned values (clusterIP) stay unowned."""
    path = "/api/v1/namespaces/default/services?fieldManager=creator"
    status, obj = http(sandbox, "POST", path, service())
    assert status == 201
    fields = owned(obj, "creator")["f:spec"]
    assert {"f:type", "f:sessionAffinity", "f:internalTrafficPolicy"} <= set(fields)
    assert not {"f:clusterIP", "f:clusterIPs", "f:ipFamilies"} & set(fields)


def test_reapplying_normalised_manifests_changes_nothing(sandbox: SandboxHandle) -> None:
    resources = {"requests": {"cpu": "1000m", "memory": "1024Mi"}, "limits": {"cpu": 0.5}}
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    _, first = apply(sandbox, path, body)
    _, again = apply(sandbox, path, body)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    secret["stringData"] = {"token": "abc"}
    secret_path = "/api/v1/namespaces/default/secrets/s"
    _, first = apply(sandbox, secret_path, secret)
    _, again = apply(sandbox, secret_path, secret)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["data"] == {"token": base64.b64encode(b"abc").decode()}


def test_dropped_field_falls_back_to_its_default(sandbox: SandboxHandle) -> None:
    """A field no manager owns any more is removed, then defaulted again."""
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Always"
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    _, first = apply(sandbox, path, body)
    assert first["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    _, after = apply(sandbox, path, deployment("web"))
    assert after["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_official_client_reads_defaults(core: client.CoreV1Api) -> None:
    """The typed client sees the fields kubectl shows on a real cluster."""
    created = core.create_namespaced_service("default", service())
    assert created.spec.cluster_ip and created.spec.cluster_ips == [created.spec.cluster_ip]
    assert created.spec.ports[0].target_port == 80 and created.spec.ports[0].protocol == "TCP"
    assert created.metadata.generation is None


# --- malformed bodies ------------------------------------------------------------------------

_VOCABULARY = [
    "spec", "template", "jobTemplate", "containers", "ports", "port", "nodePort", "resources",
    "limits", "cpu", "volumes", "configMap", "strategy", "rollingUpdate", "updateStrategy",
    "type", "stringData", "data", "metadata", "labels", "env", "valueFrom", "fieldRef",
    "readinessProbe", "httpGet", "volumeClaimTemplates", "status", "subjects", "egress",
    "metrics", "target", "value", "clusterIP", "clusterIPs", "selector", "name",
]  # fmt: skip
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 70000) | st.sampled_from(["", "1k", "x", "None"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(_VOCABULARY), children, max_size=4)
    ),
    max_leaves=12,
)
_KINDS = SandboxApi().kinds.all()


@settings(max_examples=150, deadline=None)
@given(body=st.dictionaries(st.sampled_from(_VOCABULARY), _json, max_size=4), index=st.integers())
def test_defaults_never_crash_and_are_idempotent(body: dict[str, Any], index: int) -> None:
    """Odd shapes are the validators' business: defaulting skips them, never crashes,
    refuses only unparsable quantities (400), and a second pass changes nothing."""
    kind = _KINDS[index % len(_KINDS)]
    obj = {**copy.deepcopy(body), "metadata": {"name": "x", "uid": "u"}}
    try:
        apply_defaults(kind, obj)
        if kind.kind == "Service":
            allocate_service(obj, None, set(), set())
        if kind.kind == "Job":
            job_selector(obj)
    except ApiError as e:
        assert e.code in (400, 422)
        return
    once = copy.deepcopy(obj)
    apply_defaults(kind, obj)
    assert obj == once
