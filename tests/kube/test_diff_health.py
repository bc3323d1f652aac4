"""Diff against a live API, and waiting for health with a timeout."""

from __future__ import annotations

from typing import Any

from reconciler.kube import (
    ApplyOptions,
    Health,
    InstanceTarget,
    Limits,
    LiveState,
    ObjectDiff,
    diff_instance,
    wait_healthy,
)
from reconciler.model.changeset import ObjectRef
from tests.kube.conftest import Backend, configmap, deployment, edit_like_kubectl
from tests.kube.test_apply import run


def diff(
    be: Backend, ns: str, objects: list[dict[str, Any]], limits: Limits | None = None
) -> list[ObjectDiff]:
    target = InstanceTarget(be.cluster, "web", ns, tuple(objects))
    options = ApplyOptions(limits=limits or Limits())
    return diff_instance(be.client, target, options, LiveState(be.client, be.cluster))


def test_diff_shows_creates_then_nothing(backend: Backend) -> None:
    ns = backend.namespace("web")
    objects = [configmap("cfg", ns, "web", a="1")]
    (created,) = diff(backend, ns, objects)
    assert created.change == "create"
    assert f"+++ desired/ConfigMap/{ns}/cfg" in created.diff
    run(backend, "web", ns, objects)
    backend.reset_log()
    assert diff(backend, ns, objects) == []
    assert backend.writes() in ([], None)


def test_diff_shows_drift_without_writing(backend: Backend) -> None:
    ns = backend.namespace("web")
    objects = [deployment("podinfo", ns, "web", replicas=2)]
    run(backend, "web", ns, objects)
    ref = ObjectRef("apps/v1", "Deployment", ns, "podinfo")
    edit_like_kubectl(backend.client, ref, {"spec": {"replicas": 5}})
    backend.reset_log()
    (changed,) = diff(backend, ns, objects)
    text = changed.diff
    assert changed.change == "update"
    assert "--- live/Deployment" in text and "-  replicas: 5" in text and "+  replicas: 2" in text
    log = backend.log()
    if log is not None:  # only dry-run patches
        assert all("dryRun=All" in e.query for e in log if e.verb == "patch")
    live = backend.client.get(ref)
    assert live is not None and live["spec"]["replicas"] == 5


def test_diff_shows_prune_as_delete(backend: Backend) -> None:
    ns = backend.namespace("web")
    run(backend, "web", ns, [configmap("a", ns, "web"), configmap("b", ns, "web")])
    (gone,) = diff(backend, ns, [configmap("a", ns, "web")])
    assert gone.change == "delete" and gone.ref.name == "b"


def test_diff_reports_limit_violations(backend: Backend) -> None:
    ns = backend.namespace("web")
    (error,) = diff(backend, ns, [configmap("a", "kube-system", "web")], Limits(("web*",)))
    assert error.change == "error" and "kube-system" in error.message


def test_wait_healthy_until_ready(backend: Backend) -> None:
    ns = backend.namespace("web")
    objects = [deployment("podinfo", ns, "web"), configmap("cfg", ns, "web")]
    run(backend, "web", ns, objects)
    report = wait_healthy(backend.client, objects, timeout=60, interval=0.05)
    assert report.healthy and not report.timed_out, report.message()


def test_wait_healthy_times_out_on_a_failing_workload(backend: Backend) -> None:
    if backend.sandbox is None:
        return  # the fail annotation is a sandbox feature
    ns = backend.namespace("web")
    run(backend, "web", ns, [deployment("podinfo", ns, "web", fail=True)])
    ref = ObjectRef("apps/v1", "Deployment", ns, "podinfo")
    report = wait_healthy(backend.client, [ref], timeout=0.3, interval=0.05)
    assert not report.healthy
    assert report.timed_out or report.failed
    assert f"Deployment/{ns}/podinfo" in report.message()


def test_wait_healthy_reports_missing_objects(backend: Backend) -> None:
    ref = ObjectRef("v1", "ConfigMap", "default", backend.name("missing"))
    report = wait_healthy(backend.client, [ref], timeout=0.1, interval=0.05)
    assert report.timed_out and report.objects[0].health is Health.NOT_FOUND
