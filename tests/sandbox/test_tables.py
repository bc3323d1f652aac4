"""Server-side printing: GET and list as a meta.k8s.io Table.

https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables
(``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``, columnDefinitions with
``priority`` 1 for the ``-o wide`` columns, rows whose ``object`` follows
``includeObject``). Cell values are checked against fixed clocks in the pure tests.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.kinds import BUILTIN_KINDS, Kind
from reconciler.sandbox.namespaces import ROOT_CA
from reconciler.sandbox.tables import (
    format_label_selector,
    go_text,
    human_duration,
    printer_for,
    table_version,
    to_table,
)
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http

TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
AGE = re.compile(r"^\d+s$")


def ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def kind_of(name: str, group: str = "") -> Kind:
    return next(k for k in BUILTIN_KINDS if (k.group, k.kind) == (group, name))


def get(sandbox: SandboxHandle, path: str, accept: str = TABLE) -> tuple[int, Any]:
    return http(sandbox, "GET", path, headers={"Accept": accept})


def cells(kind: Kind, obj: dict[str, Any]) -> list[Any]:
    return list(printer_for(kind)[1](obj, NOW)[0])


def columns(kind: Kind) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in printer_for(kind)[0]]


def test_a_list_as_table(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables"""
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"x": "1"}})
    status, table = get(sandbox, "/api/v1/namespaces/default/configmaps", KUBECTL_ACCEPT)
    assert status == 200
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["columnDefinitions"][0]["format"] == "name"
    row, root_ca = table["rows"]  # every namespace holds the cluster's root CA too
    assert row["cells"][:2] == ["a", 1] and AGE.match(row["cells"][2])
    assert root_ca["cells"][:2] == [ROOT_CA, 1]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["apiVersion"] == "meta.k8s.io/v1"
    assert row["object"]["metadata"]["name"] == "a"
    _, listed = http(sandbox, "GET", "/api/v1/namespaces/default/configmaps")
    # the list's resourceVersion, which the cluster's own writes (kube-system pods
    # starting) may have moved on by the second request
    assert list(table["metadata"]) == ["resourceVersion"]
    assert int(table["metadata"]["resourceVersion"]) <= int(listed["metadata"]["resourceVersion"])


def test_a_single_object_and_v1beta1(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """GET of one object is a one-row Table; meta.k8s.io/v1beta1 may be asked for too
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables)."""
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    beta = "application/json;as=Table;g=meta.k8s.io;v=v1beta1"
    status, table = get(sandbox, "/api/v1/namespaces/default/configmaps/a", beta)
    assert status == 200 and table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["metadata"] == {"resourceVersion": created.metadata.resource_version}
    assert [r["cells"][0] for r in table["rows"]] == ["a"]
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_include_object(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """includeObject=Object|Metadata|None chooses each row's object
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables)."""
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"x": "1"}})
    path = "/api/v1/namespaces/default/configmaps"
    _, full = get(sandbox, f"{path}?includeObject=Object")
    assert full["rows"][0]["object"]["data"] == {"x": "1"}
    assert full["rows"][0]["object"]["kind"] == "ConfigMap"
    _, bare = get(sandbox, f"{path}?includeObject=None")
    assert bare["rows"][0]["object"] is None
    status, body = get(sandbox, f"{path}?includeObject=Everything")
    assert status == 400 and body["message"] == 'unrecognized includeObject value: "Everything"'


