"""The engine's health of claims, StatefulSet volumes, load balancers, CRDs, bare pods and
ReplicaSets, applied through the engine to a cluster that really produces those states.

On the sandbox: claims bind through the default StorageClass
(https://kubernetes.io/docs/concepts/storage/dynamic-provisioning/), a
``WaitForFirstConsumer`` class waits for a pod
(https://kubernetes.io/docs/concepts/storage/storage-classes/#volume-binding-mode), a
LoadBalancer Service has an ingress only where a cloud gives one
(https://kubernetes.io/docs/concepts/services-networking/service/#loadbalancer), and a
CRD is Established after its names are accepted
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.kube import Health, HealthReport, KubeClient, wait_healthy
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import running_sandbox
from reconciler.sandbox.timing import Timing
from tests.kube.conftest import FAST_RETRY, Backend, labels
from tests.kube.test_apply import run
from tests.sandbox import test_storage as storage
from tests.sandbox.test_discovery import WIDGET_CRD

TIMEOUT = 60.0  # generous: a busy machine only makes these slower


# Scenarios only the sandbox can play (tests/lanes.py): the [real] variant is skipped
STORAGE = "needs the sandbox's StorageClasses and provisioner"
sandbox_storage = pytest.mark.sandbox_lane_only(STORAGE)
NO_CLOUD = "needs a cluster without a cloud: a real one may give load balancers an ingress"


def sandbox_only(backend: Backend, reason: str = STORAGE) -> None:
    """The run-time check behind the mark: in the real lane an unmarked scenario that
    gets here fails, saying to mark it (tests/conftest.py)."""
    if backend.sandbox is None:
        pytest.skip(reason)


def claim(name: str, namespace: str, class_name: str | None = None) -> dict[str, Any]:
    body = storage.claim(name, class_name)
    body["metadata"].update(namespace=namespace, labels=labels("web"))
    return body


def pod_spec(claim_name: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "ghcr.io/stefanprodan/podinfo:6.5.0"}
    spec: dict[str, Any] = {"containers": [container]}
    if claim_name:
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return spec


def workload(kind: str, name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels("web")},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec()},
            **spec,
        },
    }


def verdicts(report: HealthReport) -> dict[str, tuple[Health, str]]:
    return {f"{o.ref.kind}/{o.ref.name}": (o.health, o.message) for o in report.objects}


def still(client: KubeClient, objects: list[Any], seconds: float = 1.0) -> HealthReport:
    """What health says after waiting ``seconds`` for a state nothing will change."""
    report = wait_healthy(client, objects, timeout=seconds, interval=0.05)
    assert report.timed_out and not report.failed, report.message()
    return report


@sandbox_storage
def test_a_claim_is_in_progress_until_a_pod_makes_it_bind(backend: Backend) -> None:
    sandbox_only(backend)
    ns = backend.namespace("web")
    wait_class = storage.storage_class(backend.name("late"), "WaitForFirstConsumer")
    run(backend, "sc", ns, [wait_class])
    pvc = claim("data", ns, wait_class["metadata"]["name"])
    run(backend, "web", ns, [pvc])
    waiting = still(backend.client, [pvc])
    assert verdicts(waiting) == {
        "PersistentVolumeClaim/data": (Health.IN_PROGRESS, "PVC is not Bound. phase: Pending")
    }
    user = workload("Deployment", "user", ns, replicas=1)
    user["spec"]["template"]["spec"] = pod_spec("data")
    run(backend, "web", ns, [pvc, user])
    done = wait_healthy(backend.client, [pvc, user], timeout=TIMEOUT, interval=0.05)
    assert done.healthy, done.message()
    assert verdicts(done)["PersistentVolumeClaim/data"] == (Health.CURRENT, "PVC is Bound")


@sandbox_storage
def test_a_claim_of_the_default_class_becomes_current(backend: Backend) -> None:
    sandbox_only(backend)
    ns = backend.namespace("web")
    pvc = claim("data", ns)
    run(backend, "web", ns, [pvc])
    done = wait_healthy(backend.client, [pvc], timeout=TIMEOUT, interval=0.05)
    assert verdicts(done) == {"PersistentVolumeClaim/data": (Health.CURRENT, "PVC is Bound")}


@sandbox_storage
def test_a_claim_of_a_missing_class_stays_in_progress_until_the_class_exists(
    backend: Backend,
) -> None:
    sandbox_only(backend)
    ns = backend.namespace("web")
    gold = storage.storage_class(backend.name("gold"))
    pvc = claim("data", ns, gold["metadata"]["name"])
    run(backend, "web", ns, [pvc])
    assert verdicts(still(backend.client, [pvc]))["PersistentVolumeClaim/data"] == (
        Health.IN_PROGRESS,
        "PVC is not Bound. phase: Pending",
    )
    run(backend, "sc", ns, [gold])
    assert wait_healthy(backend.client, [pvc], timeout=TIMEOUT, interval=0.05).healthy


@sandbox_storage
def test_a_statefulset_with_claim_templates_is_current_with_its_claims_bound(
    backend: Backend,
) -> None:
    sandbox_only(backend)
    ns = backend.namespace("web")
    template = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    sts = workload("StatefulSet", "db", ns, serviceName="db", volumeClaimTemplates=[template])
    sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"}
    ]
    run(backend, "web", ns, [sts])
    done = wait_healthy(backend.client, [sts], timeout=TIMEOUT, interval=0.05)
    assert done.healthy, done.message()
    claims = [ObjectRef("v1", "PersistentVolumeClaim", ns, f"data-db-{i}") for i in (0, 1)]
    bound = wait_healthy(backend.client, claims, timeout=TIMEOUT, interval=0.05)
    assert {o.message for o in bound.objects} == {"PVC is Bound"}, bound.message()


def service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels("web")},
        "spec": {"type": "LoadBalancer", "selector": {"app": name}, "ports": [{"port": 80}]},
    }


@pytest.mark.sandbox_lane_only(NO_CLOUD)
def test_a_load_balancer_without_a_cloud_stays_in_progress(backend: Backend) -> None:
    sandbox_only(backend, NO_CLOUD)
    ns = backend.namespace("web")
    lb = service("front", ns)
    run(backend, "web", ns, [lb])
    assert verdicts(still(backend.client, [lb])) == {
        "Service/front": (
            Health.IN_PROGRESS,
            "Service does not have load balancer ingress IP address",
        )
    }


@pytest.fixture
def cloud() -> Iterator[Backend]:
    """A sandbox that plays a cloud's load balancers (``--load-balancer-ips``)."""
    timing = Timing(controller_delay=0.05, load_balancer_ips="198.51.100.0/28")
    with (
        running_sandbox(timing=timing) as handle,
        KubeClient.connect(handle.kubeconfig, retry=FAST_RETRY) as client,
    ):
        yield Backend(client, handle.kubeconfig, "test", sandbox=handle)


