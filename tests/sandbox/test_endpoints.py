"""Endpoints and EndpointSlices kept for every Service with a selector.

Imitates https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/ and
https://kubernetes.io/docs/concepts/services-networking/service/#services-without-selectors:
the control plane lists the IPs of the pods a Service selects, ready ones as
``addresses`` (slice condition ``ready: true``) and the others as ``notReadyAddresses``
(``ready: false``), with the Service's ports resolved against each pod (a named
``targetPort`` is the container port of that name); the slices carry
``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by``, and are
owned by the Service. A Service without a selector gets nothing: Endpoints written for
it are the user's and stay as written.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from reconciler.sandbox.endpoints import MANAGED_BY, SERVICE_NAME, SLICE_CONTROLLER, LabelIndex
from reconciler.sandbox.pods import FAIL_ANNOTATION
from tests.sandbox.helpers import deployment, eventually, manifest
from tests.sandbox.workloads import fast_sandbox


def _service(name: str, selector: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": "web"}]}
    if selector is not None:
        spec["selector"] = selector
    return manifest("v1", "Service", name, spec=spec)


def _app(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment whose pods carry ``svc: <name>`` and serve port ``web`` (8080)."""
    body = deployment(name, replicas=replicas)
    template = body["spec"]["template"]
    template["metadata"]["labels"]["svc"] = name
    template["spec"]["containers"][0]["ports"] = [{"name": "web", "containerPort": 8080}]
    return body


