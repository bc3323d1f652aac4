"""Which kinds are cluster-scoped, without asking a cluster.

``render`` must default namespaces offline (``reconciler render`` works on a
laptop with no cluster), so it knows the built-in cluster-scoped kinds and
learns custom ones from CustomResourceDefinitions rendered alongside.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CLUSTER_SCOPED_KINDS = frozenset(
    {
        "APIService",
        "CertificateSigningRequest",
        "ClusterRole",
        "ClusterRoleBinding",
        "ComponentStatus",
        "CSIDriver",
        "CSINode",
        "CustomResourceDefinition",
        "FlowSchema",
        "IngressClass",
        "MutatingWebhookConfiguration",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PriorityClass",
        "PriorityLevelConfiguration",
        "RuntimeClass",
        "StorageClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)

# Apply order (CRDs and Namespaces first, then what others refer to); delete in reverse.
# Mirrors the order fluxcd/pkg ssa and Helm use.
KIND_ORDER = (
    "CustomResourceDefinition",
    "Namespace",
    "ResourceQuota",
    "LimitRange",
    "PriorityClass",
    "StorageClass",
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
    "ReplicaSet",
    "Deployment",
    "StatefulSet",
    "Job",
    "CronJob",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "Ingress",
    "NetworkPolicy",
)
_RANK = {kind: index for index, kind in enumerate(KIND_ORDER)}


def kind_rank(kind: str) -> int:
    """Position of ``kind`` in apply order; unknown kinds (custom resources) go last."""
    return _RANK.get(kind, len(KIND_ORDER))


def custom_cluster_scoped(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    """Kinds declared cluster-scoped by CRDs among ``objects``."""
    kinds = set()
    for obj in objects:
        if obj.get("kind") == "CustomResourceDefinition":
            spec = obj.get("spec") or {}
            if spec.get("scope") == "Cluster":
                kind = (spec.get("names") or {}).get("kind")
                if isinstance(kind, str):
                    kinds.add(kind)
    return kinds


def is_cluster_scoped(kind: str, extra: set[str] | frozenset[str] = frozenset()) -> bool:
    return kind in CLUSTER_SCOPED_KINDS or kind in extra
