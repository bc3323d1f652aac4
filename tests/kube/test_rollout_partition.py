"""StatefulSet batches by partition, against the sandbox (and a real cluster on request).

https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#partitions
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.kube import KubeClient
from reconciler.kube.rollout import (
    ROLLOUT_FIELD_MANAGER,
    partition_for,
    release_partition,
    set_partition,
)
from reconciler.model.changeset import ObjectRef
from tests.kube.conftest import Backend, labels
from tests.sandbox.helpers import eventually


def statefulset(name: str, namespace: str, image: str) -> dict[str, Any]:
    """A plain render: no updateStrategy, so the engine never owns the partition."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels("db")},
        "spec": {
            "replicas": 4,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "db", "image": image}]},
            },
        },
    }


def observed(client: KubeClient, ref: ObjectRef, updated: int) -> dict[str, Any] | None:
    obj = client.get(ref)
    assert obj is not None
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    # updatedReplicas is omitempty in the API: absent means 0
    if (
        status.get("observedGeneration") == generation
        and status.get("updatedReplicas", 0) == updated
    ):
        return obj
    return None


def partition_of(obj: dict[str, Any]) -> int | None:
    rolling = (obj["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}
    value = rolling.get("partition")
    return None if value is None else int(value)


def test_partition_for() -> None:
    assert [partition_for(5, t) for t in (0, 1, 3, 5)] == [5, 4, 2, 0]
    with pytest.raises(ValueError, match="between 0 and replicas 5"):
        partition_for(5, 6)


def test_batches_by_partition_survive_drift_correction_and_release(backend: Backend) -> None:
    client = backend.client
    ns = backend.namespace("rollout-sts")
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    name = backend.name("db")
    ref = ObjectRef("apps/v1", "StatefulSet", ns, name)
    client.apply(statefulset(name, ns, "db:1"))
    eventually(lambda: observed(client, ref, 4), timeout=60)
    # Prepare: the partition holds every pod, then the `to` template
    set_partition(client, ns, name, partition_for(4, 0))
    client.apply(statefulset(name, ns, "db:2"))
    eventually(lambda: observed(client, ref, 0), timeout=60)
    # batch 1: one pod on the new revision; repeating it (a restart) changes nothing
    set_partition(client, ns, name, partition_for(4, 1))
    set_partition(client, ns, name, partition_for(4, 1))
    eventually(lambda: observed(client, ref, 1), timeout=60)
    # drift correction re-applies the plain render: the partition stays the rollout's
    client.apply(statefulset(name, ns, "db:2"))
    live = eventually(lambda: observed(client, ref, 1), timeout=60)
    assert live is not None and partition_of(live) == 3
    owners = {
        m["manager"]
        for m in live["metadata"].get("managedFields") or ()
        if "f:updateStrategy" in str(m.get("fieldsV1"))
    }
    assert ROLLOUT_FIELD_MANAGER in owners
    # the end: the field goes back to the render (none: the server's default 0), every pod updates
    release_partition(client, ns, name)
    final = eventually(lambda: observed(client, ref, 4), timeout=60)
    assert final is not None and partition_of(final) == 0
