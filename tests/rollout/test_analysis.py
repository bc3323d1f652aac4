"""A batch's ``analysis`` Job (SPEC section 4): run after the batch is ready, it must succeed.

The daemon scenarios run against the sandbox, whose Job controller runs pods to
completion (``reconciler/sandbox/jobs.py``); a pod template annotated
``sandbox.reconciler.dev/fail`` fails, as a real failing container would, and the
Job fails with ``BackoffLimitExceeded`` once ``backoffLimit`` is used up
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import check_catalog, plan_instance
from reconciler.model.status import Phase
from reconciler.rollout import (
    ANALYSIS_LABEL,
    OWNER_LABEL,
    AnalysisRun,
    analysis_job_name,
    render_analysis_job,
    rollout_key,
)
from reconciler.sandbox.store import StoredEvent
from tests.daemon.conftest import World, rested, settle, world
from tests.daemon.test_pass import CHANNELS
from tests.factories import write_catalog
from tests.rollout.test_daemon_rollout import WEB, _web

__all__ = ["world"]  # the daemon tests' fixture: a catalog repository and a sandbox

SMOKE = "apps/podinfo/versions/6.6.0/checks/smoke.yaml"
JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {{name: smoke}}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {{{notes}}}
    spec:
      restartPolicy: Never
      containers:
        - name: smoke
          image: "${{images.podinfo}}"
          env: [{{name: RECONCILER_BATCH, value: "overridden"}}]
"""
PASSING = JOB.format(notes="")
FAILING = JOB.format(
    notes="sandbox.reconciler.dev/fail: 'true', sandbox.reconciler.dev/log: '2 of 5 checks failed'"
)


def analysed(more: str = "") -> str:
    """web's instance file: 5 replicas in batches [1, 50%, 50%], each checked by smoke.yaml."""
    return WEB.format(extra="  analysis: checks/smoke.yaml\n" + more)


def _pod_versions(world: World) -> set[str]:
    """The versions web's workload pods run (an analysis Job's pods are not web's)."""
    pods = world.client.list("v1", "Pod", namespace="web")
    return {
        str(c["image"]).rsplit(":", 1)[1]
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and "batch.kubernetes.io/job-name" not in (p["metadata"].get("labels") or {})
        for c in p["spec"]["containers"]
    }


def _jobs(world: World) -> list[dict[str, Any]]:
    return world.client.list("batch/v1", "Job", namespace="web")


def _release(world: World, job: str, instance: str) -> None:
    world.commit(SMOKE, job, "smoke check")
    world.commit("clusters/prod/instances/web.yaml", instance, "web: batches, analysed")
    assert _web(world.daemon.run_pass()).phase is Phase.READY  # a first install: no analysis
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")


