"""What a pass records of each instance's migration ledger, asked of every instance.

Most instances never ran a migration: a pass tells so from one scan of its view's
ConfigMaps, making no ledger for them, while an instance whose ledger ConfigMap is
in the cluster, or that ran a migration this pass, gets its ledger as before.
"""

from __future__ import annotations

from typing import Any, cast

from reconciler.daemon.migration_steps import MigrationSteps
from reconciler.kube import KubeClient, Limits, LiveState
from reconciler.migrations import ledger_configmap
from reconciler.migrations.registry import Registry
from reconciler.model.migrations import MigrationLedger
from tests.migrations.test_ledger_configmap import RECORD


def test_only_instances_with_a_ledger_get_one(sandbox: Any) -> None:
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}})
        kube.apply(ledger_configmap(MigrationLedger("app", "books", (RECORD,)), "prod", "fin"))
        live = LiveState(kube, "prod")
        nothing = cast(Any, None)  # no Job runs here
        steps = MigrationSteps(
            kube, live, "prod", registry=Registry(), job_runner=nothing, limits=Limits()
        )
        assert steps.recorded_ledger("books", "fin") == MigrationLedger("app", "books", (RECORD,))
        assert steps.recorded_ledger("cards", "fin") is None
        assert "cards" not in steps._ledgers  # nothing made for it
        # a ledger this pass wrote is the pass's copy, whatever the view listed before
        assert steps.append("cards", "fin", RECORD) == ""
        assert steps.recorded_ledger("cards", "fin") == MigrationLedger("app", "cards", (RECORD,))


def test_a_cluster_without_ledgers_needs_no_look_up_per_instance(sandbox: Any) -> None:
    """``any_recorded_ledger`` is False only while no ledger is listed or written: then
    every instance's ``recorded_ledger`` is None, and the pass's records skip it."""
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}})
        nothing = cast(Any, None)  # no Job runs here

        def steps() -> MigrationSteps:
            live = LiveState(kube, "prod")  # a pass's view: listed afresh
            return MigrationSteps(
                kube, live, "prod", registry=Registry(), job_runner=nothing, limits=Limits()
            )

        empty = steps()
        assert empty.any_recorded_ledger() is False
        assert empty.recorded_ledger("books", "fin") is None
        # a ledger this pass wrote counts, though the view listed none
        assert empty.append("cards", "fin", RECORD) == ""
        assert empty.any_recorded_ledger() is True
        # and one in the cluster counts for the next pass
        kube.apply(ledger_configmap(MigrationLedger("app", "books", (RECORD,)), "prod", "fin"))
        listed = steps()
        assert listed.any_recorded_ledger() is True
        assert listed.recorded_ledger("books", "fin") == MigrationLedger("app", "books", (RECORD,))
