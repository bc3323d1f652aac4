"""The sandbox's kind registry: which resources exist, where, and how they behave.

Discovery, routing and the object store all ask this registry. Built-in kinds are
listed here; a CustomResourceDefinition adds its kinds at run time (see ``crds.py``).
Objects are stored per (group, plural), so a kind served at several versions (like
HorizontalPodAutoscaler at autoscaling/v1 and v2) shares one set of objects and
is returned with the apiVersion the client asked for (no conversion).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Resource = tuple[str, str]  # (group, plural): the store's key for every version of a kind
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)  # the access reviews: answered, never stored


@dataclass(frozen=True)
class ScalePaths:
    """Where a kind keeps what its ``/scale`` subresource reads and writes."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".status.selector"


@dataclass(frozen=True)
class Kind:
    """One served resource type at one group/version."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status: bool = False
    scale: ScalePaths | None = None
    categories: tuple[str, ...] = ()
    singular: str = ""
    crd: bool = field(default=False, compare=False)
    verbs: tuple[str, ...] = VERBS
    # A CRD version's openAPIV3Schema (structural.py); None for built-in kinds.
    schema: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> Resource:
        """The storage key shared by every version of this kind."""
        return (self.group, self.plural)

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


def _k(
    gv: str,
    kind: str,
    plural: str,
    *short: str,
    namespaced: bool = True,
    status: bool = False,
    scale: bool | ScalePaths = False,
    all_category: bool = False,
    verbs: tuple[str, ...] = VERBS,
) -> Kind:
    group, _, version = gv.rpartition("/")
    return Kind(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        namespaced=namespaced,
        short_names=short,
        status=status,
        scale=scale if isinstance(scale, ScalePaths) else ScalePaths() if scale else None,
        categories=("all",) if all_category else (),
        verbs=verbs,
    )


BUILTIN_KINDS: tuple[Kind, ...] = (
    _k("v1", "Namespace", "namespaces", "ns", namespaced=False, status=True),
    _k("v1", "ConfigMap", "configmaps", "cm"),
    _k("v1", "Secret", "secrets"),
    _k("v1", "Service", "services", "svc", status=True, all_category=True),
    _k("v1", "ServiceAccount", "serviceaccounts", "sa"),
    _k("v1", "Pod", "pods", "po", status=True, all_category=True),
    _k("v1", "Node", "nodes", "no", namespaced=False, status=True),
    _k("v1", "Event", "events", "ev"),
    _k("v1", "PersistentVolumeClaim", "persistentvolumeclaims", "pvc", status=True),
    _k("v1", "PersistentVolume", "persistentvolumes", "pv", namespaced=False, status=True),
    _k("storage.k8s.io/v1", "StorageClass", "storageclasses", "sc", namespaced=False),
    _k(
        "apps/v1", "Deployment", "deployments", "deploy", status=True, scale=True, all_category=True
    ),
    _k("apps/v1", "StatefulSet", "statefulsets", "sts", status=True, scale=True, all_category=True),
    _k("apps/v1", "DaemonSet", "daemonsets", "ds", status=True, all_category=True),
    _k("apps/v1", "ReplicaSet", "replicasets", "rs", status=True, scale=True, all_category=True),
    _k("apps/v1", "ControllerRevision", "controllerrevisions"),
    _k("batch/v1", "Job", "jobs", status=True, all_category=True),
    _k("batch/v1", "CronJob", "cronjobs", "cj", status=True, all_category=True),
    _k("networking.k8s.io/v1", "Ingress", "ingresses", "ing", status=True),
    _k("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", "netpol"),
    _k("rbac.authorization.k8s.io/v1", "Role", "roles"),
    _k("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    _k("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False),
    _k(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        namespaced=False,
    ),
    _k("coordination.k8s.io/v1", "Lease", "leases"),
    _k(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        "crd",
        "crds",
        namespaced=False,
        status=True,
    ),
    _k("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", "pdb", status=True),
    _k("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "hpa", status=True),
    _k("autoscaling/v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "hpa", status=True),
    # kept by the cluster or admitting others (endpoints.py, admission.py, quota.py, reviews.py)
    _k(
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "rc",
        status=True,
        scale=ScalePaths(label_selector=".spec.selector"),
        all_category=True,
    ),
    _k("v1", "Endpoints", "endpoints", "ep"),
    _k("discovery.k8s.io/v1", "EndpointSlice", "endpointslices"),
    _k("v1", "ResourceQuota", "resourcequotas", "quota", status=True),
    _k("v1", "LimitRange", "limitranges", "limits"),
    _k("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", "pc", namespaced=False),
    _k("apiregistration.k8s.io/v1", "APIService", "apiservices", namespaced=False, status=True),
    _k(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
    _k(
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
)

# The storage keys of the built-in resources the sandbox's own code reads or writes
# (controllers, admission, garbage collection): each defined here once, beside the
# table that serves them.
NAMESPACES: Resource = ("", "namespaces")
CONFIGMAPS: Resource = ("", "configmaps")
SERVICES: Resource = ("", "services")
SERVICE_ACCOUNTS: Resource = ("", "serviceaccounts")
PODS: Resource = ("", "pods")
NODES: Resource = ("", "nodes")
EVENTS: Resource = ("", "events")
CLAIMS: Resource = ("", "persistentvolumeclaims")
VOLUMES: Resource = ("", "persistentvolumes")
CLASSES: Resource = ("storage.k8s.io", "storageclasses")
DEPLOYMENTS: Resource = ("apps", "deployments")
STATEFULSETS: Resource = ("apps", "statefulsets")
DAEMONSETS: Resource = ("apps", "daemonsets")
REPLICASETS: Resource = ("apps", "replicasets")
REVISIONS: Resource = ("apps", "controllerrevisions")
JOBS: Resource = ("batch", "jobs")
CRONJOBS: Resource = ("batch", "cronjobs")
CRDS: Resource = ("apiextensions.k8s.io", "customresourcedefinitions")
PDBS: Resource = ("policy", "poddisruptionbudgets")
REPLICATIONCONTROLLERS: Resource = ("", "replicationcontrollers")
ENDPOINTS: Resource = ("", "endpoints")
ENDPOINT_SLICES: Resource = ("discovery.k8s.io", "endpointslices")
QUOTAS: Resource = ("", "resourcequotas")
LIMIT_RANGES: Resource = ("", "limitranges")
PRIORITY_CLASSES: Resource = ("scheduling.k8s.io", "priorityclasses")
API_SERVICES: Resource = ("apiregistration.k8s.io", "apiservices")

# The version a group lists first in discovery (preferredVersion).
_PREFERRED = {"autoscaling": "v2"}


class KindRegistry:
    """Mutable set of served kinds; the server has one, shared by every request."""

    def __init__(self, kinds: tuple[Kind, ...] = BUILTIN_KINDS) -> None:
        self._kinds: list[Kind] = list(kinds)

    def all(self) -> list[Kind]:
        return list(self._kinds)

    def lookup(self, group: str, version: str, plural: str) -> Kind | None:
        for kind in self._kinds:
            if (kind.group, kind.version, kind.plural) == (group, version, plural):
                return kind
        return None

    def by_resource(self, group: str, plural: str) -> Kind | None:
        """Any served version of a stored resource (for cascades and GC)."""
        for kind in self._kinds:
            if (kind.group, kind.plural) == (group, plural):
                return kind
        return None

    def by_kind(self, api_version: str, kind_name: str) -> Kind | None:
        for kind in self._kinds:
            if kind.api_version == api_version and kind.kind == kind_name:
                return kind
        return None

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions, preferred version first."""
        result: dict[str, list[str]] = {}
        for kind in self._kinds:
            versions = result.setdefault(kind.group, [])
            if kind.version not in versions:
                versions.append(kind.version)
        for group, versions in result.items():
            preferred = _PREFERRED.get(group)
            if preferred in versions:
                versions.remove(preferred)
                versions.insert(0, preferred)
        return result

    def in_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self._kinds if (k.group, k.version) == (group, version)]

    def register(self, kinds: list[Kind]) -> None:
        """Replace every kind of the same (group, plural) by ``kinds`` (a CRD update)."""
        resources = {k.resource for k in kinds}
        self._kinds = [k for k in self._kinds if k.resource not in resources] + kinds

    def unregister(self, group: str, plural: str) -> None:
        self._kinds = [k for k in self._kinds if (k.group, k.plural) != (group, plural)]
