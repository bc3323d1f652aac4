"""Admission by LimitRange, ResourceQuota and PriorityClass, and the quota's status.

Pages imitated:
https://kubernetes.io/docs/concepts/policy/limit-range/ (defaults given to containers,
min/max refused with 403 Forbidden),
https://kubernetes.io/docs/concepts/policy/resource-quotas/ (``status.used``/``hard``
kept current; creations beyond ``hard`` refused with 403 ``exceeded quota: ...``),
https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
(``spec.priority`` from ``priorityClassName``; an unknown class refused).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, eventually, http, manifest


def _pod(name: str, resources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "nginx"}
    if resources is not None:
        container["resources"] = resources
    return manifest("v1", "Pod", name, spec={"containers": [container], **spec})


def _refused(sandbox: SandboxHandle, body: dict[str, Any], namespace: str = "default") -> str:
    """The message of the 403 a pod create gets."""
    status, error = http(sandbox, "POST", f"/api/v1/namespaces/{namespace}/pods", body)
    assert (status, error["reason"]) == (403, "Forbidden"), error
    return str(error["message"])


def _created(sandbox: SandboxHandle, body: dict[str, Any]) -> dict[str, Any]:
    status, pod = http(sandbox, "POST", "/api/v1/namespaces/default/pods", body)
    assert status == 201, pod
    return dict(pod)


def test_a_limit_range_defaults_and_bounds_containers(sandbox: SandboxHandle) -> None:
    limits = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "cpu-mem"},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"memory": "512Mi"},
                    "defaultRequest": {"memory": "256Mi"},
                    "max": {"cpu": "1"},
                    "min": {"cpu": "100m"},
                }
            ]
        },
    }
    status, stored = http(sandbox, "POST", "/api/v1/namespaces/default/limitranges", limits)
    assert status == 201
    # the object's own defaulting: a default limit from max, a default request from it
    item = stored["spec"]["limits"][0]
    assert item["default"] == {"cpu": "1", "memory": "512Mi"}
    assert item["defaultRequest"] == {"cpu": "1", "memory": "256Mi"}

    pod = _created(sandbox, _pod("defaulted"))
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "memory": "512Mi"},
        "requests": {"cpu": "1", "memory": "256Mi"},
    }
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container app; "
        "cpu, memory limit for container app"
    )
    # what the container says itself is kept
    own = _created(sandbox, _pod("own", {"requests": {"cpu": "200m"}, "limits": {"cpu": "500m"}}))
    assert own["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "200m",
        "memory": "256Mi",
    }

    message = _refused(sandbox, _pod("big", {"limits": {"cpu": "2"}}))
    assert message == (
        'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    )
    message = _refused(sandbox, _pod("small", {"requests": {"cpu": "50m"}}))
    assert message == (
        'pods "small" is forbidden: minimum cpu usage per Container is 100m, but request is 50m'
    )
    assert http(sandbox, "GET", "/api/v1/namespaces/default/pods/big")[0] == 404


def _quota(hard: dict[str, str], name: str = "compute") -> dict[str, Any]:
    return manifest("v1", "ResourceQuota", name, spec={"hard": hard})


def _status(core: client.CoreV1Api, name: str, used: dict[str, str]) -> Any:
    quota = core.read_namespaced_resource_quota(name, "default")
    return quota if quota.status and quota.status.used == used else None


def test_a_quota_counts_and_refuses_beyond_hard(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    hard = {"pods": "2", "requests.cpu": "1", "limits.memory": "1Gi", "count/configmaps": "3"}
    core.create_namespaced_resource_quota("default", _quota(hard))
    # kube-root-ca.crt is a ConfigMap of the namespace already
    quota = eventually(
        lambda: _status(
            core,
            "compute",
            {"pods": "0", "requests.cpu": "0", "limits.memory": "0", "count/configmaps": "1"},
        )
    )
    assert quota.status.hard == hard

    sized = {"requests": {"cpu": "400m"}, "limits": {"memory": "512Mi"}}
    _created(sandbox, _pod("one", sized))
    eventually(
        lambda: _status(
            core,
            "compute",
            {
                "pods": "1",
                "requests.cpu": "400m",
                "limits.memory": "512Mi",
                "count/configmaps": "1",
            },
        )
    )
    greedy = {"requests": {"cpu": "700m"}, "limits": {"memory": "256Mi"}}
    assert _refused(sandbox, _pod("greedy", greedy)) == (
        'pods "greedy" is forbidden: exceeded quota: compute, requested: requests.cpu=700m, '
        "used: requests.cpu=400m, limited: requests.cpu=1"
    )
    # a container that does not say what the quota caps
    assert _refused(sandbox, _pod("vague", {"requests": {"cpu": "100m"}})) == (
        'pods "vague" is forbidden: failed quota: compute: must specify limits.memory for: app'
    )
    _created(sandbox, _pod("two", sized))
    # every resource it would exceed is named, sorted (limits.memory is full too)
    assert _refused(
        sandbox, _pod("three", {"requests": {"cpu": "1m"}, "limits": {"memory": "1"}})
    ) == (
        'pods "three" is forbidden: exceeded quota: compute, requested: limits.memory=1,pods=1, '
        "used: limits.memory=1Gi,pods=2, limited: limits.memory=1Gi,pods=2"
    )
    # object counts of other kinds, and the usage going down as objects go
    for name in ("a", "b"):
        core.create_namespaced_config_map("default", client.V1ConfigMap(metadata={"name": name}))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("default", client.V1ConfigMap(metadata={"name": "c"}))
    assert refused.value.status == 403
    assert "exceeded quota: compute, requested: count/configmaps=1" in refused.value.body
    core.delete_namespaced_pod("one", "default", grace_period_seconds=0)
    eventually(
        lambda: (
            (quota := core.read_namespaced_resource_quota("compute", "default"))
            and quota.status.used["pods"] == "1"
            and quota.status.used["limits.memory"] == "512Mi"
        )
    )


def test_a_quota_refuses_a_controllers_pods_too(
    sandbox: SandboxHandle, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    core.create_namespaced_resource_quota("default", _quota({"count/pods": "2"}, name="pods"))
    apps.create_namespaced_deployment("default", deployment("web", replicas=3))
    eventually(lambda: _status(core, "pods", {"count/pods": "2"}))

    def failed_create() -> list[Any]:
        events = core.list_namespaced_event("default", field_selector="reason=FailedCreate")
        return list(events.items)

    event = eventually(failed_create)[0]
    assert (event.type, event.involved_object.kind, event.source.component) == (
        "Warning",
        "ReplicaSet",
        "replicaset-controller",
    )
    assert event.message.startswith('Error creating: pods "web-')
    assert event.message.endswith(
        "is forbidden: exceeded quota: pods, requested: count/pods=1, used: count/pods=2, "
        "limited: count/pods=2"
    )
    pods = core.list_namespaced_pod("default", label_selector="app=web").items
    assert len(pods) == 2  # the third is refused, as often as the ReplicaSet tries
    # room again: the ReplicaSet's next try creates it
    core.patch_namespaced_resource_quota("pods", "default", {"spec": {"hard": {"count/pods": "3"}}})
    eventually(
        lambda: len(core.list_namespaced_pod("default", label_selector="app=web").items) == 3
    )


def test_a_scoped_quota_counts_only_the_pods_it_matches(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    scoped = _quota({"pods": "1"}, name="best-effort")
    scoped["spec"]["scopes"] = ["BestEffort"]
    core.create_namespaced_resource_quota("default", scoped)
    eventually(lambda: _status(core, "best-effort", {"pods": "0"}))
    _created(sandbox, _pod("sized", {"requests": {"cpu": "10m"}}))
    _created(sandbox, _pod("free"))
    assert "exceeded quota: best-effort" in _refused(sandbox, _pod("free-too"))
    _created(sandbox, _pod("sized-too", {"requests": {"cpu": "10m"}}))
    eventually(lambda: _status(core, "best-effort", {"pods": "1"}))


def test_priority_comes_from_the_pods_class(sandbox: SandboxHandle) -> None:
    plain = _created(sandbox, _pod("plain"))
    assert (plain["spec"]["priority"], plain["spec"]["preemptionPolicy"]) == (
        0,
        "PreemptLowerPriority",
    )
    critical = _created(sandbox, _pod("critical", priorityClassName="system-cluster-critical"))
    assert critical["spec"]["priority"] == 2000000000
    assert _refused(sandbox, _pod("unknown", priorityClassName="nope")) == (
        'pods "unknown" is forbidden: no PriorityClass with name nope was found'
    )
    assert "must not be provided in pod spec" in _refused(
        sandbox, _pod("forged", priorityClassName="system-node-critical", priority=7)
    )

    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    high = {"metadata": {"name": "high"}, "value": 1000, "globalDefault": True}
    assert http(sandbox, "POST", classes, high)[0] == 201
    defaulted = _created(sandbox, _pod("defaulted"))
    assert (defaulted["spec"]["priorityClassName"], defaulted["spec"]["priority"]) == ("high", 1000)
    # one global default only; reserved names and values
    status, error = http(sandbox, "POST", classes, {**high, "metadata": {"name": "higher"}})
    assert (status, error["message"]) == (
        403,
        'priorityclasses.scheduling.k8s.io "higher" is forbidden: PriorityClass high is '
        "already marked as default. Only one default can exist",
    )
    status, error = http(sandbox, "POST", classes, {"metadata": {"name": "system-x"}, "value": 1})
    assert status == 422 and error["details"]["causes"][0]["field"] == "metadata.name"
    huge = {"metadata": {"name": "huge"}, "value": 2_000_000_000}
    status, error = http(sandbox, "POST", classes, huge)
    assert status == 422 and error["details"]["causes"][0]["field"] == "value"
    status, error = http(
        sandbox,
        "PATCH",
        f"{classes}/high",
        json.dumps({"value": 5}),
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "may not be changed in an update" in error["message"]