def test_negotiation(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """The first acceptable media type wins; only impossible conversions are 406
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables)."""
    path = "/api/v1/namespaces/default/configmaps"
    _, plain = get(sandbox, path, "application/json")
    assert plain["kind"] == "ConfigMapList"
    _, plain = get(sandbox, path, f"application/json;q=0.5,{TABLE};q=0.9")
    assert plain["kind"] == "Table"
    _, fallback = get(sandbox, path, "application/json;as=Table;g=meta.k8s.io;v=v9,*/*")
    assert fallback["kind"] == "ConfigMapList"
    status, body = get(sandbox, path, "application/json;as=Table;g=meta.k8s.io;v=v9")
    assert (status, body["reason"]) == (406, "NotAcceptable")
    status, _ = get(sandbox, f"{path}/missing", "application/json;as=Table;g=example.com;v=v1")
    assert status == 406  # negotiation comes before the read


def test_paged_tables_keep_the_continue_token(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """``kubectl get --chunk-size`` pages Tables like lists
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    _, first = get(sandbox, "/api/v1/namespaces/default/configmaps?limit=2")
    assert [r["cells"][0] for r in first["rows"]] == ["a", "b"]
    assert first["metadata"]["continue"] and first["metadata"]["remainingItemCount"] == 2
    token = first["metadata"]["continue"]
    _, rest = get(sandbox, f"/api/v1/namespaces/default/configmaps?limit=2&continue={token}")
    assert [r["cells"][0] for r in rest["rows"]] == ["c", ROOT_CA]
    assert "continue" not in rest["metadata"]


def test_deployment_table_has_wide_columns(sandbox: SandboxHandle, apps: client.AppsV1Api) -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables:
    columns with priority 1 are the ``-o wide`` ones; the server always fills them."""
    apps.create_namespaced_deployment("default", deployment("web"))
    _, table = get(sandbox, "/apis/apps/v1/namespaces/default/deployments")
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0),
        ("Ready", 0),
        ("Up-to-date", 0),
        ("Available", 0),
        ("Age", 0),
        ("Containers", 1),
        ("Images", 1),
        ("Selector", 1),
    ]
    row = table["rows"][0]["cells"]
    assert row[0] == "web" and row[1].endswith("/2") and row[5:] == ["app", "nginx:1.25", "app=web"]


