"""Kind order: what must exist before what.

Apply walks objects in this order (CRDs and Namespaces first, so the kinds and
namespaces the rest need exist; workloads after the ServiceAccounts, Secrets
and ConfigMaps they mount) and prune walks it backwards. The list follows
fluxcd/pkg ``ssa/sort.go`` and Helm's install order; unknown kinds (custom
resources) come last, after their CRDs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.model.changeset import ObjectRef

KIND_ORDER: tuple[str, ...] = (
    "CustomResourceDefinition",
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "LimitRange",
    "PriorityClass",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)
_RANK = {kind: i for i, kind in enumerate(KIND_ORDER)}

# Applied in a first stage, then discovery is refreshed before the rest.
FIRST_STAGE_KINDS = frozenset({"CustomResourceDefinition", "Namespace"})


def kind_rank(kind: str) -> int:
    return _RANK.get(kind, len(KIND_ORDER))


def ref_sort_key(ref: ObjectRef) -> tuple[int, str, str, str, str]:
    return (kind_rank(ref.kind), ref.kind, ref.namespace, ref.name, ref.api_version)


def apply_order(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Objects sorted for apply: by kind rank, then kind, namespace and name (stable output)."""
    return sorted(objects, key=lambda o: ref_sort_key(ObjectRef.of(o)))


def prune_order(refs: Iterable[ObjectRef]) -> list[ObjectRef]:
    """References sorted for deletion: the reverse of apply order."""
    return sorted(refs, key=ref_sort_key, reverse=True)
