"""The check ``make test-real-sandbox`` runs after the lane (tests/foreign.py) sees what
the lane's engine might do to another tenant's objects: delete or edit them."""

from __future__ import annotations

from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import SandboxHandle
from tests import foreign
from tests.kube.conftest import edit_like_kubectl


def test_the_foreign_objects_check_names_a_deleted_and_an_edited_object(
    sandbox: SandboxHandle,
) -> None:
    with KubeClient.connect(sandbox.kubeconfig) as client:
        before = foreign.seed(client)
        assert len(before) == len(foreign.foreign_objects())
        assert foreign.changed(client, before) == []  # controllers' status writes are fine
        config = ObjectRef("v1", "ConfigMap", foreign.NAMESPACE, "web-config")
        other = ObjectRef("apps/v1", "Deployment", "default", "other-tool")
        client.delete(config)
        edit_like_kubectl(client, other, {"spec": {"replicas": 3}})
        faults = foreign.changed(client, before)
        assert [f.split(":")[0] for f in faults] == [str(config), str(other)], faults
        assert faults[0].endswith("deleted") and "changed from" in faults[1]
