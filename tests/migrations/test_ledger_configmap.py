"""The ledger's copy in the cluster: a ConfigMap that round-trips through the sandbox."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.migrations import GLOBAL_NAME, ledger_configmap, ledger_from_configmap
from reconciler.model.changeset import ObjectRef
from reconciler.model.migrations import LedgerFormatError, MigrationLedger, MigrationRecord

RECORD = MigrationRecord(
    name="add-orders-index",
    version="2.0.0",
    checksum="sha256:a",
    phase="pre",
    scope="app",
    started_at="2026-01-01T00:00:00Z",
    duration=41.2,
    check_duration=0.01,
    outcome="succeeded",
)


def test_ledger_configmaps_round_trip_through_the_cluster(sandbox: Any) -> None:
    app = MigrationLedger("app", "books", (RECORD,))
    cluster = MigrationLedger("global", "prod", ())
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}})
        for ledger in (app, cluster):
            kube.apply(ledger_configmap(ledger, "prod", "fin"))
        live = kube.get(ObjectRef("v1", "ConfigMap", "fin", "reconciler-migrations-books"))
        assert live is not None and ledger_from_configmap(live) == app
        assert live["metadata"]["labels"]["reconciler.dev/migrations"] == "app"
        glob = kube.get(ObjectRef("v1", "ConfigMap", "fin", GLOBAL_NAME))
        assert glob is not None and ledger_from_configmap(glob) == cluster


def test_a_broken_ledger_configmap_names_itself() -> None:
    meta = {"name": "reconciler-migrations-books", "namespace": "fin"}
    with pytest.raises(
        LedgerFormatError, match=r"ConfigMap/fin/reconciler-migrations-books: no ledger\.json"
    ):
        ledger_from_configmap({"metadata": meta, "data": {}})
    with pytest.raises(LedgerFormatError, match=r"ledger\.json is not JSON"):
        ledger_from_configmap({"metadata": meta, "data": {"ledger.json": "{"}})
    with pytest.raises(LedgerFormatError, match='needs a string "name"'):
        ledger_from_configmap({"metadata": meta, "data": {"ledger.json": '{"records": [{}]}'}})
