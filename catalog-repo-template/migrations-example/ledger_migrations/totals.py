"""Backfill ``orders.total_cents`` after the ledger moves to 2.1.0 (an example migration).

A real backfill would walk the ledger's database in batches; this example keeps
its state in the cluster so it runs against the reconciler's sandbox: it records
its completion in the ConfigMap ``<instance>-order-totals``, the object the
catalog's state check (``objectMissing``) looks for. ``needed`` asks the cluster,
never the version numbers, so a cluster already in shape runs nothing.

Registered in ``pyproject.toml`` under the entry-point group
``reconciler.migrations`` as ``ledger-backfill-order-totals``.
"""

from __future__ import annotations

from typing import Any

from reconciler.model.changeset import ObjectRef


def marker(ctx: Any) -> ObjectRef:
    """The ConfigMap that says this instance's totals are backfilled."""
    return ObjectRef("v1", "ConfigMap", ctx.namespace, f"{ctx.instance}-order-totals")


class BackfillOrderTotals:
    """``needed``/``run``/``undo`` as the reconciler calls them (``ctx``: MigrationContext)."""

    def needed(self, ctx: Any) -> bool:
        return ctx.client.get(marker(ctx)) is None

    def run(self, ctx: Any) -> None:
        ref = marker(ctx)
        ctx.logger.info("backfilling order totals of %s (%s)", ctx.instance, ctx.to_version)
        # ... the batches over the database would go here, checking ctx.time_left() ...
        ctx.client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": ref.name, "namespace": ref.namespace},
                "data": {"backfilledBy": str(ctx.to_version), "phase": str(ctx.phase)},
            }
        )

    def undo(self, ctx: Any) -> None:
        """On uninstall: forget the marker (the totals stay; they are correct data)."""
        ctx.client.delete(marker(ctx))
