"""LoadBalancer Services: ``<pending>`` without a cloud, an ingress address with one.

Imitates https://kubernetes.io/docs/concepts/services-networking/service/#loadbalancer
and https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/:
the cloud's service controller writes ``status.loadBalancer.ingress``; a cluster with
no cloud (kind, minikube without MetalLB) never does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from reconciler.sandbox.testing import running_sandbox
from reconciler.sandbox.timing import Timing
from tests.sandbox.helpers import eventually, manifest
from tests.sandbox.test_command import start
from tests.sandbox.test_endpoints import endpoints_of
from tests.sandbox.test_storage import bound, claim

NS = "default"


def service(name: str, kind: str = "LoadBalancer", **spec: Any) -> dict[str, Any]:
    body = {"type": kind, "selector": {"app": name}, "ports": [{"port": 80}], **spec}
    return manifest("v1", "Service", name, spec=body)


def ingress(core: client.CoreV1Api, name: str) -> list[str]:
    found = core.read_namespaced_service(name, NS).status.load_balancer.ingress or []
    return [i.ip for i in found]


def reasons(core: client.CoreV1Api, name: str) -> list[str]:
    listed = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
    return [e.reason for e in listed.items]


@pytest.fixture
def cloud() -> Iterator[client.CoreV1Api]:
    """A sandbox started as with ``--load-balancer-ips 172.18.255.200/30``."""
    timing = Timing(controller_delay=0.05, load_balancer_ips="172.18.255.200/30")
    with running_sandbox(timing=timing) as handle:
        api = config.new_client_from_config(str(handle.kubeconfig))
        yield client.CoreV1Api(api)
        api.close()


def test_without_a_cloud_a_load_balancer_stays_pending(core: client.CoreV1Api) -> None:
    core.create_namespaced_service(NS, service("web"))
    # a claim made later and bound since: the controllers have had their turn
    core.create_namespaced_persistent_volume_claim(NS, claim("probe"))
    eventually(lambda: bound(core, "probe"))
    read = core.read_namespaced_service("web", NS)
    assert read.spec.cluster_ip and read.spec.ports[0].node_port
    assert not read.status.load_balancer.ingress
    assert "EnsuringLoadBalancer" not in reasons(core, "web")


def test_a_cloud_gives_each_load_balancer_a_free_address(cloud: client.CoreV1Api) -> None:
    cloud.create_namespaced_service(NS, service("a"))
    cloud.create_namespaced_service(NS, service("b"))
    first = eventually(lambda: ingress(cloud, "a"))
    second = eventually(lambda: ingress(cloud, "b"))
    assert {*first, *second} == {"172.18.255.201", "172.18.255.202"}
    assert {"EnsuringLoadBalancer", "EnsuredLoadBalancer"} <= set(reasons(cloud, "a"))


def test_a_requested_address_is_honoured(cloud: client.CoreV1Api) -> None:
    cloud.create_namespaced_service(NS, service("pinned", loadBalancerIP="172.18.255.202"))
    assert eventually(lambda: ingress(cloud, "pinned")) == ["172.18.255.202"]


def test_a_used_up_range_is_a_warning_and_no_address(cloud: client.CoreV1Api) -> None:
    for name in ("a", "b"):
        cloud.create_namespaced_service(NS, service(name))
        eventually(lambda name=name: ingress(cloud, name))
    cloud.create_namespaced_service(NS, service("c"))
    eventually(lambda: "SyncLoadBalancerFailed" in reasons(cloud, "c"))
    assert ingress(cloud, "c") == []


def test_a_service_that_stops_being_a_load_balancer_loses_its_address(
    cloud: client.CoreV1Api,
) -> None:
    cloud.create_namespaced_service(NS, service("web"))
    eventually(lambda: ingress(cloud, "web"))
    cloud.patch_namespaced_service("web", NS, {"spec": {"type": "ClusterIP"}})
    eventually(lambda: ingress(cloud, "web") == [])
    assert cloud.read_namespaced_service("web", NS).spec.type == "ClusterIP"


def test_a_load_balancer_still_gets_its_endpoints(cloud: client.CoreV1Api) -> None:
    """Both controllers of a Service run on it: the endpoints controller
    (https://kubernetes.io/docs/concepts/services-networking/service/#endpoints) and
    the cloud's service controller, neither seeing the other's edits of its copy."""
    cloud.create_namespaced_service(NS, service("web"))
    assert eventually(lambda: ingress(cloud, "web"))
    assert eventually(lambda: endpoints_of(cloud, "web")) is not None


def test_other_services_get_no_address(cloud: client.CoreV1Api) -> None:
    cloud.create_namespaced_service(NS, service("inside", "ClusterIP"))
    cloud.create_namespaced_service(NS, service("lb"))
    eventually(lambda: ingress(cloud, "lb"))
    assert ingress(cloud, "inside") == []


def test_the_option_reaches_the_simulated_cluster() -> None:
    from reconciler.cli import build_parser
    from reconciler.commands.sandbox import timing_of

    parsed = build_parser().parse_args(["sandbox", "--load-balancer-ips", "10.0.0.0/24"])
    assert timing_of(parsed).load_balancer_ips == "10.0.0.0/24"
    assert timing_of(build_parser().parse_args(["sandbox"])).load_balancer_ips is None


def test_a_bad_range_is_a_usage_error() -> None:
    proc = start("--load-balancer-ips", "10.0.0.0/99")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "--load-balancer-ips '10.0.0.0/99' is not a CIDR" in err
    with pytest.raises(ValueError, match="expected a CIDR"):
        Timing(load_balancer_ips="nope")
