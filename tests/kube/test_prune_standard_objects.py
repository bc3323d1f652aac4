"""A prune deletes what its inventory lists, never what the cluster itself keeps.

Every cluster holds the ``default/kubernetes`` Service with its Endpoints and
EndpointSlice, ``kube-root-ca.crt`` in each namespace, the default ClusterRoles, the
system PriorityClasses, the APIServices of its groups and the control plane's pods
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings,
https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#root-ca-configmap,
https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/,
https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/);
the sandbox serves them too, so these tests hold on a real cluster and on the sandbox.
The Endpoints and EndpointSlices the control plane keeps for an instance's Service carry
the Service's labels, the instance's among them: they are still not the instance's.
"""

from __future__ import annotations

from reconciler.kube import LiveState, remove_instance
from reconciler.model.changeset import Action, ObjectRef
from tests.kube.conftest import Backend, configmap, deployment, labels
from tests.kube.test_apply import run
from tests.sandbox.helpers import eventually

STANDARD = (
    ObjectRef("v1", "Service", "default", "kubernetes"),
    ObjectRef("v1", "ConfigMap", "default", "kube-root-ca.crt"),
    ObjectRef("v1", "ConfigMap", "kube-system", "kube-root-ca.crt"),
    ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "cluster-admin"),
    ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin"),
    ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "edit"),
    ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "view"),
    ObjectRef("v1", "Endpoints", "default", "kubernetes"),
    ObjectRef("discovery.k8s.io/v1", "EndpointSlice", "default", "kubernetes"),
    ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", "system-cluster-critical"),
    ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", "system-node-critical"),
    ObjectRef("apiregistration.k8s.io/v1", "APIService", "", "v1.apps"),
)


def uids(backend: Backend, refs: tuple[ObjectRef, ...]) -> dict[ObjectRef, str]:
    found = {}
    for ref in refs:
        live = backend.client.get(ref)
        assert live is not None, f"{ref} is missing"
        found[ref] = live["metadata"]["uid"]
    return found


def test_prune_and_uninstall_leave_the_standard_objects(backend: Backend) -> None:
    before = uids(backend, STANDARD)
    ns = backend.namespace("web")
    objects = [configmap("a", ns, "web"), configmap("b", ns, "web"), deployment("d", ns, "web")]
    assert run(backend, "web", ns, objects).ok
    namespace_ca = ObjectRef("v1", "ConfigMap", ns, "kube-root-ca.crt")
    ca_uid = uids(backend, (namespace_ca,))
    # a prune: two objects leave Git
    pruned = run(backend, "web", ns, [configmap("a", ns, "web")])
    assert pruned.ok, pruned.message
    deleted = {e.name for e in pruned.changes.entries if e.action is Action.DELETED}
    assert deleted == {"b", "d"}
    assert uids(backend, (namespace_ca,)) == ca_uid  # the instance's own namespace too
    # an uninstall: everything the inventory lists goes
    live = LiveState(backend.client, backend.cluster)
    inventory = live.inventory("web")
    assert inventory is not None
    changes, reason, message = remove_instance(backend.client, live, inventory)
    assert reason is None, message
    assert {e.name for e in changes.entries if e.action is Action.DELETED} >= {"a"}
    assert uids(backend, STANDARD) == before


def test_the_cluster_s_own_pods_are_never_pruned(backend: Backend) -> None:
    ns = backend.namespace("web")
    system_pods = {
        p["metadata"]["uid"] for p in backend.client.list("v1", "Pod", namespace="kube-system")
    }
    assert system_pods, "every cluster runs pods in kube-system"
    assert run(backend, "web", ns, [deployment("d", ns, "web")]).ok
    assert run(backend, "web", ns, [configmap("a", ns, "web")]).ok  # the Deployment is pruned
    still = {
        p["metadata"]["uid"] for p in backend.client.list("v1", "Pod", namespace="kube-system")
    }
    assert system_pods <= still


def test_the_endpoints_of_an_instance_s_service_are_not_the_instance_s(backend: Backend) -> None:
    ns = backend.namespace("web")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "d", "namespace": ns, "labels": labels("web")},
        "spec": {"selector": {"app": "d"}, "ports": [{"port": 80, "targetPort": 9898}]},
    }
    assert run(
        backend, "web", ns, [service, deployment("d", ns, "web"), configmap("a", ns, "web")]
    ).ok
    endpoints = ObjectRef("v1", "Endpoints", ns, "d")
    kept = eventually(lambda: backend.client.get(endpoints))
    assert kept["metadata"]["labels"] == labels("web")  # the Service's, copied
    # a prune of something else leaves them; so does a second pass
    pruned = run(backend, "web", ns, [service, deployment("d", ns, "web")])
    assert pruned.ok, pruned.message
    assert {(e.kind, e.name) for e in pruned.changes.entries if e.action is Action.DELETED} == {
        ("ConfigMap", "a")
    }
    again = backend.client.get(endpoints)
    assert again is not None and again["metadata"]["uid"] == kept["metadata"]["uid"]
