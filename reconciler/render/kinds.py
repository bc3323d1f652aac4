"""Which kinds are cluster-scoped, without asking a cluster.

``render`` must default namespaces offline (``reconciler render`` works on a
laptop with no cluster), so it knows the built-in cluster-scoped kinds and
learns custom ones from CustomResourceDefinitions rendered alongside.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.model.kinds import CLUSTER_SCOPED_KINDS, KIND_ORDER, kind_rank

__all__ = ["KIND_ORDER", "custom_cluster_scoped", "is_cluster_scoped", "kind_rank"]


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
