"""What every cluster holds before anything is applied, and what keeps it there.

Pages imitated:
https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#directly-accessing-the-rest-api
(the ``default/kubernetes`` Service),
https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#root-ca-configmap
(``kube-root-ca.crt`` in every namespace),
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings
(``cluster-admin``, ``admin``, ``edit``, ``view``),
https://kubernetes.io/docs/tasks/configure-pod-container/static-pod/ (control-plane pods),
https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/ (the API server's
own Endpoints and EndpointSlice),
https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/ (the
built-in PriorityClasses),
https://kubernetes.io/docs/tasks/extend-kubernetes/configure-aggregation-layer/ (the
APIServices ``kubectl get apiservices`` lists),
https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access
(``kubectl auth can-i``).
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from reconciler.sandbox.bootstrap import CONTROL_PLANE, DEFAULT_CLUSTER_ROLES
from reconciler.sandbox.namespaces import ROOT_CA, SANDBOX_CA
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http
from tests.sandbox.test_discovery import WIDGET_CRD
from tests.sandbox.test_kubectl import KUBECTL, kubectl


def _root_ca(core: client.CoreV1Api, namespace: str) -> client.V1ConfigMap | None:
    try:
        return core.read_namespaced_config_map(ROOT_CA, namespace)
    except ApiException as e:
        assert e.status == 404
        return None


def test_the_kubernetes_service_is_there_and_comes_back(core: client.CoreV1Api) -> None:
    service = core.read_namespaced_service("kubernetes", "default")
    assert service.spec.cluster_ip == "10.96.0.1"
    assert [(p.name, p.port, p.target_port) for p in service.spec.ports] == [("https", 443, 6443)]
    assert service.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
    core.delete_namespaced_service("kubernetes", "default")
    again = eventually(lambda: core.read_namespaced_service("kubernetes", "default"))
    assert again.metadata.uid != service.metadata.uid
    assert again.spec.cluster_ip == "10.96.0.1"


def test_every_namespace_has_the_root_ca(core: client.CoreV1Api) -> None:
    names = [ns.metadata.name for ns in core.list_namespace().items]
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= set(names)
    for name in names:
        found = _root_ca(core, name)
        assert found is not None and found.data == {"ca.crt": SANDBOX_CA}
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="fresh")))
    created = eventually(lambda: _root_ca(core, "fresh"))
    assert created.metadata.annotations["kubernetes.io/description"].startswith(
        "Contains a CA bundle"
    )
    fields = {(f.manager, f.operation) for f in created.metadata.managed_fields}
    assert fields == {("kube-controller-manager", "Update")}


def test_the_root_ca_is_recreated_and_restored(core: client.CoreV1Api) -> None:
    first = _root_ca(core, "default")
    assert first is not None
    core.delete_namespaced_config_map(ROOT_CA, "default")
    recreated = eventually(lambda: _root_ca(core, "default"))
    assert recreated.metadata.uid != first.metadata.uid
    core.patch_namespaced_config_map(ROOT_CA, "default", {"data": {"ca.crt": "mine"}})
    eventually(lambda: (_root_ca(core, "default") or recreated).data == {"ca.crt": SANDBOX_CA})


def test_the_default_cluster_roles(api_client: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    roles = {r.metadata.name: r for r in rbac.list_cluster_role().items}
    for name in DEFAULT_CLUSTER_ROLES:
        assert roles[name].metadata.labels == {"kubernetes.io/bootstrapping": "rbac-defaults"}
    admin = roles["cluster-admin"]
    assert (admin.rules[0].api_groups, admin.rules[0].resources) == (["*"], ["*"])
    assert admin.aggregation_rule is None
    selector = roles["view"].aggregation_rule.cluster_role_selectors[0]
    assert selector.match_labels == {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
    binding = rbac.read_cluster_role_binding("cluster-admin")
    assert binding.role_ref.name == "cluster-admin"
    assert [(s.kind, s.name) for s in binding.subjects] == [("Group", "system:masters")]


def test_control_plane_pods_run_in_kube_system(core: client.CoreV1Api) -> None:
    def running() -> list[client.V1Pod]:
        pods = core.list_namespaced_pod("kube-system").items
        if len(pods) == len(CONTROL_PLANE) and all(p.status.phase == "Running" for p in pods):
            return pods
        return []

    pods = eventually(running, timeout=30)
    node = core.read_node(pods[0].spec.node_name)
    assert sorted(p.metadata.labels["component"] for p in pods) == sorted(CONTROL_PLANE)
    for pod in pods:
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.uid) == (
            "Node",
            node.metadata.name,
            node.metadata.uid,
        )
        assert pod.metadata.annotations["kubernetes.io/config.source"] == "file"
    # nothing of the system shows up in a namespace of one's own
    assert core.list_namespaced_pod("default").items == []


def test_the_api_server_endpoints_are_there_and_come_back(dyn: DynamicClient) -> None:
    endpoints = dyn.resources.get(api_version="v1", kind="Endpoints")
    slices = dyn.resources.get(api_version="discovery.k8s.io/v1", kind="EndpointSlice")
    ep = endpoints.get(name="kubernetes", namespace="default")
    node_ip = ep.subsets[0].addresses[0].ip
    assert [(p.name, p.port) for p in ep.subsets[0].ports] == [("https", 6443)]
    assert ep.metadata.labels["endpointslice.kubernetes.io/skip-mirror"] == "true"
    eps = slices.get(name="kubernetes", namespace="default")
    assert eps.addressType == "IPv4"
    assert eps.endpoints[0].addresses == [node_ip] and eps.endpoints[0].conditions.ready
    assert eps.metadata.labels.to_dict() == {"kubernetes.io/service-name": "kubernetes"}
    endpoints.delete(name="kubernetes", namespace="default")
    slices.delete(name="kubernetes", namespace="default")
    again = eventually(lambda: endpoints.get(name="kubernetes", namespace="default"))
    assert again.metadata.uid != ep.metadata.uid
    assert eventually(lambda: slices.get(name="kubernetes", namespace="default"))


def test_the_system_priority_classes(api_client: client.ApiClient) -> None:
    scheduling = client.SchedulingV1Api(api_client)
    classes = {pc.metadata.name: pc for pc in scheduling.list_priority_class().items}
    assert classes["system-cluster-critical"].value == 2000000000
    assert classes["system-node-critical"].value == 2000001000
    assert classes["system-node-critical"].preemption_policy == "PreemptLowerPriority"
    with pytest.raises(ApiException) as refused:
        scheduling.delete_priority_class("system-node-critical")
    assert refused.value.status == 403
    assert "this is a system priority class and cannot be deleted" in refused.value.body
    # the control plane's pods got their class's priority at admission
    pods = eventually(lambda: client.CoreV1Api(api_client).list_namespaced_pod("kube-system").items)
    assert {p.spec.priority for p in pods} == {2000001000}


def test_apiservices_list_the_served_groups(sandbox: SandboxHandle) -> None:
    status, listed = http(sandbox, "GET", "/apis/apiregistration.k8s.io/v1/apiservices")
    assert status == 200
    by_name = {a["metadata"]["name"]: a for a in listed["items"]}
    assert {"v1.", "v1.apps", "v2.autoscaling", "v1.discovery.k8s.io"} <= set(by_name)
    apps = by_name["v1.apps"]
    assert apps["spec"] == {
        "group": "apps",
        "version": "v1",
        "groupPriorityMinimum": 17800,
        "versionPriority": 15,
    }
    assert apps["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    available = apps["status"]["conditions"][0]
    assert (available["type"], available["status"], available["reason"]) == (
        "Available",
        "True",
        "Local",
    )
    assert by_name["v1."]["spec"] == {
        "version": "v1",
        "groupPriorityMinimum": 18000,
        "versionPriority": 1,
    }


def test_a_crd_group_gets_its_apiservice_while_served(sandbox: SandboxHandle) -> None:
    path = "/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com"
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert http(sandbox, "POST", crds, WIDGET_CRD)[0] == 201
    status, service = http(sandbox, "GET", path)
    assert status == 200
    assert service["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert (service["spec"]["groupPriorityMinimum"], service["spec"]["versionPriority"]) == (
        1000,
        100,
    )
    assert http(sandbox, "DELETE", f"{crds}/widgets.example.com")[0] == 200
    eventually(lambda: http(sandbox, "GET", path)[0] == 404)


def test_access_reviews_answer_for_the_sandbox_admin(sandbox: SandboxHandle) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "resource": "pods", "namespace": "x"}},
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    status, answer = http(sandbox, "POST", path, review)
    assert status == 201 and answer["status"]["allowed"] is True
    assert answer["spec"] == review["spec"]
    # answered, never stored: nothing to list or get
    assert http(sandbox, "GET", path)[0] == 405
    status, refused = http(sandbox, "POST", path, {**review, "spec": {}})
    assert status == 422
    assert refused["details"]["causes"][0]["field"] == "spec.resourceAttributes"
    rules_path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    rules = {"kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}
    status, answer = http(sandbox, "POST", rules_path, rules)
    assert status == 201 and answer["status"]["incomplete"] is False
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    assert everything in answer["status"]["resourceRules"]
    # the rules follow the stored RBAC objects: without the binding, no cluster-admin rules
    crb = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin"
    assert http(sandbox, "DELETE", crb)[0] == 200
    _, answer = http(sandbox, "POST", rules_path, rules)
    assert everything not in answer["status"]["resourceRules"]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_auth_can_i_and_get_apiservices(sandbox: SandboxHandle) -> None:
    can = kubectl(sandbox, "auth", "can-i", "create", "deployments", "-n", "default")
    assert (can.returncode, can.stdout.strip()) == (0, "yes"), can.stderr
    rules = kubectl(sandbox, "auth", "can-i", "--list", "-n", "default")
    assert rules.returncode == 0, rules.stderr
    assert ["*.*", "[]", "[]", "[*]"] in [line.split() for line in rules.stdout.splitlines()]
    listed = kubectl(sandbox, "get", "apiservices")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert any(row.split()[:3] == ["v1.apps", "Local", "True"] for row in rows)
    classes = kubectl(sandbox, "get", "priorityclasses")
    assert classes.stdout.splitlines()[0].split() == [
        "NAME",
        "VALUE",
        "GLOBAL-DEFAULT",
        "AGE",
        "PREEMPTIONPOLICY",
    ]
