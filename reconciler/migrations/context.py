"""What a migration is told about the change it belongs to: ``ctx`` and the Job's environment.

One ``MigrationContext`` is built per migration run by the daemon
(``reconciler.daemon.migration_steps``) or by ``reconciler.testing``; Python
migrations receive it as ``ctx``, and Job migrations get the same facts as
``RECONCILER_*`` environment variables (:func:`job_environment`), so both kinds
see one contract (SPEC section 5).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Component:
    """One instance this pass changes, with the versions it moves between."""

    instance: str
    app: str
    from_version: str | None  # None: a first install
    to_version: str | None  # None: an uninstall

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "app": self.app,
            "from": self.from_version,
            "to": self.to_version,
        }


@dataclass(frozen=True)
class MigrationContext:
    """``ctx`` of a Python migration.

    ``client`` is the reconciler's Kubernetes client (``reconciler.kube.KubeClient``:
    ``get``, ``list``, ``apply``, ``delete`` by ``ObjectRef``); ``deadline`` is a
    ``time.monotonic()`` value the migration must finish by (``time_left()``).
    For a global migration ``instance`` is empty and ``components`` lists every
    instance about to change in this pass.
    """

    client: Any
    cluster: str
    instance: str
    namespace: str
    app: str
    from_version: str | None
    to_version: str | None
    phase: str
    migration: str
    deadline: float
    components: tuple[Component, ...] = ()
    logger: logging.Logger = field(
        default_factory=lambda: logging.getLogger("reconciler.migrations")
    )
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def time_left(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return self.deadline - self.clock()


def components_json(components: tuple[Component, ...]) -> str:
    """``RECONCILER_COMPONENTS``: the instances this pass changes, as a JSON list."""
    return json.dumps([c.to_dict() for c in components], separators=(",", ":"))


def job_environment(ctx: MigrationContext) -> Mapping[str, str]:
    """The ``RECONCILER_*`` variables every container of a migration Job gets."""
    return {
        "RECONCILER_CLUSTER": ctx.cluster,
        "RECONCILER_INSTANCE": ctx.instance,
        "RECONCILER_APP": ctx.app,
        "RECONCILER_MIGRATION": ctx.migration,
        "RECONCILER_PHASE": ctx.phase,
        "RECONCILER_FROM_VERSION": ctx.from_version or "",
        "RECONCILER_TO_VERSION": ctx.to_version or "",
        "RECONCILER_COMPONENTS": components_json(ctx.components),
    }


__all__ = ["Component", "MigrationContext", "components_json", "job_environment"]
