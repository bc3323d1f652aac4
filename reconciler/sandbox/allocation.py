"""Values the storage layer of a real API server assigns: Service IPs and node ports, Job selectors.

These are set after defaulting and after field ownership is recorded, so no manager
owns them, and they survive a re-apply that does not mention them:

* a Service gets ``clusterIP``/``clusterIPs`` from the service range 10.96.0.0/12
  (``None`` stays ``None`` for a headless Service, ExternalName gets none),
  ``ipFamilies: [IPv4]`` and ``ipFamilyPolicy`` (the sandbox is a single-stack IPv4
  cluster), and NodePort/LoadBalancer ports a ``nodePort`` from 30000-32767
  (https://kubernetes.io/docs/concepts/services-networking/service/). Addresses are
  picked from a hash of the Service's namespace and name, so the same Service gets
  the same IP in every sandbox run; an update that leaves them out keeps the old
  ones, as the real REST storage does (``patchAllocatedValues``), and a type change
  drops what the new type cannot have (``dropTypeDependentFields``);
* a Job without ``manualSelector: true`` gets the selector
  ``batch.kubernetes.io/controller-uid: <uid>`` and the matching template labels
  (https://kubernetes.io/docs/concepts/workloads/controllers/job/#specifying-your-own-pod-selector).

An explicit IP or port outside its range or already taken by another Service is a
422, with the real server's messages.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.defaults import externally_accessible

SERVICE_RANGE = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)
_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
_IP_FIELDS = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")
Obj = dict[str, Any]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ports(spec: Mapping[str, Any]) -> list[Obj]:
    ports = spec.get("ports")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def needs_cluster_ip(spec: Mapping[str, Any]) -> bool:
    return spec.get("type") != "ExternalName"


def needs_node_ports(spec: Mapping[str, Any]) -> bool:
    if spec.get("type") == "NodePort":
        return True
    return (
        spec.get("type") == "LoadBalancer"
        and spec.get("allocateLoadBalancerNodePorts") is not False
    )


def _hashed(seed: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big") % size


def _invalid(name: str, field: str, value: str, why: str) -> ApiError:
    message = f"Invalid value: {value}: {why}"
    return ApiError(
        422,
        f'Service "{name}" is invalid: {field}: {message}',
        name=name,
        kind="Service",
        causes=[{"reason": "FieldValueInvalid", "message": message, "field": field}],
    )


def service_ips(spec: Any) -> list[str]:
    """The cluster IPs a stored Service's ``spec`` holds."""
    return _cluster_ips(_map(spec))


def service_node_ports(spec: Any) -> list[Any]:
    """The node ports a stored Service's ``spec`` holds."""
    return [p.get("nodePort") for p in _ports(_map(spec)) if p.get("nodePort")]


def allocate_service(
    svc: Obj,
    old: Mapping[str, Any] | None,
    taken_ips: AbstractSet[Any],
    taken_ports: AbstractSet[Any],
) -> None:
    """Give ``svc`` (created, or updated from ``old``) its IPs and node ports, in place.

    ``taken_ips`` and ``taken_ports`` are what every other stored Service holds.
    """
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return
    meta = _map(svc.get("metadata"))
    name = str(meta.get("name", ""))
    seed = f"{meta.get('namespace', '')}/{name}"
    if old is not None:
        _keep_allocated(spec, _map(old.get("spec")))
    if needs_cluster_ip(spec):
        _cluster_ip(spec, name, seed, taken_ips)
    if needs_node_ports(spec):
        assign_node_ports(spec, name, seed, taken_ports)
    else:
        for i, port in enumerate(_ports(spec)):
            if port.get("nodePort"):
                why = f"may not be used when `type` is '{spec.get('type')}'"
                raise _invalid(name, f"spec.ports[{i}].nodePort", str(port["nodePort"]), why)


def _cluster_ips(spec: Mapping[str, Any]) -> list[str]:
    ips = spec.get("clusterIPs")
    found = [str(i) for i in ips] if isinstance(ips, list) else []
    return [*found, str(spec.get("clusterIP") or "")]


def _keep_allocated(spec: Obj, old: Mapping[str, Any]) -> None:
    """Update: keep what the old Service was given, drop what the new type cannot have."""
    if needs_cluster_ip(old):
        if needs_cluster_ip(spec):
            _keep_cluster_ips(spec, old)
        elif spec.get("clusterIP") == old.get("clusterIP"):
            for key in _IP_FIELDS:
                spec.pop(key, None)
    if needs_node_ports(old):
        if needs_node_ports(spec):
            _keep_node_ports(spec, old)
        elif [p.get("nodePort") for p in _ports(spec)] == [p.get("nodePort") for p in _ports(old)]:
            for port in _ports(spec):
                port.pop("nodePort", None)
    dropped = (
        ("externalTrafficPolicy", externally_accessible(old) and not externally_accessible(spec)),
        ("allocateLoadBalancerNodePorts", _is_lb(old) and not _is_lb(spec)),
    )
    for key, gone in dropped:
        if gone and spec.get(key) == old.get(key):
            spec.pop(key, None)


def _is_lb(spec: Mapping[str, Any]) -> bool:
    return spec.get("type") == "LoadBalancer"


