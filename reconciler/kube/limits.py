"""What ``cluster.yaml`` lets a cluster's instances touch.

``allowedNamespaces`` (glob patterns such as ``team-*``) and
``allowClusterScoped`` are checked for every object before apply writes
anything, so an instance that reaches outside its limits is refused whole
instead of half applied. Pure functions; ``reconciler.kube.apply`` calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from reconciler.model.catalog import Cluster
from reconciler.model.changeset import ObjectRef
from reconciler.model.names import is_dns_label


@dataclass(frozen=True)
class Limits:
    """The limits of one cluster; ``allowed_namespaces`` None means any namespace."""

    allowed_namespaces: tuple[str, ...] | None = None
    allow_cluster_scoped: bool = True
    source: str = ""  # the cluster.yaml they come from; "" when the cluster has none

    @classmethod
    def of(cls, cluster: Cluster | None) -> Limits:
        if cluster is None:
            return cls()
        source = cluster.origin.file if cluster.declared else ""
        return cls(cluster.allowed_namespaces, cluster.allow_cluster_scoped, source)

    def namespace_allowed(self, namespace: str) -> bool:
        if self.allowed_namespaces is None:
            return True
        if not is_dns_label(namespace):  # a glob's * matches "/" and ".."
            return False
        return any(fnmatchcase(namespace, pattern) for pattern in self.allowed_namespaces)

    def describe_namespaces(self) -> str:
        return ", ".join(self.allowed_namespaces or ())

    def listed_namespaces(self) -> tuple[str, ...] | None:
        """The namespaces a pass lists namespaced kinds in, one list each; None: all at once.

        With ``allowedNamespaces`` of plain names, nothing outside them can be ours to
        apply, so a pass lists (and the daemon watches) each kind per namespace: a
        tenant's reconciler then needs read access only there (a Role per namespace,
        ``deploy/overlays/tenant/``), not to every ConfigMap and Pod of the cluster.
        A pattern (``team-*``) names namespaces that may appear at any time, which
        only a list across all namespaces sees: then it is None, as without limits.
        A name that is not a DNS label can hold nothing (``namespace_allowed``).
        """
        allowed = self.allowed_namespaces
        if allowed is None or any(_is_pattern(p) for p in allowed):
            return None
        return tuple(sorted({name for name in allowed if is_dns_label(name)}))


def _is_pattern(text: str) -> bool:
    return any(c in text for c in "*?[")


def read_refused(ref: ObjectRef, limits: Limits, *, namespaced: bool) -> str | None:
    """Why a migration check may not read ``ref`` in a cluster with ``limits`` (None: it may).

    A check reads only what its instance could hold: otherwise ``fieldEquals`` on a
    Secret in ``kube-system`` copies its value into the status record and ledger.
    """
    if not namespaced:
        if limits.allow_cluster_scoped:
            return None
        return (
            f"{ref}: cluster-scoped objects are not allowed in this cluster "
            "(allowClusterScoped: false)"
        )
    if limits.namespace_allowed(ref.namespace):
        return None
    return (
        f'{ref}: namespace "{ref.namespace}" is not allowed in this cluster '
        f"(cluster.yaml allowedNamespaces: [{limits.describe_namespaces()}]); "
        "a migration check reads only the instance's allowed namespaces"
    )


def violations(
    objects: Iterable[Mapping[str, Any]],
    limits: Limits,
    is_namespaced: Callable[[Mapping[str, Any]], bool],
) -> dict[ObjectRef, str]:
    """Each object outside the limits, with a message saying which limit and why."""
    found: dict[ObjectRef, str] = {}
    for obj in objects:
        ref = ObjectRef.of(obj)
        namespaced = is_namespaced(obj)
        if not namespaced and not limits.allow_cluster_scoped:
            found[ref] = (
                f"{ref}: cluster-scoped objects are not allowed in this cluster "
                "(cluster.yaml: allowClusterScoped: false)"
            )
        elif namespaced and not limits.namespace_allowed(ref.namespace):
            found[ref] = _outside(ref, ref.namespace, limits)
        elif ref.kind == "Namespace" and not limits.namespace_allowed(ref.name):
            found[ref] = _outside(ref, ref.name, limits)
    return found


def _outside(ref: ObjectRef, namespace: str, limits: Limits) -> str:
    return (
        f'{ref}: namespace "{namespace}" is not allowed in this cluster '
        f"(cluster.yaml allowedNamespaces: [{limits.describe_namespaces()}])"
    )
