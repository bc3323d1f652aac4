"""StorageClasses, PersistentVolumes and claims, as a cluster with a provisioner has them.

Imitates https://kubernetes.io/docs/concepts/storage/persistent-volumes/ (binding,
reclaiming, ``storageClassName: ""``), https://kubernetes.io/docs/concepts/storage/dynamic-provisioning/
(the default class, provisioning on demand),
https://kubernetes.io/docs/concepts/storage/storage-classes/ (#default-storageclass,
#volume-binding-mode) and
https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/ (#volume-claim-templates,
#persistentvolumeclaim-retention).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.sandbox.helpers import eventually, manifest

NS = "default"


def claim(
    name: str, class_name: str | None = None, size: str = "1Gi", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        **spec,
    }
    if class_name is not None:
        body["storageClassName"] = class_name
    return manifest("v1", "PersistentVolumeClaim", name, spec=body)


def storage_class(name: str, binding: str = "Immediate", reclaim: str = "Delete") -> dict[str, Any]:
    return manifest(
        "storage.k8s.io/v1",
        "StorageClass",
        name,
        provisioner="example.com/disk",
        volumeBindingMode=binding,
        reclaimPolicy=reclaim,
    )


def persistent_volume(name: str, size: str, *modes: str) -> dict[str, Any]:
    """A volume an administrator made (no class unless given one)."""
    spec = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "hostPath": {"path": f"/data/{name}"},
    }
    return manifest("v1", "PersistentVolume", name, spec=spec)


def bound(core: client.CoreV1Api, name: str) -> client.V1PersistentVolumeClaim | None:
    try:
        found = core.read_namespaced_persistent_volume_claim(name, NS)
    except ApiException as e:
        if e.status == 404:  # not made yet (a StatefulSet's claims come one pod at a time)
            return None
        raise
    return found if found.status.phase == "Bound" else None


def events_of(core: client.CoreV1Api, name: str) -> list[tuple[str, str, str]]:
    listed = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
    return [(e.type, e.reason, e.message) for e in listed.items]


@pytest.fixture
def storage(api_client: client.ApiClient) -> client.StorageV1Api:
    return client.StorageV1Api(api_client)


def test_the_cluster_has_one_default_storage_class(storage: client.StorageV1Api) -> None:
    [standard] = storage.list_storage_class().items
    assert standard.metadata.name == "standard"
    assert standard.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"
    assert standard.provisioner and standard.reclaim_policy == "Delete"
    assert standard.volume_binding_mode == "Immediate"


def test_a_storage_class_gets_the_api_defaults(storage: client.StorageV1Api) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "bare"},
        "provisioner": "x.io/y",
    }
    made = storage.create_storage_class(body)
    assert (made.reclaim_policy, made.volume_binding_mode) == ("Delete", "Immediate")


def test_a_claim_without_class_gets_the_default_and_binds_to_a_new_volume(
    core: client.CoreV1Api,
) -> None:
    created = core.create_namespaced_persistent_volume_claim(NS, claim("data"))
    assert created.spec.storage_class_name == "standard"
    assert created.status.phase == "Pending"
    done = eventually(lambda: bound(core, "data"))
    assert done.spec.volume_name == f"pvc-{created.metadata.uid}"
    assert done.status.capacity == {"storage": "1Gi"}
    assert done.status.access_modes == ["ReadWriteOnce"]
    assert done.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    volume = core.read_persistent_volume(done.spec.volume_name)
    assert volume.status.phase == "Bound"
    assert (
        volume.spec.claim_ref.name == "data" and volume.spec.claim_ref.uid == created.metadata.uid
    )
    assert volume.spec.capacity == {"storage": "1Gi"}
    assert volume.spec.storage_class_name == "standard"
    assert volume.spec.persistent_volume_reclaim_policy == "Delete"
    reasons = {r for _, r, _ in events_of(core, "data")}
    assert {"ExternalProvisioning", "Provisioning", "ProvisioningSucceeded"} <= reasons


def test_the_newest_default_class_wins(
    core: client.CoreV1Api, storage: client.StorageV1Api
) -> None:
    newer = storage_class("fast")
    newer["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    storage.create_storage_class(newer)
    created = core.create_namespaced_persistent_volume_claim(NS, claim("data"))
    assert created.spec.storage_class_name == "fast"


def test_an_empty_class_asks_for_no_class_and_binds_an_available_volume(
    core: client.CoreV1Api,
) -> None:
    created = core.create_namespaced_persistent_volume_claim(NS, claim("static", ""))
    assert created.spec.storage_class_name == ""
    # a claim made later and bound since: the first one's sync found no volume
    core.create_namespaced_persistent_volume_claim(NS, claim("probe"))
    eventually(lambda: bound(core, "probe"))
    assert core.read_namespaced_persistent_volume_claim("static", NS).status.phase == "Pending"
    volume = persistent_volume("disk-1", "5Gi", "ReadWriteOnce", "ReadOnlyMany")
    volume["spec"]["persistentVolumeReclaimPolicy"] = "Retain"
    core.create_persistent_volume(volume)
    done = eventually(lambda: bound(core, "static"))
    assert done.spec.volume_name == "disk-1"
    assert done.status.capacity == {"storage": "5Gi"}
    assert core.read_persistent_volume("disk-1").status.phase == "Bound"


def test_a_volume_nobody_claims_becomes_available(core: client.CoreV1Api) -> None:
    volume = persistent_volume("spare", "1Gi", "ReadWriteOnce")
    volume["spec"]["storageClassName"] = "manual"
    assert core.create_persistent_volume(volume).status.phase == "Pending"
    eventually(lambda: core.read_persistent_volume("spare").status.phase == "Available")


def test_a_claim_of_a_missing_class_stays_pending_with_a_warning_until_the_class_exists(
    core: client.CoreV1Api, storage: client.StorageV1Api
) -> None:
    core.create_namespaced_persistent_volume_claim(NS, claim("lost", "gold"))
    failed = ("Warning", "ProvisioningFailed", 'storageclass.storage.k8s.io "gold" not found')
    eventually(lambda: failed in events_of(core, "lost"))
    read = core.read_namespaced_persistent_volume_claim("lost", NS)
    assert read.status.phase == "Pending" and not read.spec.volume_name
    storage.create_storage_class(storage_class("gold"))
    eventually(lambda: bound(core, "lost"))


def test_wait_for_first_consumer_binds_when_a_pod_mounting_it_is_scheduled(
    core: client.CoreV1Api, storage: client.StorageV1Api
) -> None:
    storage.create_storage_class(storage_class("local", "WaitForFirstConsumer"))
    core.create_namespaced_persistent_volume_claim(NS, claim("late", "local"))
    waiting = (
        "Normal",
        "WaitForFirstConsumer",
        "waiting for first consumer to be created before binding",
    )
    eventually(lambda: waiting in events_of(core, "late"))
    assert core.read_namespaced_persistent_volume_claim("late", NS).status.phase == "Pending"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "user"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "volumeMounts": [{"name": "d", "mountPath": "/d"}],
                }
            ],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "late"}}],
        },
    }
    core.create_namespaced_pod(NS, pod)
    done = eventually(lambda: bound(core, "late"))
    node = core.read_namespaced_pod("user", NS).spec.node_name
    assert done.metadata.annotations["volume.kubernetes.io/selected-node"] == node


@pytest.mark.parametrize(("reclaim", "left"), [("Delete", None), ("Retain", "Released")])
def test_deleting_a_claim_reclaims_its_volume_by_policy(
    core: client.CoreV1Api, storage: client.StorageV1Api, reclaim: str, left: str | None
) -> None:
    storage.create_storage_class(storage_class("c", reclaim=reclaim))
    core.create_namespaced_persistent_volume_claim(NS, claim("gone", "c"))
    volume = eventually(lambda: bound(core, "gone")).spec.volume_name
    core.delete_namespaced_persistent_volume_claim("gone", NS)

    def reclaimed() -> bool:
        try:
            phase = core.read_persistent_volume(volume).status.phase
        except ApiException as e:
            return e.status == 404 and left is None
        return phase == left

    eventually(reclaimed)


def test_a_claim_without_access_modes_or_size_is_refused_with_every_cause(
    core: client.CoreV1Api,
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "bad"},
        "spec": {},
    }
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_persistent_volume_claim(NS, body)
    assert refused.value.status == 422
    assert "spec.accessModes: Required value" in refused.value.body
    assert "spec.resources[storage]: Required value" in refused.value.body


def statefulset(name: str, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "db",
                            "image": "postgres:16",
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql"}],
                        }
                    ]
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data", "labels": {"tier": "db"}},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "2Gi"}},
                    },
                }
            ],
            **spec,
        },
    }


def test_volume_claim_templates_make_one_bound_claim_per_pod_that_outlives_the_set(
    core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(NS, statefulset("pg"))
    names = ["data-pg-0", "data-pg-1"]
    eventually(lambda: all(bound(core, n) for n in names))
    pvc = core.read_namespaced_persistent_volume_claim("data-pg-1", NS)
    assert pvc.metadata.labels == {"tier": "db", "app": "pg"}
    assert pvc.spec.storage_class_name == "standard"
    assert not pvc.metadata.owner_references  # whenDeleted: Retain (the default)
    pod = core.read_namespaced_pod("pg-1", NS)
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-pg-1"}} in [
        client.ApiClient().sanitize_for_serialization(v) for v in pod.spec.volumes
    ]
    apps.delete_namespaced_stateful_set("pg", NS)
    eventually(lambda: not core.list_namespaced_pod(NS, label_selector="app=pg").items)
    left = core.list_namespaced_persistent_volume_claim(NS, label_selector="app=pg").items
    assert sorted(c.metadata.name for c in left) == names


def test_a_delete_retention_policy_deletes_the_claims_with_the_set(
    core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    policy = {"whenDeleted": "Delete", "whenScaled": "Retain"}
    apps.create_namespaced_stateful_set(
        NS, statefulset("tmp", 1, persistentVolumeClaimRetentionPolicy=policy)
    )
    eventually(lambda: bound(core, "data-tmp-0"))
    apps.delete_namespaced_stateful_set("tmp", NS)
    eventually(
        lambda: not core.list_namespaced_persistent_volume_claim(NS, label_selector="app=tmp").items
    )
