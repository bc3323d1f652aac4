"""The objects every cluster has before anyone applies anything, which no prune may touch.

A tool that lists "everything in the cluster" meets these on a real cluster, so the
sandbox serves them too:

* the ``default/kubernetes`` Service, which kube-apiserver creates at start and keeps
  (recreated when deleted): https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#directly-accessing-the-rest-api;
* the default user-facing ClusterRoles ``cluster-admin``, ``admin``, ``edit`` and
  ``view`` (the last three aggregated), labelled ``kubernetes.io/bootstrapping:
  rbac-defaults``, and the ``cluster-admin`` binding of ``system:masters``:
  https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings;
* the default StorageClass ``standard`` (``storage.py``), as kind and minikube install one:
  https://kubernetes.io/docs/concepts/storage/storage-classes/#default-storageclass;
* the control plane's static pods in ``kube-system``, mirrored by the kubelet and owned
  by their Node: https://kubernetes.io/docs/tasks/configure-pod-container/static-pod/;
* the Endpoints and EndpointSlice ``default/kubernetes``, which kube-apiserver keeps
  pointing at itself (its Service has no selector, so no controller fills them):
  https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/;
* the built-in PriorityClasses (``priorities.py``) and the APIServices of the served
  groups (``apiservices.py``).

``namespaces.py`` keeps what every namespace holds (``default`` ServiceAccount,
``kube-root-ca.crt``). ``server.py`` calls :func:`create_standard_objects` once the
nodes exist.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apiservices import APIServices
from reconciler.sandbox.kinds import ENDPOINT_SLICES, ENDPOINTS, NODES, SERVICES
from reconciler.sandbox.kubelet import MIRROR
from reconciler.sandbox.priorities import SYSTEM_CLASSES, system_class
from reconciler.sandbox.storage import default_storage_class
from reconciler.sandbox.store import Resource, StoredEvent

APISERVER = WriteOptions("kube-apiserver")
KUBERNETES_SERVICE = ("default", "kubernetes")
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
DEFAULT_CLUSTER_ROLES = ("cluster-admin", "admin", "edit", "view")
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
_API_SERVER_ENDPOINTS: tuple[Resource, ...] = (ENDPOINTS, ENDPOINT_SLICES)
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def kubernetes_service() -> dict[str, Any]:
    """The Service in front of the API server: first IP of the range, 443 to 6443."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.96.0.1",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "sessionAffinity": "None",
        },
    }


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _cluster_roles() -> list[dict[str, Any]]:
    """cluster-admin grants everything; admin, edit and view aggregate labelled roles (their
    rules here are the core of what the aggregated defaults grant)."""
    workloads = ["deployments", "replicasets", "statefulsets", "daemonsets"]
    view = [
        _rule(
            [""], ["configmaps", "pods", "services", "endpoints", "persistentvolumeclaims"], _READ
        ),
        _rule(["apps"], workloads, _READ),
        _rule(["batch"], ["jobs", "cronjobs"], _READ),
    ]
    edit = [
        _rule([""], ["configmaps", "pods", "services", "secrets", "serviceaccounts"], _WRITE),
        _rule(["apps"], workloads, _WRITE),
        _rule(["batch"], ["jobs", "cronjobs"], _WRITE),
        *view,
    ]
    admin = [*edit, _rule(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], [*_WRITE])]
    roles: list[dict[str, Any]] = [
        {
            "metadata": {"name": "cluster-admin"},
            "rules": [
                _rule(["*"], ["*"], ["*"]),
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        }
    ]
    for name, rules in (("admin", admin), ("edit", edit), ("view", view)):
        selector = {"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{name}": "true"}}
        roles.append(
            {
                "metadata": {"name": name},
                "aggregationRule": {"clusterRoleSelectors": [selector]},
                "rules": rules,
            }
        )
    for role in roles:
        role.update(apiVersion="rbac.authorization.k8s.io/v1", kind="ClusterRole")
        role["metadata"].update(labels=dict(BOOTSTRAP_LABELS), annotations=dict(_AUTOUPDATE))
    return roles


def _cluster_admin_binding() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": "cluster-admin",
            "labels": dict(BOOTSTRAP_LABELS),
            "annotations": dict(_AUTOUPDATE),
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}
        ],
    }


def static_pod(component: str, node: dict[str, Any]) -> dict[str, Any]:
    """A control-plane component's mirror pod, as kubeadm's manifests make them."""
    name = node["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{component}-{name}",
            "namespace": "kube-system",
            "labels": {"component": component, "tier": "control-plane"},
            "annotations": {
                MIRROR: component,
                "kubernetes.io/config.source": "file",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": name,
                    "uid": node["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": name,
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "containers": [{"name": component, "image": f"registry.k8s.io/{component}:v1.30.0"}],
        },
    }


def _node_ip(node: dict[str, Any] | None) -> str:
    for address in ((node or {}).get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return "172.18.0.2"


def kubernetes_endpoints(ip: str) -> list[dict[str, Any]]:
    """The API server's own Endpoints and EndpointSlice: its address, port 6443."""
    port = {"name": "https", "port": 6443, "protocol": "TCP"}
    meta = {"name": "kubernetes", "namespace": "default"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {**meta, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [port]}],
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {**meta, "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
            "ports": [port],
        },
    ]


class StandardObjects:
    """Creates the standard objects and, as kube-apiserver does, recreates its Service."""

    def __init__(self, api: SandboxApi) -> None:
        self.api = api
        self._ip = _node_ip(None)

    def _create(self, body: dict[str, Any], options: WriteOptions = APISERVER) -> None:
        kind = self.api.kinds.by_kind(body["apiVersion"], body["kind"])
        assert kind is not None
        namespace = body["metadata"].get("namespace", "")
        if self.api.store.get(kind.resource, namespace, body["metadata"]["name"]) is None:
            self.api.create(kind, namespace, body, options)

    def create_standard_objects(self) -> None:
        for name in SYSTEM_CLASSES:
            self._create(system_class(name))
        APIServices(self.api).start()
        self._create(kubernetes_service())
        for role in _cluster_roles():
            self._create(role)
        self._create(_cluster_admin_binding())
        self._create(default_storage_class(), WriteOptions("addon-manager"))
        nodes = self.api.store.list(NODES)
        self._ip = _node_ip(nodes[0] if nodes else None)
        for body in kubernetes_endpoints(self._ip):
            self._create(body)
        if nodes:
            for component in CONTROL_PLANE:
                self._create(static_pod(component, nodes[0]), WriteOptions("kubelet"))
        self.api.store.listeners.append(self._on_event)

    def _on_event(self, event: StoredEvent) -> None:
        if event.type != "DELETED" or (event.namespace, event.obj["metadata"]["name"]) != (
            KUBERNETES_SERVICE
        ):
            return
        if event.resource == SERVICES:
            self._create(kubernetes_service())
        elif event.resource in _API_SERVER_ENDPOINTS:
            for body in kubernetes_endpoints(self._ip):
                self._create(body)