@pytest.mark.slow
def test_each_batch_runs_its_analysis_after_its_pods_are_ready_and_none_is_left(
    world: World,
) -> None:
    """One Job per batch, created only once the batch's new pods are all ready, with the
    facts it checks in its environment; after success no Job is left."""
    pods: dict[str, tuple[bool, str]] = {}
    created: list[tuple[dict[str, Any], int]] = []  # (Job, ready 6.6.0 pods when created)

    def on_event(event: StoredEvent) -> None:
        if event.namespace != "web":
            return
        if event.resource == ("", "pods") and "job-name" not in str(event.obj["metadata"]):
            name = event.obj["metadata"]["name"]
            if event.type == "DELETED":
                pods.pop(name, None)
                return
            conditions = (event.obj.get("status") or {}).get("conditions") or []
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            pods[name] = (ready, str(event.obj["spec"]["containers"][0]["image"]))
        elif event.resource == ("batch", "jobs") and event.type == "ADDED":
            new = sum(1 for ready, image in pods.values() if ready and image.endswith(":6.6.0"))
            created.append((event.obj, new))

    _release(world, PASSING, analysed())
    world.sandbox.observe(on_event)
    outcomes = settle(world.daemon)
    web = _web(outcomes[-1])
    assert web.phase is Phase.READY and web.version == "6.6.0"
    assert [job["metadata"]["labels"]["reconciler.dev/rollout-batch"] for job, _ in created] == [
        "1",
        "2",
        "3",
    ]
    # ready new pods when each Job was created, against the targets of [1, 50%, 50%] on 5
    assert all(ready >= want for (_, ready), want in zip(created, (1, 3, 5), strict=True))
    first = created[0][0]
    assert first["metadata"]["name"].startswith("web-analysis-1-")
    env = {e["name"]: e["value"] for e in first["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RECONCILER_INSTANCE"] == "web" and env["RECONCILER_CLUSTER"] == "prod"
    assert (env["RECONCILER_FROM_VERSION"], env["RECONCILER_TO_VERSION"]) == ("6.5.0", "6.6.0")
    assert (env["RECONCILER_BATCH"], env["RECONCILER_BATCHES"]) == ("1", "3")
    assert _jobs(world) == []  # "no helper object left": every analysis Job is gone
    assert _pod_versions(world) == {"6.6.0"}


def test_a_failed_analysis_holds_then_after_a_file_change_rolls_back(world: World) -> None:
    """``hold`` leaves both versions running with the failed Job kept; a changed instance
    file (``onFailure: rollback``) retries: the retry's own Job fails too, replaces the
    first attempt's, and every replica returns to ``from``."""
    _release(world, FAILING, analysed())
    held = _web(settle(world.daemon)[-1])
    assert held.phase is Phase.STALLED and held.reason == "RolloutFailed"
    assert held.rollout is not None and str(held.rollout.state) == "rolloutFailed"
    assert "batch 1 analysis Job failed: Job/web/web-analysis-1-" in held.message
    assert "BackoffLimitExceeded" in held.message and "2 of 5 checks failed" in held.message
    assert _pod_versions(world) == {"6.5.0", "6.6.0"}  # batch 1's pod and the copy's
    first = [j["metadata"]["name"] for j in _jobs(world)]
    world.daemon.run_pass()
    assert [j["metadata"]["name"] for j in _jobs(world)] == first  # kept, never pruned

    world.commit("clusters/prod/instances/web.yaml", analysed("  onFailure: rollback\n"), "rb")
    web = _web(settle(world.daemon)[-1])
    assert web.phase is Phase.STALLED and web.reason == "RolledBack"
    assert web.version == "6.5.0" and web.rollout is not None and web.rollout.batch == 1
    assert "batch 1 analysis Job failed" in web.message
    for _ in range(100):  # the rollback's cleanup: the copy goes once 6.5.0 is back
        if _pod_versions(world) == {"6.5.0"}:
            break
        rested(world.daemon).run_pass()
    assert _pod_versions(world) == {"6.5.0"}
    kept = [j["metadata"]["name"] for j in _jobs(world)]
    assert len(kept) == 1 and kept != first and kept[0].startswith("web-analysis-1-")
    again = world.daemon.run_pass()  # same desired version and file: not retried
    assert _web(again).reason == "RolledBack" and again.commits == []
    assert [j["metadata"]["name"] for j in _jobs(world)] == kept


# --- rendering and validation (no cluster) ---------------------------------------------


def _catalog(tmp_path: Path, files: dict[str, str | bytes | None]) -> Any:
    return load_catalog(write_catalog(tmp_path, files))


def test_the_job_is_rendered_like_a_manifest_under_the_rollouts_name(tmp_path: Path) -> None:
    catalog = _catalog(
        tmp_path,
        {
            SMOKE: PASSING.replace(
                "backoffLimit: 0", "backoffLimit: 0\n  activeDeadlineSeconds: 900"
            ),
            "apps/podinfo/versions/6.6.0/version.yaml": """\
                apiVersion: reconciler/v1
                kind: AppVersion
                app: podinfo
                version: 6.6.0
                images: {podinfo: "ghcr.io/stefanprodan/podinfo:6.6.0"}
                parameters: {replicas: {default: 2}, message: {default: hello}}
                rollout: {batches: [1, 50%, 50%], analysis: checks/smoke.yaml}
                """,
        },
    )
    assert not [p for p in catalog.problems if p.is_error]
    version = catalog.apps["podinfo"].versions["6.6.0"]
    instance = catalog.clusters["prod"].instances["web"]
    key = rollout_key("6.5.0", "6.6.0", "2026-01-01T00:00:00Z")
    run = AnalysisRun("prod", "6.5.0", "6.6.0", 2, 3, key)
    template = version.analysis_jobs["checks/smoke.yaml"]
    job, problems = render_analysis_job(template, instance, version, run, timeout_seconds=300)
    assert problems == () and job is not None
    meta = job["metadata"]
    assert (meta["name"], meta["namespace"]) == (f"web-analysis-2-{key}", "web")
    assert meta["labels"][OWNER_LABEL] == "web" and meta["labels"][ANALYSIS_LABEL] == key
    assert job["spec"]["activeDeadlineSeconds"] == 300  # capped by healthTimeoutSeconds
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/stefanprodan/podinfo:6.6.0"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["RECONCILER_BATCH"] == "2"  # the reconciler's facts win over the file's
    # another attempt at the same versions never takes the kept Job of this one for its own
    assert rollout_key("6.5.0", "6.6.0", "2026-01-02T00:00:00Z") != key
    assert len(analysis_job_name("x" * 63, 12, key)) <= 63
    # with builds.yaml pins (SPEC section 8) the Job runs the build the batch moved to
    pinned = {"podinfo": "ghcr.io/stefanprodan/podinfo:6.6.0-rev1-b2@sha256:" + "2" * 64}
    job, _ = render_analysis_job(
        template, instance, version, run, timeout_seconds=300, images=pinned
    )
    assert job is not None
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == pinned["podinfo"]


def test_a_missing_or_wrong_analysis_file_is_an_error_with_file_and_line(tmp_path: Path) -> None:
    version = """\
        apiVersion: reconciler/v1
        kind: AppVersion
        app: podinfo
        version: 6.6.0
        images: {podinfo: "ghcr.io/stefanprodan/podinfo:6.6.0"}
        parameters: {replicas: {default: 2}, message: {default: hello}}
        rollout:
          batches: [1, 50%, 50%]
          analysis: checks/smoke.yaml
        """
    v = "apps/podinfo/versions/6.6.0/version.yaml"
    missing = _catalog(tmp_path / "a", {v: version})
    assert [str(p) for p in missing.problems if p.is_error] == [
        f'{v}:9: rollout analysis job "checks/smoke.yaml" does not exist'
    ]
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    wrong = _catalog(tmp_path / "b", {v: version, SMOKE: config_map})
    assert [str(p) for p in wrong.problems if p.is_error] == [
        f"{SMOKE}:1: a rollout analysis job file must hold exactly one batch/v1 Job, "
        "found v1 ConfigMap"
    ]
    web = "clusters/prod/instances/web.yaml"
    nowhere = _catalog(tmp_path / "c", {web: analysed()})
    assert [str(p) for p in check_catalog(nowhere) if p.is_error] == [
        f'{web}:10: rollout analysis job "checks/smoke.yaml" is in no version directory of podinfo'
    ]
    not_a_job = _catalog(tmp_path / "d", {web: analysed(), SMOKE: config_map})
    assert [str(p) for p in check_catalog(not_a_job) if p.is_error] == [
        f"{SMOKE}:1: a rollout analysis job file must hold exactly one batch/v1 Job, "
        "found v1 ConfigMap"
    ]
    assert not_a_job.apps["podinfo"].versions["6.6.0"].valid  # other instances still use it


def test_an_instance_analysis_must_exist_in_the_version_it_rolls_to(tmp_path: Path) -> None:
    """The path is relative to the version rolled to: 6.6.0 has it, 6.5.0 does not, so a
    first install of 6.5.0 is fine but a rollout to 6.5.0 (a downgrade) is refused."""
    catalog = _catalog(tmp_path, {SMOKE: PASSING, "clusters/prod/instances/web.yaml": analysed()})
    assert not [p for p in check_catalog(catalog) if p.is_error]
    instance = catalog.clusters["prod"].instances["web"]
    assert plan_instance(catalog, instance, None).ok  # 6.5.0 installs at once
    assert plan_instance(catalog, instance, "6.6.0").reason == "DowngradeBlocked"
    allowed = _catalog(
        tmp_path / "down",
        {
            SMOKE: PASSING,
            "clusters/prod/instances/web.yaml": analysed().replace(
                "channel: stable", "channel: stable\nallowDowngrade: true"
            ),
        },
    )
    down = plan_instance(allowed, allowed.clusters["prod"].instances["web"], "6.6.0")
    assert down.reason == "CatalogInvalid"
    assert down.message is not None and 'rollout analysis job "checks/smoke.yaml"' in down.message
    assert "apps/podinfo/versions/6.5.0/checks/smoke.yaml" in down.message
