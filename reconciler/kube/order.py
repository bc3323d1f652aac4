"""Kind order: what must exist before what.

Apply walks objects in the order of ``reconciler.model.kinds`` (CRDs and
Namespaces first) and prune walks it backwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.model.changeset import ObjectRef
from reconciler.model.kinds import KIND_ORDER, kind_rank

__all__ = ["FIRST_STAGE_KINDS", "KIND_ORDER", "apply_order", "kind_rank", "prune_order"]

# Applied in a first stage, then discovery is refreshed before the rest.
FIRST_STAGE_KINDS = frozenset({"CustomResourceDefinition", "Namespace"})


def ref_sort_key(ref: ObjectRef) -> tuple[int, str, str, str, str]:
    return (kind_rank(ref.kind), ref.kind, ref.namespace, ref.name, ref.api_version)


def apply_order(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Objects sorted for apply: by kind rank, then kind, namespace and name (stable output)."""
    return sorted(objects, key=lambda o: ref_sort_key(ObjectRef.of(o)))


def prune_order(refs: Iterable[ObjectRef]) -> list[ObjectRef]:
    """References sorted for deletion: the reverse of apply order."""
    return sorted(refs, key=ref_sort_key, reverse=True)