def _keep_cluster_ips(spec: Obj, old: Mapping[str, Any]) -> None:
    # like normalizeClusterIPs: a client that only knows clusterIP moves clusterIPs too
    if spec.get("clusterIPs") == old.get("clusterIPs") and spec.get("clusterIP") != old.get(
        "clusterIP"
    ):
        if spec.get("clusterIP"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        else:
            spec.pop("clusterIPs", None)
    for key in _IP_FIELDS:
        if not spec.get(key) and old.get(key):
            spec[key] = old[key]


def _keep_node_ports(spec: Obj, old: Mapping[str, Any]) -> None:
    """Ports left without a nodePort get the old port of the same name back."""
    by_name = {str(p.get("name") or ""): p.get("nodePort") for p in _ports(old)}
    in_use = {p.get("nodePort") for p in _ports(spec)}
    for port in _ports(spec):
        kept = by_name.get(str(port.get("name") or ""))
        if not port.get("nodePort") and kept and kept not in in_use:
            port["nodePort"] = kept
            in_use.add(kept)


def _cluster_ip(spec: Obj, name: str, seed: str, taken: AbstractSet[Any]) -> None:
    ips = spec.get("clusterIPs")
    wanted = str(spec.get("clusterIP") or "")
    if not wanted and isinstance(ips, list) and ips:
        wanted = str(ips[0])
    if isinstance(ips, list) and len(ips) > 1:
        why = "this cluster is not configured for dual-stack services"
        raise _invalid(name, "spec.clusterIPs", str(ips), why)
    if wanted and isinstance(ips, list) and ips and str(ips[0]) != wanted:
        why = "must match first value in spec.clusterIPs"
        raise _invalid(name, "spec.clusterIPs", str(ips), why)
    headless = wanted == "None"
    if headless:
        pass
    elif wanted:
        _check_ip(name, wanted, taken)
    else:
        wanted = free_ip(seed, taken)
    spec["clusterIP"], spec["clusterIPs"] = wanted, [wanted]
    families = spec.get("ipFamilies")
    if families and families != ["IPv4"]:
        why = "this cluster is not configured for dual-stack or IPv6 services"
        raise _invalid(name, "spec.ipFamilies", str(families), why)
    spec["ipFamilies"] = ["IPv4"]
    selectorless = headless and not spec.get("selector")
    if spec.get("ipFamilyPolicy") is None:
        spec["ipFamilyPolicy"] = "RequireDualStack" if selectorless else "SingleStack"
    elif spec["ipFamilyPolicy"] == "RequireDualStack" and not selectorless:
        why = "this cluster is not configured for dual-stack services"
        raise _invalid(name, "spec.ipFamilyPolicy", '"RequireDualStack"', why)


def _check_ip(name: str, wanted: str, taken: AbstractSet[Any]) -> None:
    field, shown = "spec.clusterIPs", f'[]string{{"{wanted}"}}'
    try:
        address = ipaddress.ip_address(wanted)
    except ValueError:
        raise _invalid(name, field, shown, "must be a valid IP address") from None
    if address not in SERVICE_RANGE or address in (
        SERVICE_RANGE.network_address,
        SERVICE_RANGE.broadcast_address,
    ):
        why = (
            f"failed to allocate IP {wanted}: the provided IP ({wanted}) is not in "
            f"the valid range. The range of valid IPs is {SERVICE_RANGE}"
        )
        raise _invalid(name, field, shown, why)
    if wanted in taken:
        why = f"failed to allocate IP {wanted}: provided IP is already allocated"
        raise _invalid(name, field, shown, why)


def free_ip(seed: str, taken: AbstractSet[Any]) -> str:
    """The first free address from a hash of ``seed``, skipping network, .1 and broadcast."""
    size = SERVICE_RANGE.num_addresses - 3
    start = _hashed(seed, size)
    for step in range(size):
        candidate = str(SERVICE_RANGE.network_address + 2 + (start + step) % size)
        if candidate not in taken:
            return candidate
    raise ApiError(500, "Internal error: range is full")  # pragma: no cover - 1M addresses


def assign_node_ports(spec: Obj, name: str, seed: str, taken: AbstractSet[Any]) -> None:
    ports = _ports(spec)
    for i, port in enumerate(ports):
        wanted = port.get("nodePort")
        if not wanted:
            continue
        field = f"spec.ports[{i}].nodePort"
        if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted not in NODE_PORTS:
            why = (
                f"provided port is not in the valid range. The range of valid ports is "
                f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}"
            )
            raise _invalid(name, field, str(wanted), why)
        if wanted in taken:
            raise _invalid(name, field, str(wanted), "provided port is already allocated")
    mine = {p.get("nodePort") for p in ports}
    for i, port in enumerate(ports):
        if port.get("nodePort"):
            continue
        start = _hashed(f"{seed}/{i}", len(NODE_PORTS))
        for step in range(len(NODE_PORTS)):
            candidate = NODE_PORTS.start + (start + step) % len(NODE_PORTS)
            if candidate not in taken and candidate not in mine:
                port["nodePort"] = candidate
                mine.add(candidate)
                break
        else:  # pragma: no cover - 2768 ports
            raise ApiError(500, "Internal error: range is full")


def job_selector(job: Obj) -> None:
    """Generate a created Job's selector and template labels unless ``manualSelector``."""
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    meta = _map(job.get("metadata"))
    uid, name = str(meta.get("uid", "")), str(meta.get("name", ""))
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    template_meta = template.setdefault("metadata", {})
    if not isinstance(template_meta, dict):
        return
    labels = template_meta.get("labels")
    if not isinstance(labels, dict):
        labels = template_meta["labels"] = {}
    for key in ("job-name", "batch.kubernetes.io/job-name"):
        labels.setdefault(key, name)
    for key in ("controller-uid", _CONTROLLER_UID):
        labels.setdefault(key, uid)
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    match = selector.get("matchLabels")
    if not isinstance(match, dict):
        match = selector["matchLabels"] = {}
    match.setdefault(_CONTROLLER_UID, uid)
