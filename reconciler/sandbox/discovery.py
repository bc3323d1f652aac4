"""Discovery documents built from the kind registry.

Follows https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api
in its unaggregated form: ``/api`` (APIVersions), ``/apis`` (APIGroupList),
``/apis/<group>`` (APIGroup) and ``/api/v1``, ``/apis/<group>/<version>``
(APIResourceList). Clients that ask for aggregated discovery
(``application/json;g=apidiscovery.k8s.io;v=v2``) also accept plain JSON, which is
what the sandbox answers, so kubectl and the official client fall back to these.
``server.py`` serves them.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.kinds import PODS, Kind, KindRegistry

SERVER_VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-04-17T00:00:00Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(registry: KindRegistry) -> dict[str, Any]:
    groups = [_group(g, v) for g, v in registry.groups().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: KindRegistry, name: str) -> dict[str, Any] | None:
    versions = registry.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _resource(kind: Kind) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular_name,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    return entry


def _subresource(kind: Kind, name: str, sub_kind: str, group: str, version: str) -> dict[str, Any]:
    return {
        "name": f"{kind.plural}/{name}",
        "singularName": "",
        "namespaced": kind.namespaced,
        "group": group,
        "version": version,
        "kind": sub_kind,
        "verbs": ["get", "patch", "update"],
    }


def api_resource_list(registry: KindRegistry, group: str, version: str) -> dict[str, Any] | None:
    kinds = registry.in_version(group, version)
    if not kinds:
        return None
    resources: list[dict[str, Any]] = []
    for kind in sorted(kinds, key=lambda k: k.plural):
        resources.append(_resource(kind))
        if kind.status:
            resources.append(_subresource(kind, "status", kind.kind, group, version))
        if kind.scale is not None:
            resources.append(_subresource(kind, "scale", "Scale", "autoscaling", "v1"))
        if kind.resource == PODS:
            # what ``kubectl drain`` looks for before it evicts (disruption.py)
            eviction = _subresource(kind, "eviction", "Eviction", "policy", "v1")
            resources.append({**eviction, "verbs": ["create"]})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
