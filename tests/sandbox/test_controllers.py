"""StatefulSets, DaemonSets, Jobs and bare Pods move over time, with pods, as on a cluster.

https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/ (ordinal pods,
OrderedReady, ``controller-revision-hash``, "#partitions": "all Pods with an ordinal that
is greater than or equal to the partition will be updated", OnDelete),
https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/ (one pod per node,
``maxUnavailable``), https://kubernetes.io/docs/concepts/workloads/controllers/job/
(pods run to completion, ``backoffLimit``, ``activeDeadlineSeconds``, "#terminal-job-conditions":
``SuccessCriteriaMet``/``Complete``, ``FailureTarget``/``Failed``) and
https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/ (Pending while
containers are created, then Running; Ready after readiness).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing, parse_ready_delay
from tests.sandbox.helpers import deployment, eventually
from tests.sandbox.workloads import FAST, conditions, fast_sandbox, pods_of, ready

FAIL = {"sandbox.reconciler.dev/fail": "true"}


def _observed(obj: Any) -> Any:
    status = obj.status
    if status and status.observed_generation == obj.metadata.generation:
        return obj
    return None


def statefulset(image: str, partition: int = 0, replicas: int = 4) -> dict[str, Any]:
    body = deployment("db", replicas=replicas, image=image)
    body["kind"] = "StatefulSet"
    body["spec"]["serviceName"] = "db"
    body["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": partition},
    }
    return body


def _sts_settled(apps: client.AppsV1Api, updated: int) -> Any:
    def check() -> Any:
        s = _observed(apps.read_namespaced_stateful_set_status("db", "default"))
        ok = s and (s.status.updated_replicas or 0) == updated and s.status.ready_replicas == 4
        return s if ok else None

    return eventually(check)


def _revisions(core: client.CoreV1Api) -> dict[str, str]:
    return {
        p.metadata.name: p.metadata.labels["controller-revision-hash"]
        for p in pods_of(core, "app=db")
    }


def test_statefulset_pods_start_in_order_and_partitions_roll_highest_first() -> None:
    with fast_sandbox() as (sandbox, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        created: list[str] = []

        def on_event(event: StoredEvent) -> None:
            if event.resource == ("", "pods") and event.type == "ADDED":
                created.append(event.obj["metadata"]["name"])

        sandbox.observe(on_event)
        apps.create_namespaced_stateful_set("default", statefulset("db:1"))
        first = _sts_settled(apps, 4)
        assert created == ["db-0", "db-1", "db-2", "db-3"]
        assert first.status.current_revision == first.status.update_revision
        old = first.status.current_revision
        assert set(_revisions(core).values()) == {old}
        revisions = apps.list_namespaced_controller_revision("default").items
        assert [r.metadata.name for r in revisions] == [old] and revisions[0].revision == 1
        apps.replace_namespaced_stateful_set("db", "default", statefulset("db:2", partition=2))
        sts = _sts_settled(apps, 2)
        new = sts.status.update_revision
        assert (sts.status.current_replicas, sts.status.current_revision) == (2, old)
        assert _revisions(core) == {"db-0": old, "db-1": old, "db-2": new, "db-3": new}
        assert created[4:] == ["db-3", "db-2"]  # replaced highest first
        pod = core.read_namespaced_pod("db-3", "default")
        assert pod.spec.containers[0].image == "db:2" and pod.spec.hostname == "db-3"
        apps.patch_namespaced_stateful_set(
            "db", "default", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}
        )
        done = _sts_settled(apps, 4)
        assert done.status.current_revision == new == done.status.update_revision
        assert len(apps.list_namespaced_controller_revision("default").items) == 2


def test_statefulset_failing_revision_stops_at_the_first_pod() -> None:
    with fast_sandbox() as (_, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_stateful_set("default", statefulset("db:1"))
        _sts_settled(apps, 4)
        body = statefulset("db:2")
        body["spec"]["template"]["metadata"]["annotations"] = FAIL
        apps.replace_namespaced_stateful_set("db", "default", body)

        def stuck() -> Any:
            s = _observed(apps.read_namespaced_stateful_set_status("db", "default"))
            return s if s and s.status.updated_replicas == 1 else None

        sts = eventually(stuck)
        assert sts.status.ready_replicas == 3
        assert not ready(core.read_namespaced_pod("db-3", "default"))


def test_statefulset_on_delete_replaces_only_deleted_pods() -> None:
    with fast_sandbox() as (_, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        body = statefulset("db:1")
        body["spec"]["updateStrategy"] = {"type": "OnDelete"}
        apps.create_namespaced_stateful_set("default", body)
        old = _sts_settled(apps, 4).status.update_revision
        body["spec"]["template"]["spec"]["containers"][0]["image"] = "db:2"
        apps.replace_namespaced_stateful_set("db", "default", body)
        sts = _sts_settled(apps, 0)
        assert set(_revisions(core).values()) == {old}
        core.delete_namespaced_pod("db-1", "default")
        _sts_settled(apps, 1)
        assert _revisions(core)["db-1"] == sts.status.update_revision


def test_daemonset_runs_one_pod_per_node_and_rolls_node_by_node() -> None:
    with fast_sandbox(
        Timing(pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.03, nodes=4)
    ) as (sandbox, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        nodes = [n.metadata.name for n in core.list_node().items]
        assert nodes == ["node-1", "node-2", "node-3", "node-4"]
        body = deployment("agent", image="agent:1")
        body["kind"] = "DaemonSet"
        del body["spec"]["replicas"]
        apps.create_namespaced_daemon_set("default", body)

        def settled(updated: int) -> Any:
            ds = _observed(apps.read_namespaced_daemon_set_status("agent", "default"))
            ok = (
                ds and ds.status.number_ready == 4 and ds.status.updated_number_scheduled == updated
            )
            return ds if ok else None

        ds = eventually(lambda: settled(4))
        assert ds.status.desired_number_scheduled == 4
        assert sorted(p.spec.node_name for p in pods_of(core, "app=agent")) == nodes
        unready: list[int] = []
        seen: dict[str, bool] = {p.metadata.name: True for p in pods_of(core, "app=agent")}

        def on_event(event: StoredEvent) -> None:
            if event.resource != ("", "pods"):
                return
            name = event.obj["metadata"]["name"]
            if event.type == "DELETED":
                seen.pop(name, None)
            else:
                conds = (event.obj.get("status") or {}).get("conditions") or []
                seen[name] = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
            unready.append(4 - sum(seen.values()))

        sandbox.observe(on_event)
        body["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
        apps.replace_namespaced_daemon_set("agent", "default", body)
        eventually(lambda: settled(4) if unready else None)
        assert max(unready) == 1  # maxUnavailable 1: one node at a time
        images = {p.spec.containers[0].image for p in pods_of(core, "app=agent")}
        assert images == {"agent:2"}


def job(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "backoffLimit": 1,
            **spec,
            "template": {
                "metadata": {"annotations": {"sandbox.reconciler.dev/log": "migrating...\ndone"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "m", "image": "busybox"}],
                },
            },
        },
    }


def _finished(batch: client.BatchV1Api, name: str) -> Any:
    def check() -> Any:
        j = batch.read_namespaced_job_status(name, "default")
        return (
            j if any(c.type in ("Complete", "Failed") for c in j.status.conditions or []) else None
        )

    return eventually(check)


def test_job_runs_a_pod_to_completion_with_its_log() -> None:
    with fast_sandbox() as (_, api):
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        batch.create_namespaced_job("default", job("migrate"))
        running = eventually(
            lambda: (
                (j := batch.read_namespaced_job_status("migrate", "default")).status.active and j
            )
        )
        assert running.status.start_time is not None and not running.status.conditions
        done = _finished(batch, "migrate")
        assert [c.type for c in done.status.conditions] == ["SuccessCriteriaMet", "Complete"]
        assert done.status.succeeded == 1 and not done.status.active
        assert done.status.completion_time is not None
        (pod,) = pods_of(core, "batch.kubernetes.io/job-name=migrate")
        assert pod.status.phase == "Succeeded" and pod.metadata.name.startswith("migrate-")
        terminated = pod.status.container_statuses[0].state.terminated
        assert (terminated.exit_code, terminated.reason) == (0, "Completed")
        log = core.read_namespaced_pod_log(pod.metadata.name, "default", tail_lines=2)
        assert log == "done\n[sandbox] container m exited with code 0 (Completed)\n"


def test_job_retries_until_its_backoff_limit() -> None:
    with fast_sandbox() as (_, api):
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        batch.create_namespaced_job("default", job("bad", FAIL, backoffLimit=1))
        failed = _finished(batch, "bad")
        assert conditions(failed)["Failed"] == ("True", "BackoffLimitExceeded")
        assert [c.type for c in failed.status.conditions] == ["FailureTarget", "Failed"]
        assert failed.status.failed == 2 and not failed.status.succeeded
        pods = pods_of(core, "job-name=bad")
        assert len(pods) == 2 and {p.status.phase for p in pods} == {"Failed"}
        terminated = pods[0].status.container_statuses[0].state.terminated
        assert (terminated.exit_code, terminated.reason) == (1, "Error")
        log = core.read_namespaced_pod_log(pods[0].metadata.name, "default")
        assert log.endswith("exited with code 1 (Error)\n")


def test_job_that_fails_once_succeeds_on_retry() -> None:
    with fast_sandbox() as (_, api):
        batch = client.BatchV1Api(api)
        flaky = job("flaky", {"sandbox.reconciler.dev/fail-attempts": "1"}, backoffLimit=2)
        batch.create_namespaced_job("default", flaky)
        done = _finished(batch, "flaky")
        assert conditions(done)["Complete"][0] == "True"
        assert (done.status.failed, done.status.succeeded) == (1, 1)


def test_the_retry_waits_out_the_back_off() -> None:
    """After a failed pod the next one waits 10 s·2ⁿ⁻¹ (here scaled to 30 s, far longer than
    the check below): https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy"""
    timing = Timing(
        pod_grace_scale=TEST_GRACE_SCALE,
        controller_delay=0.01,
        pod_start=0.02,
        job_duration=0.05,
        job_backoff=30.0,
    )
    with fast_sandbox(timing) as (_, api):
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        flaky = job("flaky", {"sandbox.reconciler.dev/fail-attempts": "1"}, backoffLimit=2)
        batch.create_namespaced_job("default", flaky)
        eventually(lambda: batch.read_namespaced_job_status("flaky", "default").status.failed)
        for _ in range(20):  # a second of controller syncs: still backing off
            pods = pods_of(core, "job-name=flaky")
            assert [p.status.phase for p in pods] == ["Failed"]
            assert not batch.read_namespaced_job_status("flaky", "default").status.active
            time.sleep(0.05)


def test_the_back_off_doubles_up_to_six_minutes() -> None:
    real = Timing()
    assert [real.retry_delay(n) for n in range(8)] == [0, 10, 20, 40, 80, 160, 320, 360]
    assert Timing(job_backoff=0.5).retry_delay(3) == 2.0
    with pytest.raises(ValueError, match="must not be negative"):
        Timing(job_backoff=-1)


def test_job_past_its_active_deadline_fails_and_stops_its_pods() -> None:
    slow = Timing(
        pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.02, job_duration=30.0
    )
    with fast_sandbox(slow) as (_, api):
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        batch.create_namespaced_job("default", job("slow", activeDeadlineSeconds=1))
        failed = _finished(batch, "slow")
        assert conditions(failed)["Failed"] == ("True", "DeadlineExceeded")
        eventually(lambda: not pods_of(core, "job-name=slow"))


def test_job_parallelism_and_completions() -> None:
    with fast_sandbox() as (_, api):
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        batch.create_namespaced_job("default", job("many", completions=3, parallelism=2))
        done = _finished(batch, "many")
        assert done.status.succeeded == 3
        assert len(pods_of(core, "job-name=many")) == 3


def test_pod_is_pending_while_containers_are_created_then_ready_after_its_delay() -> None:
    timing = Timing(
        pod_grace_scale=TEST_GRACE_SCALE,
        controller_delay=0.01,
        pod_start=0.1,
        ready_delays=(parse_ready_delay("slow:*=0.2"),),
    )
    with fast_sandbox(timing) as (sandbox, api):
        core = client.CoreV1Api(api)
        stages: dict[str, list[tuple[str, str, bool]]] = {"quick": [], "slow": []}

        def on_event(event: StoredEvent) -> None:
            name = event.obj["metadata"]["name"]
            if event.resource != ("", "pods") or name not in stages:
                return
            status = event.obj.get("status") or {}
            waiting = [
                c["state"]["waiting"].get("reason", "")
                for c in status.get("containerStatuses") or []
                if "waiting" in c.get("state", {})
            ]
            is_ready = any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in status.get("conditions") or []
            )
            stage = (str(status.get("phase")), ",".join(waiting), is_ready)
            if not stages[name] or stages[name][-1] != stage:
                stages[name].append(stage)

        sandbox.observe(on_event)
        for name, image in (("quick", "quick:1"), ("slow", "slow:1")):
            body = {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": image}]},
            }
            core.create_namespaced_pod("default", body)
        eventually(lambda: ready(core.read_namespaced_pod("slow", "default")))
        assert core.read_namespaced_pod("slow", "default").spec.node_name.startswith("node-")
    creating = ("Pending", "ContainerCreating", False)
    assert stages["quick"][-2:] == [creating, ("Running", "", True)]
    assert stages["slow"][-3:] == [creating, ("Running", "", False), ("Running", "", True)]


def test_fail_images_option_breaks_exactly_the_matching_pods() -> None:
    with fast_sandbox(FAST, fail_images=["*:broken*"]) as (_, api):
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_deployment("default", deployment("bad", image="nginx:broken-1"))
        apps.create_namespaced_deployment("default", deployment("good", image="nginx:1"))
        eventually(
            lambda: (
                apps.read_namespaced_deployment_status("good", "default").status.ready_replicas == 2
            )
        )
        bad_pods = eventually(
            lambda: (
                len(p := pods_of(core, "app=bad")) == 2
                and all(x.status.container_statuses for x in p)
                and p
            )
        )
        reasons = {p.status.container_statuses[0].state.waiting.reason for p in bad_pods}
        assert reasons == {"CrashLoopBackOff"}
        assert not apps.read_namespaced_deployment_status("bad", "default").status.ready_replicas
