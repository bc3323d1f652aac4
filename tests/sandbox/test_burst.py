"""What bounds the work one write can cause: the decoder's integer types, the apps/v1
workloads' required selector and template, and the controllers' burst of pod creations.

Pages imitated:
- https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#selector:
  ``.spec.selector`` is required and must match ``.spec.template.metadata.labels``
  (in apps/v1 neither defaults to the other), and a template needs its containers;
  the server reports every cause in one 422
  (https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).
- https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/deployment-v1/:
  ``replicas`` is an int32, so a larger number does not decode (a 400, not a 422); and
  ``maxSurge`` is an IntOrString, "a type that can hold an int32 or a string", so a
  number it cannot hold, a bool or a fraction does not decode either.
- https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/ and
  https://kubernetes.io/docs/concepts/workloads/controllers/job/: the controllers
  create a workload's missing pods in bursts (kube-controller-manager's
  ``BurstReplicas`` and the Job controller's ``MaxPodCreateDeletePerSync``, 500 each),
  writing the status between bursts. A ``Parallel`` StatefulSet
  (https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#parallel-pod-management)
  is held to the same burst here, so no single write keeps the sandbox busy.

Before, one ``replicas: 100000`` made the sandbox create every pod in one step and
serve nothing else meanwhile: a property test of arbitrary bodies spent seconds there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.sandbox.jobs import MAX_POD_CREATES_PER_SYNC
from reconciler.sandbox.replicasets import BURST_REPLICAS, slow_start
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http, job, manifest, watch_until

APPS = "/apis/apps/v1/namespaces/default"
LABELS = {"app": "burst"}
TEMPLATE = {
    "metadata": {"labels": LABELS},
    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
}


def _causes(reply: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in reply["details"]["causes"]]


@pytest.mark.parametrize(
    "kind, resource",
    [
        ("Deployment", "deployments"),
        ("ReplicaSet", "replicasets"),
        ("StatefulSet", "statefulsets"),
        ("DaemonSet", "daemonsets"),
    ],
)
def test_a_workload_without_selector_or_template_is_refused_with_every_cause(
    sandbox: SandboxHandle, kind: str, resource: str
) -> None:
    mismatch = "Invalid value: {}: `selector` does not match template `labels`"
    for spec in (None, {}):
        body = manifest("apps/v1", kind, "empty", spec=spec)
        status, reply = http(sandbox, "POST", f"{APPS}/{resource}", body)
        assert (status, reply["reason"]) == (422, "Invalid"), reply
        assert _causes(reply) == [
            ("FieldValueRequired", "spec.selector", "Required value"),
            ("FieldValueInvalid", "spec.template.metadata.labels", mismatch),
            ("FieldValueRequired", "spec.template.spec.containers", "Required value"),
        ]
    # a template without a selector: the selector is still required
    body = manifest("apps/v1", kind, "unselected", spec={"template": TEMPLATE})
    status, reply = http(sandbox, "POST", f"{APPS}/{resource}", body)
    assert status == 422
    assert [field for _, field, _ in _causes(reply)] == [
        "spec.selector",
        "spec.template.metadata.labels",
    ]
    # a selector and labels without a pod spec: the containers are still required
    template = {"metadata": {"labels": LABELS}}
    spec = {"selector": {"matchLabels": LABELS}, "template": template}
    status, reply = http(
        sandbox, "POST", f"{APPS}/{resource}", manifest("apps/v1", kind, "x", spec=spec)
    )
    assert status == 422
    assert _causes(reply) == [
        ("FieldValueRequired", "spec.template.spec.containers", "Required value")
    ]
    status, listed = http(sandbox, "GET", f"{APPS}/{resource}")
    assert (status, listed["items"]) == (200, [])


def test_a_merge_patch_that_drops_the_template_is_refused(sandbox: SandboxHandle) -> None:
    spec = {"replicas": 1, "selector": {"matchLabels": LABELS}, "template": TEMPLATE}
    status, _ = http(
        sandbox, "POST", f"{APPS}/deployments", manifest("apps/v1", "Deployment", "web", spec=spec)
    )
    assert status == 201
    patch = {"spec": {"template": None}}
    status, reply = http(
        sandbox, "PATCH", f"{APPS}/deployments/web", patch, "application/merge-patch+json"
    )
    assert status == 422
    assert ("FieldValueRequired", "spec.template.spec.containers", "Required value") in _causes(
        reply
    )


@pytest.mark.parametrize("replicas", [2**31, 2**40, -(2**31) - 1])
def test_a_replica_count_an_int32_cannot_hold_is_a_bad_request(
    sandbox: SandboxHandle, replicas: int
) -> None:
    spec = {"replicas": replicas, "selector": {"matchLabels": LABELS}, "template": TEMPLATE}
    body = manifest("apps/v1", "Deployment", "huge", spec=spec)
    status, reply = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert (status, reply["reason"]) == (400, "BadRequest"), reply
    assert reply["message"].endswith(
        f"json: cannot unmarshal number {replicas} into Go struct field "
        "DeploymentSpec.spec.replicas of type int32"
    )
    spec["replicas"] = 2**31 - 1  # the largest int32 decodes; the dry run makes no pods
    status, _ = http(sandbox, "POST", f"{APPS}/deployments?dryRun=All", body)
    assert status == 201


def _create_with_surge(sandbox: SandboxHandle, surge: object) -> tuple[int, Any]:
    """A dry-run create of a Deployment whose rolling update has this ``maxSurge``."""
    spec = {
        "selector": {"matchLabels": LABELS},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge}},
        "template": TEMPLATE,
    }
    body = manifest("apps/v1", "Deployment", "surge", spec=spec)
    return http(sandbox, "POST", f"{APPS}/deployments?dryRun=All", body)


@pytest.mark.parametrize(
    "surge, decoded",
    [
        (2**31, "number 2147483648"),
        (-(2**31) - 1, "number -2147483649"),
        (True, "bool"),
        (1.5, "number 1.5"),
        ({"value": 1}, "object"),
    ],
)
def test_an_int_or_string_holds_an_int32_or_a_string_and_nothing_else(
    sandbox: SandboxHandle, surge: object, decoded: str
) -> None:
    """IntOrString decodes a string into its string and anything else into its int32,
    whose error the decoder reports with the field (a 400, before any validation)."""
    status, reply = _create_with_surge(sandbox, surge)
    assert (status, reply["reason"]) == (400, "BadRequest"), reply
    assert reply["message"].endswith(
        f"json: cannot unmarshal {decoded} into Go struct field "
        "RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32"
    )


@pytest.mark.parametrize("surge", [2**31 - 1, 0, "25%", "100%"])
def test_an_int_or_string_takes_any_int32_and_any_string(
    sandbox: SandboxHandle, surge: object
) -> None:
    status, reply = _create_with_surge(sandbox, surge)
    assert status == 201, reply
    assert reply["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == surge


def test_a_service_target_port_an_int32_cannot_hold_is_a_bad_request(
    sandbox: SandboxHandle,
) -> None:
    """https://kubernetes.io/docs/reference/kubernetes-api/service-resources/service-v1/:
    ``targetPort`` is an IntOrString too; a number that fits but is no port is a 422."""
    ports = [{"name": "web", "port": 80, "targetPort": 2**33}]
    body = manifest("v1", "Service", "web", spec={"ports": ports})
    path = "/api/v1/namespaces/default/services?dryRun=All"
    status, reply = http(sandbox, "POST", path, body)
    assert (status, reply["reason"]) == (400, "BadRequest"), reply
    assert reply["message"].endswith(
        "json: cannot unmarshal number 8589934592 into Go struct field "
        "ServicePort.spec.ports.targetPort of type int32"
    )
    ports[0]["targetPort"] = 70000  # decodes, then validation finds it is no port
    status, reply = http(sandbox, "POST", path, body)
    assert (status, reply["reason"]) == (422, "Invalid"), reply
    assert [c["field"] for c in reply["details"]["causes"]] == ["spec.ports[0].targetPort"]
    ports[0]["targetPort"] = "http"  # a named port of the pods
    status, reply = http(sandbox, "POST", path, body)
    assert status == 201, reply


def test_slow_start_batches_double_and_end_with_what_is_left() -> None:
    assert slow_start(0) == []
    assert slow_start(1) == [1]
    assert slow_start(10) == [1, 2, 4, 3]
    batches = slow_start(BURST_REPLICAS)
    assert sum(batches) == BURST_REPLICAS
    assert batches[:-1] == [2**i for i in range(len(batches) - 1)]


def _created(sandbox: SandboxHandle, path: str, body: dict[str, Any]) -> str:
    """POST ``body``; the ``resourceVersion`` it was created at."""
    status, created = http(sandbox, "POST", path, body)
    assert status == 201, created
    return str(created["metadata"]["resourceVersion"])


def _watched(
    sandbox: SandboxHandle, path: str, since: str, seen: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """The objects of a watch on ``path`` from resource version ``since`` (every change
    after it, however late the watch starts:
    https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-watch),
    up to the one ``seen`` accepts."""
    query = f"resourceVersion={since}&timeoutSeconds=120"
    events = watch_until(sandbox, path, query, lambda event: seen(event["object"]))
    return [event["object"] for event in events]


def test_a_replicaset_creates_its_pods_a_burst_at_a_time(sandbox: SandboxHandle) -> None:
    wanted = BURST_REPLICAS + 40
    spec = {"replicas": wanted, "selector": {"matchLabels": LABELS}, "template": TEMPLATE}
    body = manifest("apps/v1", "ReplicaSet", "many", spec=spec)
    since = _created(sandbox, f"{APPS}/replicasets", body)

    def counted(rs: dict[str, Any]) -> int:
        return int((rs.get("status") or {}).get("replicas") or 0)

    counts = [
        counted(rs)
        for rs in _watched(sandbox, f"{APPS}/replicasets", since, lambda rs: counted(rs) == wanted)
    ]
    # every status write is one sync's; the first sync stopped at the burst
    assert BURST_REPLICAS in counts
    assert max(counts) == wanted and all(c <= wanted for c in counts)
    _, pods = http(sandbox, "GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dburst")
    assert len(pods["items"]) == wanted


def test_a_job_starts_its_pods_a_burst_at_a_time(sandbox: SandboxHandle) -> None:
    wanted = MAX_POD_CREATES_PER_SYNC + 20
    body = job("wide")
    body["spec"]["parallelism"] = body["spec"]["completions"] = wanted
    path = "/apis/batch/v1/namespaces/default/jobs"
    since = _created(sandbox, path, body)

    def active(j: dict[str, Any]) -> int:
        return int((j.get("status") or {}).get("active") or 0)

    started = [active(j) for j in _watched(sandbox, path, since, lambda j: active(j) > 0)]
    assert started[-1] == MAX_POD_CREATES_PER_SYNC  # the first sync's status

    def pods() -> int:
        _, listed = http(
            sandbox,
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3Dwide",
        )
        return len(listed["items"])

    assert eventually(lambda: pods() == wanted)


def _statefulset(name: str, replicas: int, policy: str) -> dict[str, Any]:
    spec = {
        "replicas": replicas,
        "serviceName": name,
        "podManagementPolicy": policy,
        "selector": {"matchLabels": LABELS},
        "template": TEMPLATE,
    }
    return manifest("apps/v1", "StatefulSet", name, spec=spec)


def test_a_parallel_statefulset_creates_its_pods_a_burst_at_a_time(
    sandbox: SandboxHandle,
) -> None:
    wanted = BURST_REPLICAS + 30
    body = _statefulset("wide", wanted, "Parallel")
    since = _created(sandbox, f"{APPS}/statefulsets", body)

    def counted(sts: dict[str, Any]) -> int:
        return int((sts.get("status") or {}).get("replicas") or 0)

    path = f"{APPS}/statefulsets"
    counts = [counted(s) for s in _watched(sandbox, path, since, lambda s: counted(s) == wanted)]
    assert BURST_REPLICAS in counts and max(counts) == wanted


def test_the_largest_statefulset_does_not_stop_the_server(sandbox: SandboxHandle) -> None:
    """``replicas: 2147483647`` is valid; its controller works a burst at a time, so the
    server still answers while it does (before, a sync built every ordinal first)."""
    body = _statefulset("huge", 2**31 - 1, "OrderedReady")
    assert http(sandbox, "POST", f"{APPS}/statefulsets", body)[0] == 201

    def first_pod() -> bool:
        status, pod = http(sandbox, "GET", "/api/v1/namespaces/default/pods/huge-0")
        return status == 200 and pod["metadata"]["name"] == "huge-0"

    assert eventually(first_pod)
    status, sets = http(sandbox, "GET", f"{APPS}/statefulsets")
    assert status == 200 and [s["metadata"]["name"] for s in sets["items"]] == ["huge"]
