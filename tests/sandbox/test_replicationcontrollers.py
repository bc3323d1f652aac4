"""ReplicationController: the ReplicaSet's predecessor, run by the same controller.

Imitates https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/:
an RC keeps ``spec.replicas`` pods of its template, its selector (a plain label map)
defaults to the template's labels, it can be scaled through ``/scale`` (as ``kubectl
scale rc`` does), and deleting it deletes its pods.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.sandbox.helpers import eventually, manifest
from tests.sandbox.workloads import fast_sandbox, ready


def _rc(name: str, replicas: int, selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
        },
    }
    if selector is not None:
        spec["selector"] = selector
    return manifest("v1", "ReplicationController", name, spec=spec)


def test_a_replication_controller_keeps_its_pods_and_scales() -> None:
    with fast_sandbox() as (_sandbox, api):
        core = client.CoreV1Api(api)
        created = core.create_namespaced_replication_controller("default", _rc("web", 2))
        # the selector and the RC's labels default to the template's labels
        assert created.spec.selector == {"app": "web"}
        assert created.metadata.labels == {"app": "web"}

        def pods(count: int) -> list[Any]:
            found = core.list_namespaced_pod("default", label_selector="app=web").items
            alive = [p for p in found if p.metadata.deletion_timestamp is None]
            return alive if len(alive) == count and all(map(ready, alive)) else []

        first = eventually(lambda: pods(2))
        owner = first[0].metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("ReplicationController", "web", True)
        status = eventually(
            lambda: (
                s
                if (
                    s := core.read_namespaced_replication_controller_status("web", "default")
                ).status.ready_replicas
                == 2
                else None
            )
        )
        assert status.status.available_replicas == 2
        assert status.status.observed_generation == status.metadata.generation

        scale = core.read_namespaced_replication_controller_scale("web", "default")
        assert (scale.spec.replicas, scale.status.selector) == (2, "app=web")
        core.patch_namespaced_replication_controller_scale(
            "web", "default", {"spec": {"replicas": 3}}
        )
        eventually(lambda: pods(3))
        events = core.list_namespaced_event(
            "default", field_selector="involvedObject.kind=ReplicationController"
        ).items
        assert {(e.reason, e.source.component) for e in events} == {
            ("SuccessfulCreate", "replication-controller")
        }

        core.delete_namespaced_replication_controller(
            "web", "default", propagation_policy="Foreground"
        )
        eventually(lambda: not core.list_namespaced_pod("default", label_selector="app=web").items)


def test_a_selector_that_misses_the_template_is_refused() -> None:
    with fast_sandbox() as (_sandbox, api):
        core = client.CoreV1Api(api)
        body = _rc("web", 1, selector={"app": "other"})
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_replication_controller("default", body)
        assert refused.value.status == 422
        assert "spec.template.metadata.labels: Invalid value: " in refused.value.body.replace(
            '\\"', '"'
        )
        assert "selector does not match template labels" in refused.value.body
        never = _rc("job-like", 1)
        never["spec"]["template"]["spec"]["restartPolicy"] = "Never"
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_replication_controller("default", never)
        assert refused.value.status == 422
        assert "spec.template.spec.restartPolicy" in refused.value.body
