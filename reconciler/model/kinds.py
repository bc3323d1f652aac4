"""Facts about Kubernetes kinds that need no cluster: apply order and cluster scope.

One table for every stage: ``render`` orders and namespaces objects offline,
``kube`` applies in this order and prunes in reverse. The order follows
fluxcd/pkg ``ssa/sort.go`` and Helm's install order (CRDs and Namespaces first,
so the kinds and namespaces the rest need exist; workloads after the
ServiceAccounts, Secrets and ConfigMaps they mount); unknown kinds (custom
resources) come last, after their CRDs.
"""

from __future__ import annotations

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
_RANK = {kind: index for index, kind in enumerate(KIND_ORDER)}

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


def kind_rank(kind: str) -> int:
    """Position of ``kind`` in apply order; unknown kinds (custom resources) go last."""
    return _RANK.get(kind, len(KIND_ORDER))
