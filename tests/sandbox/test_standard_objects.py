"""What every cluster holds before anything is applied, and what keeps it there.

Pages imitated:
https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#directly-accessing-the-rest-api
(the ``default/kubernetes`` Service),
https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#root-ca-configmap
(``kube-root-ca.crt`` in every namespace),
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings
(``cluster-admin``, ``admin``, ``edit``, ``view``),
https://kubernetes.io/docs/tasks/configure-pod-container/static-pod/ (control-plane pods).
"""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.sandbox.bootstrap import CONTROL_PLANE, DEFAULT_CLUSTER_ROLES
from reconciler.sandbox.namespaces import ROOT_CA, SANDBOX_CA
from tests.sandbox.helpers import eventually


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