def test_kinds_without_printer_and_custom_resources(sandbox: SandboxHandle) -> None:
    """Kinds without a printer get Name/Created At; custom resources their CRD's
    additionalPrinterColumns or Age
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables,
    https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#additional-printer-columns)."""
    http(
        sandbox,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {"metadata": {"name": "r"}},
    )
    _, roles = get(sandbox, "/apis/rbac.authorization.k8s.io/v1/clusterroles/r")
    assert [c["name"] for c in roles["columnDefinitions"]] == ["Name", "Created At"]
    assert roles["columnDefinitions"][1]["type"] == "date"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", roles["rows"][0]["cells"][1])
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    columned = {
        **version,
        "name": "v2",
        "storage": False,
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
            {"name": "Missing", "type": "string", "jsonPath": ".status.nothing"},
        ],
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [version, columned],
        },
    }
    assert (
        http(sandbox, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0]
        == 201
    )
    widget = {"metadata": {"name": "w"}, "spec": {"size": 3, "color": "red"}}
    path = "/apis/example.com/v2/namespaces/default/widgets"
    assert (
        http(sandbox, "POST", path, {"apiVersion": "example.com/v2", "kind": "Widget", **widget})[0]
        == 201
    )
    _, table = get(sandbox, path)
    assert [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", 0),
        ("Size", "integer", 0),
        ("Color", "string", 1),
        ("Missing", "string", 0),
    ]
    assert table["columnDefinitions"][1]["description"] == (
        "Custom resource definition column (in JSONPath format): .spec.size"
    )
    assert table["rows"][0]["cells"] == ["w", 3, "red", None]
    _, plain = get(sandbox, "/apis/example.com/v1/namespaces/default/widgets")
    assert [c["name"] for c in plain["columnDefinitions"]] == ["Name", "Age"]
    assert AGE.match(plain["rows"][0]["cells"][1])


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_wide(sandbox: SandboxHandle, apps: client.AppsV1Api) -> None:
    """``kubectl get -o wide`` shows the priority-1 columns, plain ``get`` hides them
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables)."""
    apps.create_namespaced_deployment("default", deployment("web"))

    def header(*args: str) -> list[str]:
        out = subprocess.run(
            ["kubectl", "--kubeconfig", str(sandbox.kubeconfig), "get", "deploy", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        return out.splitlines()[0].split()

    assert header() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert header("-o", "wide")[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]


# --- pure: the printers' cells ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (185, "3m5s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (7 * 3600 + 60, "7h1m"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    """The Age cells' format (apimachinery's duration.HumanDuration)."""
    assert human_duration(seconds) == text


def test_pod_cells() -> None:
    """READY, STATUS from the kubelet's reasons, RESTARTS with the last restart, wide cells."""
    pod = kind_of("Pod")
    running: dict[str, Any] = {
        "metadata": {"name": "p", "creationTimestamp": ago(minutes=5)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.1"}],
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
                {
                    "name": "b",
                    "ready": False,
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"finishedAt": ago(seconds=30)}},
                },
            ],
        },
    }
    assert cells(pod, running) == [
        "p", "1/2", "CrashLoopBackOff", "3 (30s ago)", "5m", "10.0.0.1", "n1", "<none>", "<none>"
    ]  # fmt: skip
    init: dict[str, Any] = {
        "metadata": {"name": "i"},
        "spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "x"}, {"name": "y"}]},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "x", "state": {"terminated": {"exitCode": 0}}},
                {"name": "y", "state": {"terminated": {"exitCode": 2}}},
            ],
        },
    }
    assert cells(pod, init)[1:4] == ["0/1", "Init:ExitCode:2", "0"]
    init["status"]["initContainerStatuses"][1]["state"] = {"waiting": {"reason": "PodInitializing"}}
    assert cells(pod, init)[2] == "Init:1/2"
    gone = {**running, "metadata": {**running["metadata"], "deletionTimestamp": ago(seconds=1)}}
    assert cells(pod, gone)[2] == "Terminating"
    done: dict[str, Any] = {"metadata": {"name": "d"}, "spec": {}, "status": {"phase": "Succeeded"}}
    _, conditions = printer_for(pod)[1](done, NOW)
    assert conditions == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    gated = {"readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}]}
    status = {"conditions": [{"type": "x", "status": "True"}]}
    assert cells(pod, {"metadata": {"name": "g"}, "spec": gated, "status": status})[-1] == "1/2"


def test_workload_cells() -> None:
    """Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and CronJob rows."""
    template = {
        "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]}
    }
    selector = {
        "matchLabels": {"app": "w"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
    }
    meta = {"name": "w", "creationTimestamp": ago(hours=3)}
    spec = {"replicas": 3, "selector": selector, "template": template}
    status = {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
    obj = {"metadata": meta, "spec": spec, "status": status}
    wide = ["a,b", "x:1,y:2", "app=w,tier in (a,b)"]
    assert cells(kind_of("Deployment", "apps"), obj) == ["w", "2/3", 3, 2, "3h", *wide]
    assert cells(kind_of("ReplicaSet", "apps"), obj) == ["w", 3, 3, 2, "3h", *wide]
    assert cells(kind_of("StatefulSet", "apps"), obj) == ["w", "2/3", "3h", "a,b", "x:1,y:2"]
    ds = {"metadata": meta, "spec": {"template": template}, "status": {"numberReady": 1}}
    assert cells(kind_of("DaemonSet", "apps"), ds) == [
        "w",
        0,
        0,
        1,
        0,
        0,
        "<none>",
        "3h",
        "a,b",
        "x:1,y:2",
        "<none>",
    ]
    job = {
        "metadata": meta,
        "spec": {"completions": 2, "template": template},
        "status": {
            "succeeded": 2,
            "startTime": ago(minutes=4),
            "completionTime": ago(minutes=1),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert cells(kind_of("Job", "batch"), job)[:5] == ["w", "Complete", "2/2", "3m", "3h"]
    running = {
        "metadata": meta,
        "spec": {"parallelism": 3},
        "status": {"startTime": ago(seconds=40)},
    }
    assert cells(kind_of("Job", "batch"), running)[1:4] == ["Running", "0/1 of 3", "40s"]
    suspended = {
        "metadata": meta,
        "spec": {},
        "status": {"conditions": [{"type": "Suspended", "status": "True"}]},
    }
    assert cells(kind_of("Job", "batch"), suspended)[1:4] == ["Suspended", "0/1", ""]
    cron = {
        "metadata": meta,
        "spec": {
            "schedule": "*/5 * * * *",
            "suspend": False,
            "jobTemplate": {"spec": {"template": template}},
        },
        "status": {"active": [{"name": "j"}], "lastScheduleTime": ago(minutes=2)},
    }
    assert cells(kind_of("CronJob", "batch"), cron) == [
        "w", "*/5 * * * *", "<none>", "False", 1, "2m", "3h", "a,b", "x:1,y:2", "<none>"
    ]  # fmt: skip


def test_service_and_network_cells() -> None:
    """Service ports, external IPs per type; Ingress hosts/ports; NetworkPolicy selector."""
    svc = kind_of("Service")
    meta = {"name": "s", "creationTimestamp": ago(days=3)}
    node_port = {
        "type": "NodePort",
        "clusterIP": "10.96.0.10",
        "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
        "selector": {"b": "2", "a": "1"},
    }
    assert cells(svc, {"metadata": meta, "spec": node_port}) == [
        "s", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "3d", "a=1,b=2"
    ]  # fmt: skip
    lb = {"metadata": meta, "spec": {"type": "LoadBalancer"}, "status": {}}
    assert cells(svc, lb)[3:5] == ["<pending>", "<none>"]
    lb["status"] = {"loadBalancer": {"ingress": [{"hostname": "b.example"}, {"ip": "1.2.3.4"}]}}
    assert cells(svc, lb)[3] == "1.2.3.4,b.example"
    named = {"metadata": meta, "spec": {"type": "ExternalName", "externalName": "db.example"}}
    assert cells(svc, named)[1:4] == ["ExternalName", "<none>", "db.example"]
    ingress = {"metadata": meta, "spec": {"rules": [{"host": "a.example"}, {}], "tls": [{}]}}
    assert cells(kind_of("Ingress", "networking.k8s.io"), ingress) == [
        "s", "<none>", "a.example", "", "80, 443", "3d"
    ]  # fmt: skip
    policy = {"metadata": meta, "spec": {"podSelector": {}}}
    assert cells(kind_of("NetworkPolicy", "networking.k8s.io"), policy)[1] == "<none>"


def test_config_and_other_cells() -> None:
    """ConfigMap/Secret data counts, Namespace phase, PVC, PDB, HPA, bindings, Lease, Event."""
    meta = {"name": "o", "creationTimestamp": ago(seconds=5)}
    cm = {"metadata": meta, "data": {"a": "1"}, "binaryData": {"b": "AA=="}}
    assert cells(kind_of("ConfigMap"), cm) == ["o", 2, "5s"]
    secret = {"metadata": meta, "data": {"a": "MQ=="}, "stringData": {"b": "2"}}
    assert cells(kind_of("Secret"), secret) == ["o", "Opaque", 2, "5s"]
    ns = {"metadata": meta, "status": {"phase": "Terminating"}}
    assert cells(kind_of("Namespace"), ns) == ["o", "Terminating", "5s"]
    pvc = {
        "metadata": meta,
        "spec": {"volumeName": "pv1", "storageClassName": "fast"},
        "status": {
            "phase": "Bound",
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "capacity": {"storage": "1Gi"},
        },
    }
    assert cells(kind_of("PersistentVolumeClaim"), pvc) == [
        "o", "Bound", "pv1", "1Gi", "RWO,RWX", "fast", "<unset>", "5s", "<unset>"
    ]  # fmt: skip
    pdb = {"metadata": meta, "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}}
    assert cells(kind_of("PodDisruptionBudget", "policy"), pdb) == ["o", "50%", "N/A", 1, "5s"]
    hpa = {
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        },
        "status": {"currentReplicas": 2},
    }
    assert cells(kind_of("HorizontalPodAutoscaler", "autoscaling"), hpa) == [
        "o", "Deployment/web", "cpu: <unknown>/80%", "<unset>", 5, 2, "5s"
    ]  # fmt: skip
    v1 = {
        "metadata": meta,
        "spec": {"targetCPUUtilizationPercentage": 50, "minReplicas": 1},
        "status": {"currentCPUUtilizationPercentage": 20},
    }
    assert cells(kind_of("HorizontalPodAutoscaler", "autoscaling"), v1)[2:4] == [
        "cpu: 20%/50%",
        "1",
    ]
    binding = {
        "metadata": meta,
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "u"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
        ],
    }
    assert cells(kind_of("RoleBinding", "rbac.authorization.k8s.io"), binding) == [
        "o", "ClusterRole/view", "5s", "u", "", "ns:sa"
    ]  # fmt: skip
    lease = {"metadata": meta, "spec": {"holderIdentity": "me"}}
    assert cells(kind_of("Lease", "coordination.k8s.io"), lease) == ["o", "me", "5s"]
    event = {
        "metadata": meta,
        "type": "Normal",
        "reason": "Pulled",
        "message": " done ",
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": ago(minutes=3),
    }
    assert cells(kind_of("Event"), event) == [
        "3m", "Normal", "Pulled", "pod/p", "spec.containers{a}", "kubelet, n1", "done", "3m", 1, "o"
    ]  # fmt: skip


def test_every_builtin_kind_prints_one_cell_per_column() -> None:
    """A row never has more or fewer cells than the Table has columns."""
    for kind in BUILTIN_KINDS:
        definitions, printer = printer_for(kind)
        row, _ = printer({"metadata": {"name": "x"}}, NOW)
        assert len(row) == len(definitions), kind.kind
        assert all(
            set(c) == {"name", "type", "format", "description", "priority"} for c in definitions
        )


def test_selector_and_value_formatting() -> None:
    """FormatLabelSelector and the JSONPath printer's text for custom columns."""
    assert format_label_selector(None) == "<none>"
    assert (
        format_label_selector(
            {
                "matchExpressions": [
                    {"key": "a", "operator": "Exists"},
                    {"key": "b", "operator": "DoesNotExist"},
                    {"key": "c", "operator": "NotIn", "values": ["x"]},
                ]
            }
        )
        == "a,!b,c notin (x)"
    )
    assert (
        format_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]}) == "<error>"
    )
    assert [go_text(v) for v in ("s", True, 2.0, 2.5, None, {"b": 1, "a": [1, "x"]})] == [
        "s", "true", "2", "2.5", "<nil>", "map[a:[1 x] b:1]"
    ]  # fmt: skip


def test_table_version_rules() -> None:
    """Accept header negotiation as a pure function."""
    assert table_version("") is None
    assert table_version(KUBECTL_ACCEPT) == "v1"
    assert table_version("application/yaml," + TABLE) == "v1"
    with pytest.raises(ApiError) as e:
        table_version("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    assert e.value.code == 406


def test_to_table_of_a_list_keeps_list_metadata() -> None:
    """A Table's metadata is the list's: resourceVersion, continue, remainingItemCount."""
    listed = {
        "metadata": {"resourceVersion": "9", "continue": "t", "remainingItemCount": 4},
        "items": [{"metadata": {"name": "a"}}],
    }
    table = to_table(kind_of("ConfigMap"), listed, now=NOW)
    assert table["metadata"] == {"resourceVersion": "9", "continue": "t", "remainingItemCount": 4}
    assert table["rows"][0]["cells"] == ["a", 0, "<unknown>"]


def test_cluster_kept_and_policy_cells() -> None:
    """ReplicationController, Endpoints, EndpointSlice, ResourceQuota, PriorityClass and
    APIService rows, as ``kubectl get`` prints them (kube-apiserver's printers:
    ``formatEndpoints`` shows three addresses and counts the rest)."""
    meta = {"name": "w", "creationTimestamp": ago(minutes=5)}
    template = {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}
    rc = {
        "metadata": meta,
        "spec": {"replicas": 2, "selector": {"app": "w"}, "template": template},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    assert cells(kind_of("ReplicationController"), rc) == ["w", 2, 2, 1, "5m", "a", "x:1", "app=w"]
    addresses = [{"ip": f"10.0.0.{i}"} for i in range(1, 6)]
    endpoints = {"metadata": meta, "subsets": [{"addresses": addresses, "ports": [{"port": 80}]}]}
    assert cells(kind_of("Endpoints"), endpoints) == [
        "w",
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more...",
        "5m",
    ]
    assert cells(kind_of("Endpoints"), {"metadata": meta}) == ["w", "<none>", "5m"]
    eps = {
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        "ports": [{"port": 80}, {"port": 443}],
    }
    slice_kind = kind_of("EndpointSlice", "discovery.k8s.io")
    assert cells(slice_kind, eps) == ["w", "IPv4", "80,443", "10.0.0.1", "5m"]
    empty = {"metadata": meta, "addressType": "IPv4", "endpoints": None, "ports": None}
    assert cells(slice_kind, empty) == ["w", "IPv4", "<unset>", "<unset>", "5m"]
    quota = {
        "metadata": meta,
        "status": {
            "hard": {"pods": "4", "limits.cpu": "2", "requests.cpu": "1"},
            "used": {"pods": "1", "limits.cpu": "0", "requests.cpu": "500m"},
        },
    }
    assert cells(kind_of("ResourceQuota"), quota) == [
        "w",
        "5m",
        "pods: 1/4, requests.cpu: 500m/1",
        "limits.cpu: 0/2",
    ]
    pc = {"metadata": meta, "value": 1000, "preemptionPolicy": "Never"}
    assert cells(kind_of("PriorityClass", "scheduling.k8s.io"), pc) == [
        "w",
        1000,
        False,
        "5m",
        "Never",
    ]
    remote = {
        "metadata": meta,
        "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
        "status": {
            "conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]
        },
    }
    assert cells(kind_of("APIService", "apiregistration.k8s.io"), remote) == [
        "w",
        "kube-system/metrics-server",
        "False (MissingEndpoints)",
        "5m",
    ]
