"""End to end: commits in a real catalog repository reach the sandbox and the status branch."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from reconciler.source.ledger import StatusLedger
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World, sandbox_world, settle
from tests.factories import remove_file

CHANNELS = """\
apiVersion: reconciler/v1
kind: Channels
app: podinfo
channels:
  stable: {stable}
  fast: 6.6.0
"""


def deployment(world: World, name: str, namespace: str) -> dict[str, Any] | None:
    return world.client.get(ObjectRef("apps/v1", "Deployment", namespace, name))


def image(world: World, name: str, namespace: str) -> str:
    obj = deployment(world, name, namespace)
    assert obj is not None
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def phases(world: World) -> dict[str, str]:
    return {n: str(s.phase) for n, s in world.daemon.ledger.read().items()}


def test_first_pass_installs_and_records_one_commit_per_instance(world: World) -> None:
    outcome = world.daemon.run_pass()
    assert outcome.ok, outcome
    assert image(world, "web", "web") == "ghcr.io/stefanprodan/podinfo:6.5.0"
    assert deployment(world, "web", "web")["spec"]["replicas"] == 5  # type: ignore[index]
    assert sorted(c.subject for c in outcome.commits) == [
        "prod/api: podinfo 6.6.0 (Ready)",
        "prod/web: podinfo 6.5.0 (Ready)",
    ]
    assert phases(world) == {"api": "Ready", "web": "Ready"}


def test_a_pass_with_nothing_new_makes_no_writes_and_no_commits(world: World) -> None:
    world.daemon.run_pass()
    head = log_oneline(world.repo.remote, "status/prod")
    world.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.commits == []
    assert world.writes() == 0
    assert log_oneline(world.repo.remote, "status/prod") == head
    assert {e.action.value for e in outcome.report.changes.entries} == {"unchanged"}  # type: ignore[union-attr]


WEB = """\
apiVersion: reconciler/v1
kind: Instance
name: web
app: podinfo
channel: stable
namespace: web
parameters: {replicas: 3}
"""


def test_a_commit_that_changes_no_render_writes_nothing_and_logs_nothing(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """A README edit is a new commit for every instance, yet no instance's objects change:
    no write to the API server (inventories keep the commit that last changed them), no
    status commit, no log line. A change to one instance logs that instance alone."""
    caplog.set_level(logging.INFO, "reconciler.daemon")

    def logged() -> dict[str, str]:
        lines = {
            str(getattr(r, "instance", "")): r.getMessage()
            for r in caplog.records
            if getattr(r, "instance", None)
        }
        caplog.clear()
        return lines

    settle(world.daemon)
    first = logged()
    assert (
        set(first) == {"web", "api"} and "(objects: 2 created)" in first["web"]
    )  # its namespace and Deployment
    head = log_oneline(world.repo.remote, "status/prod")
    world.commit("README.md", "# catalog\n\nOnly words changed.\n", "README only")
    world.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.source_changed and outcome.commits == []
    assert world.writes() == 0
    assert log_oneline(world.repo.remote, "status/prod") == head
    assert logged() == {}
    world.commit("clusters/prod/instances/web.yaml", WEB, "web: 3 replicas")
    world.daemon.run_pass()
    lines = logged()
    assert list(lines) == ["web"] and "(objects: 1 configured)" in lines["web"]


def test_channel_move_commit_reaches_cluster_and_status_branch(world: World) -> None:
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "stable -> 6.6.0")
    outcomes = settle(world.daemon)  # 6.6.0 plans batches: one transition per pass
    outcome = outcomes[-1]
    assert outcome.ok
    assert image(world, "web", "web") == "ghcr.io/stefanprodan/podinfo:6.6.0"
    # only the instance that changed gets status commits, one per rollout step
    subjects = [c.subject for o in outcomes for c in o.commits]
    assert all(s.startswith("prod/web: rollout podinfo 6.5.0 -> 6.6.0: ") for s in subjects)
    assert subjects[0].endswith("started, 3 batches")
    assert subjects[-1] == "prod/web: rollout podinfo 6.5.0 -> 6.6.0: succeeded (5/5 replicas)"
    record = world.daemon.ledger.read()["web"]
    assert record.version == "6.6.0" and record.source == "channel:stable"
    assert record.source_commit == outcome.report.commit  # type: ignore[union-attr]


def test_broken_yaml_keeps_last_good_version_and_others_proceed(world: World) -> None:
    world.daemon.run_pass()
    world.commit("clusters/prod/instances/web.yaml", "name: web\nchannel: [stable\n", "broken")
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "stable -> 6.6.0")
    outcome = world.daemon.run_pass()
    assert not outcome.ok and outcome.error is None
    statuses = {s.instance: s for s in outcome.report.statuses}  # type: ignore[union-attr]
    web = statuses["web"]
    assert web.phase is Phase.STALLED and web.reason == "CatalogInvalid"
    assert "clusters/prod/instances/web.yaml:3" in web.message
    assert web.version == "6.5.0" and web.app == "podinfo"
    assert image(world, "web", "web") == "ghcr.io/stefanprodan/podinfo:6.5.0"  # kept
    assert statuses["api"].phase is Phase.READY
    subjects = [c.subject for c in outcome.commits]
    assert len(subjects) == 1 and subjects[0].startswith(
        "prod/web: podinfo 6.5.0 (Stalled: CatalogInvalid)"
    )


def test_remote_that_goes_away_and_comes_back(world: World) -> None:
    world.daemon.run_pass()
    hidden = world.repo.remote.with_name("hidden.git")
    shutil.move(world.repo.remote, hidden)
    try:
        outcome = (
            world.daemon.run_pass()
        )  # reconciles the last good commit; status cannot be written
        assert outcome.report is not None and outcome.error is not None
        assert "SourceFailed" in outcome.error
        assert image(world, "web", "web").endswith(":6.5.0")
    finally:
        shutil.move(hidden, world.repo.remote)
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "stable -> 6.6.0")
    outcome = settle(world.daemon)[-1]
    assert outcome.ok and image(world, "web", "web").endswith(":6.6.0")


def test_remote_missing_at_start_fails_the_pass_cleanly(world: World) -> None:
    daemon = world.new_daemon(repo=world.repo.url.replace("catalog.git", "nope.git"))
    outcome = daemon.run_pass()
    assert outcome.report is None and outcome.error is not None
    assert outcome.error.startswith("SourceFailed")


def test_downgrade_is_blocked_and_keeps_the_running_version(world: World) -> None:
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "stable -> 6.6.0")
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.5.0"), "stable back")
    outcome = world.daemon.run_pass()
    web = {s.instance: s for s in outcome.report.statuses}["web"]  # type: ignore[union-attr]
    assert web.phase is Phase.STALLED and web.reason == "DowngradeBlocked"
    assert web.version == "6.6.0" and web.desired_version == "6.5.0"
    assert image(world, "web", "web").endswith(":6.6.0")


def test_suspended_instance_is_left_alone(world: World) -> None:
    world.daemon.run_pass()
    world.commit(
        "clusters/prod/instances/web.yaml",
        "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
        "channel: fast\nnamespace: web\nsuspend: true\n",
        "suspend web",
    )
    outcome = world.daemon.run_pass()
    web = {s.instance: s for s in outcome.report.statuses}["web"]  # type: ignore[union-attr]
    assert web.phase is Phase.SUSPENDED and web.version == "6.5.0"
    assert image(world, "web", "web").endswith(":6.5.0")


def test_failing_workload_is_recorded_as_health_check_failed(world: World) -> None:
    world.daemon.run_pass()  # everything installed and ready
    # the daemon's health clock is the test's: it stands still, so no busy machine's
    # pass outlasts the timeout, until the test lets the timeout pass (no test waits it)
    daemon = world.new_daemon(health_timeout=3.0, health_grace=0.05)
    waited = [0.0]
    daemon.health.clock = lambda: waited[0]
    world.commit(
        "apps/podinfo/versions/6.6.0/manifests/deployment.yaml",
        FAILING_DEPLOYMENT,
        "6.6.0 that never becomes ready",
    )
    first = daemon.run_pass()
    statuses = {s.instance: s for s in first.report.statuses}  # type: ignore[union-attr]
    # not healthy yet is not a verdict: the pass moves on and looks again
    assert statuses["api"].phase is Phase.PROGRESSING, statuses["api"]
    assert first.report.next_look is not None  # type: ignore[union-attr]
    assert statuses["web"].phase is Phase.READY  # one slow instance never holds the others
    waited[0] = 2.9  # within the timeout counted from the change: still no verdict
    again = {s.instance: s for s in daemon.run_pass().report.statuses}  # type: ignore[union-attr]
    assert again["api"].phase is Phase.PROGRESSING, again["api"]
    waited[0] = 3.0  # the timeout is over: the next look says so
    outcome = daemon.run_pass()
    statuses = {s.instance: s for s in outcome.report.statuses}  # type: ignore[union-attr]
    assert statuses["web"].phase is Phase.READY
    assert statuses["api"].phase is Phase.FAILED, statuses["api"]
    assert statuses["api"].reason == "HealthCheckFailed"
    assert "not healthy within 3s" in statuses["api"].message


def test_deleted_instance_is_uninstalled_and_recorded_removed(world: World) -> None:
    world.daemon.run_pass()
    remove_file(world.repo, "clusters/prod/instances/api.yaml", "remove instance api")
    outcome = world.daemon.run_pass()
    assert [r.instance for r in outcome.report.removed] == ["api"]  # type: ignore[union-attr]
    assert deployment(world, "api", "team-api") is None
    assert [c.subject for c in outcome.commits] == ["prod/api: removed (2 objects deleted)"]
    assert world.daemon.ledger.read()["api"].phase is Phase.REMOVED
    again = world.daemon.run_pass()
    assert again.commits == [] and again.report.removed == ()  # type: ignore[union-attr]


def test_status_ledger_is_readable_by_status_command_after_passes(world: World) -> None:
    world.daemon.run_pass()
    ledger = StatusLedger(world.repo.url, "prod", cache_dir=world.cache / "reader")
    assert sorted(ledger.read()) == ["api", "web"]
    assert [e.instance for e in ledger.history("web")] == ["web"]


# the sandbox's documented failure switch, on the pod template as a broken image would be
FAILING_DEPLOYMENT = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${instance.name}\n"
    "spec:\n  replicas: ${params.replicas}\n"
    "  selector: {matchLabels: {app.kubernetes.io/instance: '${instance.name}'}}\n"
    "  template:\n"
    "    metadata:\n"
    "      labels: {app.kubernetes.io/instance: '${instance.name}'}\n"
    "      annotations: {sandbox.reconciler.dev/fail: 'true'}\n"
    "    spec:\n      containers:\n"
    "        - {name: podinfo, image: '${images.podinfo}'}\n"
)


def test_failing_instance_backs_off_until_its_inputs_change(world: World) -> None:
    # the first pass polls api's never-ready pods for its whole grace, and fails them
    # only when the grace outlasts the health timeout: both short, yet room for the
    # fixed pods of the third pass (ready in a tenth of a second) on a busy machine
    daemon = world.new_daemon(health_timeout=2.0, health_grace=2.5, backoff_base=60.0)
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", FAILING_DEPLOYMENT)
    first = daemon.run_pass()
    assert {s.instance: s.phase for s in first.report.statuses}["api"] is Phase.FAILED  # type: ignore[union-attr]
    assert daemon.next_retry_in() is not None and daemon.next_retry_in() > 30  # type: ignore[operator]
    # next pass: api is held (no writes, no commit) while web is still reconciled
    world.reset_request_log()
    second = daemon.run_pass()
    api_actions = {e.action.value for e in second.report.changes.entries if e.instance == "api"}  # type: ignore[union-attr]
    assert api_actions == {"skipped"}
    assert second.commits == [] and world.writes() == 0
    # a commit that changes api's inputs is tried at once, backoff or not
    fixed = FAILING_DEPLOYMENT.replace("{sandbox.reconciler.dev/fail: 'true'}", "{}")
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", fixed, "fix 6.6.0")
    third = daemon.run_pass()
    api_actions = {e.action.value for e in third.report.changes.entries if e.instance == "api"}  # type: ignore[union-attr]
    assert "configured" in api_actions, api_actions
    # its fixed pods are Ready in a tenth of a second, or a few passes later on a busy
    # machine: the instance ends Ready, never Failed again
    passes = [third, *settle(daemon)]
    told = [(s.instance, s.phase, s.reason, s.message) for s in passes[-1].report.statuses]  # type: ignore[union-attr]
    assert passes[-1].ok, told
    subjects = [c.subject for p in passes for c in p.commits]
    assert subjects[-1] == "prod/api: podinfo 6.6.0 (Ready)", subjects
    assert not [s for s in subjects if "Failed" in s], subjects


def test_status_changes_are_also_kubernetes_events(world: World) -> None:
    world.daemon.run_pass()
    world.commit("clusters/prod/instances/web.yaml", "name: web\nchannel: [stable\n", "broken")
    world.daemon.run_pass()
    world.daemon.flush_events()
    events = world.client.list("v1", "Event", namespace="web")
    reasons = {(e.get("type"), e.get("reason")) for e in events}
    assert ("Normal", "ReconcileSucceeded") in reasons
    assert ("Warning", "CatalogInvalid") in reasons
    warning = next(e for e in events if e.get("reason") == "CatalogInvalid")
    assert warning["involvedObject"]["name"] == "reconciler-inventory-web"
    assert "clusters/prod/instances/web.yaml:3" in warning["message"]


def test_log_records_carry_cluster_and_instance(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    from reconciler.daemon.logs import JsonFormatter

    caplog.set_level("INFO", logger="reconciler.daemon")
    world.daemon.run_pass()
    records = [r for r in caplog.records if getattr(r, "instance", None) == "web"]
    assert records, "no log record for instance web"
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["cluster"] == "prod" and line["instance"] == "web"
    assert line["app"] == "podinfo" and line["phase"] == "Ready" and line["version"] == "6.5.0"


def test_catalog_is_loaded_once_per_commit(world: World) -> None:
    from reconciler.daemon.loop import Checkout

    checkout, _ = world.daemon.sync()
    first = world.daemon.catalog_at(checkout)
    assert world.daemon.catalog_at(checkout) is first  # same commit: no reload
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    moved, _ = world.daemon.sync()
    reloaded = world.daemon.catalog_at(moved)
    assert reloaded is not first
    assert reloaded.apps["podinfo"].channels.channels["stable"] == "6.6.0"  # type: ignore[union-attr]
    dirty = Checkout(moved.path, moved.commit, dirty=True)
    assert world.daemon.catalog_at(dirty) is not reloaded  # an edited working tree is re-read


def test_health_reads_again_only_what_is_not_current_yet(tmp_path: Path) -> None:
    """A pass that installs waits for health by reading objects again, but only those the
    apply answer did not already show Current (kstatus: a Namespace or ConfigMap is
    Current once it exists; a Deployment needs its controller). Reading the rest would
    cost a request per object of every changed instance.

    The pods become Ready a second after they start, so the Deployment is read in
    several rounds however fast or busy the machine is, and the grace is long enough
    for it to get there: the one count asserted is the engine's own reads of an
    object that was Current from the start."""
    slow = Timing(
        pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.02, ready_delays=(("*", 1.0),)
    )
    with sandbox_world(tmp_path, timing=slow, health_grace=30.0) as world:
        world.commit(
            "apps/podinfo/versions/6.5.0/manifests/config.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${instance.name}-config\n"
            "data:\n  greeting: hello\n",
            "podinfo 6.5.0: a ConfigMap beside the Deployment",
        )
        world.reset_request_log()
        outcome = world.daemon.run_pass()
        assert outcome.ok, outcome
        phases = {s.instance: s.phase for s in outcome.report.statuses}  # type: ignore[union-attr]
        assert phases["web"] is Phase.READY, phases  # waited for, within the pass
        gets = [
            e.path
            for e in world.sandbox.request_log()  # type: ignore[union-attr]
            if e.method == "GET" and e.path.partition("/namespaces/")[2].count("/") == 2
        ]
        assert world.client.get(ObjectRef("v1", "ConfigMap", "web", "web-config")) is not None
    config = gets.count("/api/v1/namespaces/web/configmaps/web-config")
    rounds = gets.count("/apis/apps/v1/namespaces/web/deployments/web")
    # the ConfigMap is read at most once (when the pass's view has no copy of it yet)
    assert rounds > 1 and config <= 1, gets


def test_a_pass_leaves_its_events_to_the_background_and_they_all_arrive(world: World) -> None:
    """Events are sent off the pass's thread (within the client's request budget); once
    sent, each instance the pass changed has its one ReconcileSucceeded Event, as before."""
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None
    world.daemon.flush_events()
    assert world.daemon.events.pending == 0 and world.daemon.events.dropped == 0
    for status in outcome.report.statuses:
        namespace = outcome.report.namespaces[status.instance]
        succeeded = [
            e
            for e in world.client.list("v1", "Event", namespace=namespace)
            if e["reason"] == "ReconcileSucceeded"
            and e["involvedObject"]["name"] == f"reconciler-inventory-{status.instance}"
        ]
        assert len(succeeded) == 1 and succeeded[0]["count"] == 1, status.instance
