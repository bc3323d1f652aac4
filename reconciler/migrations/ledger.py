"""The ledger's copy in the cluster: one ConfigMap per instance, one per cluster (pure).

SPEC section 5 records every migration outcome twice, in Git and in the cluster.
The cluster copy is what a newly elected or restarted reconciler (or one whose
status branch was lost) reads to keep the once-only promise, so it lives next to
what it describes: ``reconciler-migrations-<instance>`` in the instance's
namespace, and ``reconciler-migrations--global`` for the cluster's global
migrations (the double dash cannot be an instance's name, which is a DNS label
that starts with a letter or digit). Building and parsing the object is pure;
the daemon applies and reads it (``reconciler.daemon.migration_steps``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler.model.migrations import LedgerFormatError, MigrationLedger

NAME_PREFIX = "reconciler-migrations-"
GLOBAL_NAME = NAME_PREFIX + "-global"
LEDGER_LABEL = "reconciler.dev/migrations"
CLUSTER_LABEL = "reconciler.dev/cluster"
DATA_KEY = "ledger.json"


def ledger_name(ledger: MigrationLedger) -> str:
    return GLOBAL_NAME if ledger.scope == "global" else NAME_PREFIX + ledger.owner


def ledger_configmap(ledger: MigrationLedger, cluster: str, namespace: str) -> dict[str, Any]:
    """The ConfigMap that holds ``ledger`` (apply it with server-side apply)."""
    labels = {
        "app.kubernetes.io/managed-by": "reconciler",
        CLUSTER_LABEL: cluster,
        LEDGER_LABEL: ledger.scope,
    }
    if ledger.scope == "app":
        labels["app.kubernetes.io/instance"] = ledger.owner
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ledger_name(ledger), "namespace": namespace, "labels": labels},
        "data": {DATA_KEY: json.dumps(ledger.to_dict(), sort_keys=True, indent=1)},
    }


def ledger_from_configmap(obj: Mapping[str, Any]) -> MigrationLedger:
    """Read a ledger ConfigMap back; a broken one raises ``LedgerFormatError`` naming it."""
    meta = obj.get("metadata") or {}
    where = f"ConfigMap/{meta.get('namespace', '')}/{meta.get('name', '')}"
    text = (obj.get("data") or {}).get(DATA_KEY)
    if not isinstance(text, str):
        raise LedgerFormatError(f"{where}: no {DATA_KEY}")
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise LedgerFormatError(f"{where}: {DATA_KEY} is not JSON: {e}") from e
    try:
        return MigrationLedger.from_dict(raw)
    except LedgerFormatError as e:
        raise LedgerFormatError(f"{where}: {e}") from e


__all__ = [
    "GLOBAL_NAME",
    "LEDGER_LABEL",
    "NAME_PREFIX",
    "ledger_configmap",
    "ledger_from_configmap",
    "ledger_name",
]
