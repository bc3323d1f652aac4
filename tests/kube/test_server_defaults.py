"""The engine against an API server that defaults and normalises what it stores.

A real API server returns objects with fields the manifest never set (a Service's
``clusterIP``, a Deployment's ``strategy``, containers' ``imagePullPolicy``...), with
quantities in canonical form (``1000m`` reads back ``1``) and with Secret
``stringData`` folded into ``data``
(https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/,
https://kubernetes.io/docs/concepts/configuration/secret/). None of that is drift:
the second pass must write nothing, ``diff`` must show nothing, and the live objects
must match their manifests. A key removed from a Secret's ``stringData`` must leave
the cluster (with ``stringData`` sent as is, a real server keeps it: kubernetes#108008).
"""

from __future__ import annotations

import base64
import time
from typing import Any

from reconciler.kube import ApplyOptions, InstanceTarget, LiveState, apply_instance
from reconciler.kube.apply import InstanceResult
from reconciler.kube.compare import matches
from reconciler.kube.diff import diff_instance
from reconciler.model.changeset import ObjectRef
from tests.kube.conftest import Backend, deployment, labels


def run(be: Backend, namespace: str, objects: list[dict[str, Any]]) -> InstanceResult:
    target = InstanceTarget(be.cluster, "web", namespace, tuple(objects), "demo", "1.0.0")
    return apply_instance(be.client, target, ApplyOptions(), LiveState(be.client, be.cluster))


def meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": labels("web")}


def pod_spec(restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "resources": {
                    "requests": {"cpu": "1000m", "memory": "1024Mi"},
                    "limits": {"cpu": 2, "memory": "1.5Gi", "ephemeral-storage": "1000"},
                },
                "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "readinessProbe": {"httpGet": {"port": 8080}},
                "ports": [{"containerPort": 8080}],
            }
        ],
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "tmp"}],
    }
    if restart:
        spec["restartPolicy"] = restart
    return spec


def manifests(ns: str) -> list[dict[str, Any]]:
    web = deployment("web", ns, "web")
    web["spec"]["template"]["spec"] = pod_spec()
    selector = {"matchLabels": {"app": "db"}}
    template = {"metadata": {"labels": {"app": "db"}}, "spec": pod_spec()}
    job_template = {"spec": pod_spec("Never")}
    return [
        web,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": meta("db", ns),
            "spec": {
                "serviceName": "db",
                "selector": selector,
                "template": template,
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1024Mi"}},
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta("web", ns),
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta("db", ns),
            "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta("creds", ns),
            "stringData": {"user": "admin", "password": "hunter2"},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta("once", ns),
            "spec": {"template": job_template},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": meta("nightly", ns),
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": job_template}}},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta("web", ns),
            "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]},
        },
    ]


def test_defaulted_objects_are_unchanged_on_the_second_pass(backend: Backend) -> None:
    ns = backend.namespace("web")
    objects = manifests(ns)
    first = run(backend, ns, objects)
    assert first.ok, first.message
    backend.reset_log()
    second = run(backend, ns, objects)
    assert second.ok, second.message
    assert {str(e.action) for e in second.changes.entries} == {"unchanged"}
    assert backend.writes() in ([], None)
    assert (
        diff_instance(
            backend.client,
            InstanceTarget(backend.cluster, "web", ns, tuple(objects), "demo", "1.0.0"),
        )
        == []
    )


def test_live_objects_match_their_manifests(backend: Backend) -> None:
    """The subset check alone (no fingerprint) sees no drift in server-filled fields."""
    ns = backend.namespace("web")
    objects = manifests(ns)
    assert run(backend, ns, objects).ok
    for obj in objects:
        live = backend.client.get(ObjectRef.of(obj))
        assert matches(obj, live), ObjectRef.of(obj)
    live_web = backend.client.get(ObjectRef.of(objects[0]))
    assert live_web is not None
    resources = live_web["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1", "memory": "1Gi"}  # what the server stores


def test_string_data_key_removed_from_git_leaves_the_cluster(backend: Backend) -> None:
    ns = backend.namespace("web")
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta("creds", ns),
        "stringData": {"user": "admin", "password": "hunter2"},
    }
    assert run(backend, ns, [secret]).ok
    secret["stringData"] = {"username": "admin", "password": "hunter2"}
    assert run(backend, ns, [secret]).ok
    live = backend.client.get(ObjectRef.of(secret))
    assert live is not None and "stringData" not in live
    assert live["data"] == {
        "username": base64.b64encode(b"admin").decode(),
        "password": base64.b64encode(b"hunter2").decode(),
    }


def test_diff_compares_with_the_servers_dry_run_answer(backend: Backend) -> None:
    """Without an inventory (objects applied by hand), diff asks the server for a dry-run
    apply; its defaulted, normalised answer is what the live object already holds."""
    ns = backend.namespace("web")
    objects = manifests(ns)
    backend.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for obj in objects:
        backend.client.apply(obj)
    # The Deployment controller annotates a new Deployment with its revision; a diff read
    # before and dry-run after that write would show it as a change (seen under load).
    # https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#checking-rollout-history-of-a-deployment
    web = ObjectRef("apps/v1", "Deployment", ns, "web")
    deadline = time.monotonic() + 30
    while "deployment.kubernetes.io/revision" not in _annotations(backend, web):
        assert time.monotonic() < deadline, "the Deployment controller never saw web"
        time.sleep(0.02)
    target = InstanceTarget(backend.cluster, "web", ns, tuple(objects), "demo", "1.0.0")
    assert diff_instance(backend.client, target) == []


def _annotations(backend: Backend, ref: ObjectRef) -> dict[str, str]:
    live = backend.client.get(ref) or {}
    return dict((live.get("metadata") or {}).get("annotations") or {})
