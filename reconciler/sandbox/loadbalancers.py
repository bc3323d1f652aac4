"""A simulated cloud load balancer: ``type: LoadBalancer`` Services get an ingress IP.

On a cloud, the cloud controller manager's service controller asks the provider for a
load balancer and writes its address to ``status.loadBalancer.ingress``
(https://kubernetes.io/docs/concepts/services-networking/service/#loadbalancer,
https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/).
A cluster without one (kind or minikube without MetalLB, bare metal) leaves the
status empty for ever, and ``kubectl get svc`` shows ``EXTERNAL-IP <pending>``.

The sandbox is that second kind of cluster unless ``reconciler sandbox
--load-balancer-ips CIDR`` (``Timing.load_balancer_ips``) is given; then
:class:`LoadBalancers` plays the cloud: each LoadBalancer Service gets the free
address of the range it asked for (``spec.loadBalancerIP``) or the lowest free one,
with the events ``EnsuringLoadBalancer`` and ``EnsuredLoadBalancer``
(``SyncLoadBalancerFailed`` when the range is used up); a Service that stops being
a LoadBalancer loses its ingress.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from reconciler.sandbox.controlplane import ControlPlane
from reconciler.sandbox.events import NORMAL, WARNING
from reconciler.sandbox.kinds import SERVICES

SERVICE_CONTROLLER = "service-controller"


def ingress_ips(service: dict[str, Any]) -> list[str]:
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
    return [str(i.get("ip")) for i in ingress if isinstance(i, dict) and i.get("ip")]


class LoadBalancers:
    """The cloud's service controller, handing out addresses of one range."""

    def __init__(self, plane: ControlPlane, cidr: str) -> None:
        self.plane = plane
        self.network = ipaddress.ip_network(cidr, strict=False)

    def reconcile(self, service: dict[str, Any]) -> float | None:
        spec = service.get("spec") or {}
        status = dict(service.get("status") or {})
        held = ingress_ips(service)
        if spec.get("type") != "LoadBalancer":
            if held:
                status["loadBalancer"] = {}
                self.plane.write_status(SERVICES, service, status, SERVICE_CONTROLLER)
                self._event(service, NORMAL, "DeletedLoadBalancer", "Deleted load balancer")
            return None
        if held:
            return None
        self._event(service, NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer")
        address = self._free(str(spec.get("loadBalancerIP") or ""), service)
        if address is None:
            message = (
                "Error syncing load balancer: failed to ensure load balancer: "
                f"no free address in {self.network}"
            )
            self._event(service, WARNING, "SyncLoadBalancerFailed", message)
            return None  # a Service that gives its address back enqueues nothing: as a
            # cloud's, the next retry is the user's (edit or recreate the Service)
        status["loadBalancer"] = {"ingress": [{"ip": address, "ipMode": "VIP"}]}
        if self.plane.write_status(SERVICES, service, status, SERVICE_CONTROLLER):
            self._event(service, NORMAL, "EnsuredLoadBalancer", "Ensured load balancer")
        return None

    def _free(self, wanted: str, service: dict[str, Any]) -> str | None:
        taken = {
            ip
            for other in self.plane.api.store.view(SERVICES, None)
            if other["metadata"].get("uid") != service["metadata"].get("uid")
            for ip in ingress_ips(other)
        }
        if wanted:
            try:
                inside = ipaddress.ip_address(wanted) in self.network
            except ValueError:
                inside = False
            return wanted if inside and wanted not in taken else None
        hosts = self.network.hosts() if self.network.num_addresses > 2 else iter(self.network)
        return next((str(ip) for ip in hosts if str(ip) not in taken), None)

    def _event(self, service: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.plane.events.emit(service, type_, reason, message, SERVICE_CONTROLLER)
