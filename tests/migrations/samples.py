"""Python migrations the tests register through real ``importlib.metadata`` entry points."""

from __future__ import annotations

import threading
from typing import Any

from reconciler.model.changeset import ObjectRef

RELEASE = threading.Event()  # a hanging step waits on this; tests set it to let it finish


def marker(ctx: Any) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", ctx.namespace, f"{ctx.instance}-migrated")


class CreatesMarker:
    """Needed while its marker ConfigMap is missing; ``run`` creates it, ``undo`` deletes it."""

    def needed(self, ctx: Any) -> bool:
        return ctx.client.get(marker(ctx)) is None

    def run(self, ctx: Any) -> None:
        ref = marker(ctx)
        ctx.client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": ref.name, "namespace": ref.namespace},
                "data": {"to": str(ctx.to_version), "components": str(len(ctx.components))},
            }
        )

    def undo(self, ctx: Any) -> None:
        ctx.client.delete(marker(ctx))


class Raises:
    def needed(self, ctx: Any) -> bool:
        return True

    def run(self, ctx: Any) -> None:
        raise RuntimeError("orders table is locked")


class Hangs:
    def needed(self, ctx: Any) -> bool:
        return True

    def run(self, ctx: Any) -> None:
        RELEASE.wait(30)


class NotBool:
    def needed(self, ctx: Any) -> Any:
        return "yes"

    def run(self, ctx: Any) -> None:
        raise AssertionError("never called: needed() did not return a bool")


class NoUndo:
    def needed(self, ctx: Any) -> bool:
        return False

    def run(self, ctx: Any) -> None:
        pass


class NotAMigration:
    pass


class BrokenInit:
    def __init__(self) -> None:
        raise ValueError("missing settings")

    def needed(self, ctx: Any) -> bool:
        return True

    def run(self, ctx: Any) -> None:
        pass


instance = CreatesMarker()


RUNS: list[tuple[str, str, str, str]] = []  # (step, instance, migration, to_version)


class CountingMarker:
    """Needed while ``<instance>-<migration>`` is missing; records every run and undo."""

    def _ref(self, ctx: Any) -> ObjectRef:
        return ObjectRef("v1", "ConfigMap", ctx.namespace, f"{ctx.instance}-{ctx.migration}")

    def needed(self, ctx: Any) -> bool:
        return ctx.client.get(self._ref(ctx)) is None

    def run(self, ctx: Any) -> None:
        RUNS.append(("run", ctx.instance, ctx.migration, str(ctx.to_version)))
        ref = self._ref(ctx)
        ctx.client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": ref.name, "namespace": ref.namespace},
            }
        )

    def undo(self, ctx: Any) -> None:
        RUNS.append(("undo", ctx.instance, ctx.migration, str(ctx.to_version)))
        ctx.client.delete(self._ref(ctx))
