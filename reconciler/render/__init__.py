"""Render an instance and its chosen version into Kubernetes objects (pure, no I/O)."""

from reconciler.render.kinds import KIND_ORDER, is_cluster_scoped, kind_rank
from reconciler.render.render import (
    INSTANCE_LABEL,
    MANAGED_BY,
    NAME_LABEL,
    VERSION_LABEL,
    RenderResult,
    namespace_allowed,
    object_key,
    object_ref,
    render_instance,
    render_template,
)

__all__ = [
    "INSTANCE_LABEL",
    "KIND_ORDER",
    "MANAGED_BY",
    "NAME_LABEL",
    "VERSION_LABEL",
    "RenderResult",
    "is_cluster_scoped",
    "kind_rank",
    "namespace_allowed",
    "object_key",
    "object_ref",
    "render_instance",
    "render_template",
]