def test_a_load_balancer_with_a_cloud_becomes_current(cloud: Backend) -> None:
    lb = service("front", "web")
    run(cloud, "web", "web", [lb])
    done = wait_healthy(cloud.client, [lb], timeout=TIMEOUT, interval=0.05)
    assert verdicts(done) == {"Service/front": (Health.CURRENT, "Service is ready")}
    live = cloud.client.get(ObjectRef.of(lb))
    assert live is not None and live["status"]["loadBalancer"]["ingress"][0]["ip"].startswith(
        "198.51.100."
    )


def crd(name: str, plural: str, kind: str, short: str) -> dict[str, Any]:
    body = copy.deepcopy(WIDGET_CRD)
    group = f"{name}.example.com"
    body["metadata"] = {"name": f"{plural}.{group}", "labels": labels("crds")}
    body["spec"]["group"] = group
    body["spec"]["names"] = {"plural": plural, "kind": kind, "shortNames": [short]}
    return body


def test_a_crd_is_current_once_established_and_failed_on_a_name_conflict(
    backend: Backend,
) -> None:
    group = backend.name("health").replace("-", "")
    widgets = crd(group, "widgets", "Widget", f"wd{group}")
    run(backend, "crds", "default", [widgets])
    done = wait_healthy(backend.client, [widgets], timeout=TIMEOUT, interval=0.05)
    assert verdicts(done) == {
        f"CustomResourceDefinition/{widgets['metadata']['name']}": (
            Health.CURRENT,
            "CRD is established",
        )
    }
    rival = crd(group, "gadgets", "Gadget", f"wd{group}")
    try:
        run(backend, "rival", "default", [rival])
        failed = wait_healthy(backend.client, [rival], timeout=TIMEOUT, interval=0.05)
        assert [(o.health, o.message) for o in failed.objects] == [
            (Health.FAILED, f'"wd{group}" is already in use')
        ]
    finally:
        for body in (rival, widgets):
            backend.client.delete(ObjectRef.of(body))


def test_a_bare_pod_and_replica_set_are_judged_by_their_own_rules(backend: Backend) -> None:
    ns = backend.namespace("web")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo", "namespace": ns, "labels": labels("web")},
        "spec": pod_spec(),
    }
    rs = workload("ReplicaSet", "set", ns)
    run(backend, "web", ns, [pod, rs])
    done = wait_healthy(backend.client, [pod, rs], timeout=TIMEOUT, interval=0.05)
    assert verdicts(done) == {
        "Pod/solo": (Health.CURRENT, "Pod is Ready"),
        "ReplicaSet/set": (Health.CURRENT, "ReplicaSet is available. Replicas: 2"),
    }