def _failing_pod(name: str, svc: str) -> dict[str, Any]:
    """A bare pod the Service selects that never becomes ready."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"svc": svc},
            "annotations": {FAIL_ANNOTATION: "true"},
        },
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx", "ports": [{"name": "web", "containerPort": 9090}]}
            ]
        },
    }


def endpoints_of(core: client.CoreV1Api, name: str) -> Any:
    """The Endpoints ``name`` in ``default``, None while there are none."""
    try:
        return core.read_namespaced_endpoints(name, "default")
    except ApiException as e:
        assert e.status == 404
        return None


def _slices(dyn: DynamicClient, service: str) -> list[Any]:
    slices = dyn.resources.get(api_version="discovery.k8s.io/v1", kind="EndpointSlice")
    return list(slices.get(namespace="default", label_selector=f"{SERVICE_NAME}={service}").items)


def test_endpoints_follow_the_ready_pods_a_service_selects() -> None:
    with fast_sandbox() as (_sandbox, api):
        core, apps, dyn = client.CoreV1Api(api), client.AppsV1Api(api), DynamicClient(api)
        core.create_namespaced_service("default", _service("web", {"svc": "web"}))
        # no pods yet: an Endpoints without subsets and one placeholder slice
        empty = eventually(lambda: endpoints_of(core, "web"))
        assert empty.subsets is None
        placeholder = eventually(lambda: _slices(dyn, "web"))[0]
        assert placeholder.endpoints is None and placeholder.ports is None

        apps.create_namespaced_deployment("default", _app("web", 2))

        def ready_addresses(count: int) -> Any:
            ep = core.read_namespaced_endpoints("web", "default")
            subsets = ep.subsets or []
            if len(subsets) == 1 and len(subsets[0].addresses or []) == count:
                return None if subsets[0].not_ready_addresses else ep
            return None

        ep = eventually(lambda: ready_addresses(2))
        pods = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
        subset = ep.subsets[0]
        assert [(p.name, p.port, p.protocol) for p in subset.ports] == [("http", 8080, "TCP")]
        for address in subset.addresses:
            pod = pods[address.target_ref.name]
            assert (address.ip, address.node_name) == (pod.status.pod_ip, pod.spec.node_name)
            assert (address.target_ref.kind, address.target_ref.uid) == ("Pod", pod.metadata.uid)

        def slice_with(count: int) -> Any:
            found = [s for s in _slices(dyn, "web") if len(s.endpoints or []) == count]
            return (
                found[0] if found and all(e.conditions.ready for e in found[0].endpoints) else None
            )

        eps = eventually(lambda: slice_with(2))
        assert len(_slices(dyn, "web")) == 1  # the placeholder made way
        # ... by becoming the first real slice: the EndpointSlice controller turns a
        # create and a delete into an update of the slice it would delete (its
        # reconciler's ``finalize``; the slices it keeps up to date as pods change:
        # https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/)
        assert (eps.metadata.name, eps.metadata.uid) == (
            placeholder.metadata.name,
            placeholder.metadata.uid,
        )
        assert eps.addressType == "IPv4"
        assert [(p.name, p.port) for p in eps.ports] == [("http", 8080)]
        assert eps.metadata.labels[MANAGED_BY] == SLICE_CONTROLLER
        owner = eps.metadata.ownerReferences[0]
        service = core.read_namespaced_service("web", "default")
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "Service",
            "web",
            service.metadata.uid,
            True,
        )

        # a selected pod that never becomes ready is listed as not ready; it serves the
        # named port elsewhere, so it stands in a subset and a slice of its own
        core.create_namespaced_pod("default", _failing_pod("broken", "web"))

        def not_ready_listed() -> Any:
            subsets = core.read_namespaced_endpoints("web", "default").subsets or []
            for subset in subsets:
                for address in subset.not_ready_addresses or []:
                    if address.target_ref.name == "broken":
                        return [p.port for p in subset.ports] == [9090]
            return False

        eventually(not_ready_listed)
        eventually(
            lambda: any(
                (e.targetRef.name, e.conditions.ready, e.conditions.terminating)
                == ("broken", False, False)
                for s in _slices(dyn, "web")
                for e in s.endpoints or []
            )
        )
        assert len(_slices(dyn, "web")) == 2

        # the Service goes: its Endpoints and (by garbage collection) its slices go too
        core.delete_namespaced_service("web", "default")
        eventually(
            lambda: (
                not core.list_namespaced_endpoints(
                    "default", field_selector="metadata.name=web"
                ).items
            )
        )
        eventually(lambda: not _slices(dyn, "web"))


def test_a_pod_relabelled_out_of_the_selector_leaves() -> None:
    with fast_sandbox() as (_sandbox, api):
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        core.create_namespaced_service("default", _service("web", {"tier": "front"}))
        body = _app("web", 1)
        body["spec"]["template"]["metadata"]["labels"]["tier"] = "front"
        apps.create_namespaced_deployment("default", body)

        def addresses() -> list[Any]:
            subsets = (endpoints_of(core, "web") or client.V1Endpoints()).subsets or []
            return [a for s in subsets for a in s.addresses or []]

        listed = eventually(addresses)[0]
        core.patch_namespaced_pod(
            listed.target_ref.name, "default", {"metadata": {"labels": {"tier": "back"}}}
        )
        # the relabelled pod leaves (it is still its ReplicaSet's, whose selector is
        # app=web), and comes back with its label
        eventually(lambda: not addresses())
        core.patch_namespaced_pod(
            listed.target_ref.name, "default", {"metadata": {"labels": {"tier": "front"}}}
        )
        eventually(lambda: [a.target_ref.name for a in addresses()] == [listed.target_ref.name])


def test_a_service_without_a_selector_keeps_the_users_endpoints() -> None:
    with fast_sandbox() as (_sandbox, api):
        core, dyn = client.CoreV1Api(api), DynamicClient(api)
        core.create_namespaced_service("default", _service("external", None))
        mine = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "external"},
            "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 5432}]}],
        }
        core.create_namespaced_endpoints("default", mine)
        # a selected Service in the same namespace gets its Endpoints meanwhile
        core.create_namespaced_service("default", _service("selected", {"app": "x"}))
        eventually(lambda: endpoints_of(core, "selected"))
        kept = core.read_namespaced_endpoints("external", "default")
        assert kept.subsets[0].addresses[0].ip == "192.0.2.10"
        assert kept.metadata.managed_fields[0].manager != "kube-controller-manager"
        assert not _slices(dyn, "external")
        # the Endpoints of a deleted Service go, whoever wrote them
        core.delete_namespaced_service("external", "default")
        eventually(lambda: endpoints_of(core, "external") is None)


def test_the_label_index_finds_candidates_and_forgets() -> None:
    """The controller's index narrows a sync to the pods (or Services) that can match."""
    index = LabelIndex()
    assert index.update("ns", "a", {"app": "web", "tier": "front"}) == {}
    index.update("ns", "b", {"app": "web"})
    index.update("other", "c", {"app": "web"})
    assert index.having("ns", {"tier": "front"}) == {"a"}
    assert index.having("ns", {"app": "web", "tier": "front"}) == {"a", "b"}
    assert index.fewest("ns", {"app": "web", "tier": "front"}) == {"a"}
    assert index.update("ns", "a", {"app": "web"}) == {"app": "web", "tier": "front"}
    assert index.fewest("ns", {"app": "web", "tier": "front"}) == set()
    index.update("ns", "b", None)
    assert index.having("ns", {"app": "web"}) == {"a"}
