"""Batch rollouts driven by the daemon against the sandbox (SPEC section 4).

The sandbox's Deployments roll with real ReplicaSets and pods, so these tests run
the two-Deployment scheme end to end: each pass makes one transition and never
waits, every step a person cares about is one status commit, the copy
``reconciler-rollout-<name>`` serves the old pods until the last batch, and after
success the cluster is the plain render of the new version.

Every scenario runs on the sandbox and, in the ``real_cluster`` lane
(``RECONCILER_TEST_KUBECONFIG``), unchanged on a real cluster: it reads the cluster
only over the API, and the invariants come from a Kubernetes watch on the pods.
"""

from __future__ import annotations

import re
import time
import types
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon import passes
from reconciler.daemon.applying import instance_target
from reconciler.daemon.loop import PassOutcome
from reconciler.daemon.plan import plan_cluster
from reconciler.kube import ApplyOptions, LiveState, diff_instance
from reconciler.kube.rollout_driver import copy_name
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from reconciler.source.gates import change_gate
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World, lane_world, rested, settle
from tests.daemon.test_pass import CHANNELS
from tests.lanes import MISSING_TAG, Event, watching

WEB = """\
apiVersion: reconciler/v1
kind: Instance
name: web
app: podinfo
channel: stable
namespace: web
parameters: {{replicas: 5}}
rollout:
  batches: [1, 50%, 50%]
{extra}"""
__all__ = ["lane_world"]  # the daemon tests' fixture, on each lane (tests/lanes.py)
API_AT_65 = (
    "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: podinfo\n"
    "version: 6.5.0\nnamespace: team-api\n"
)


@pytest.fixture
def world(lane_world: World) -> Iterator[World]:
    """The daemon tests' world on each lane: the sandbox, and a real cluster on request."""
    yield lane_world


# web's Deployment and its copy on the sandbox (unsuffixed namespace), for sandbox-only tests
DEPLOY = ObjectRef("apps/v1", "Deployment", "web", "web")
COPY = ObjectRef("apps/v1", "Deployment", "web", copy_name("web"))


def _deploy(world: World) -> ObjectRef:
    return ObjectRef("apps/v1", "Deployment", world.ns("web"), "web")


def _copy(world: World) -> ObjectRef:
    return ObjectRef("apps/v1", "Deployment", world.ns("web"), copy_name("web"))


def _web(outcome: PassOutcome) -> Any:
    assert outcome.report is not None, outcome.error
    return next(s for s in outcome.report.statuses if s.instance == "web")


def _image(world: World, ref: ObjectRef) -> str:
    obj = world.client.get(ref)
    assert obj is not None
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def test_channel_move_rolls_in_batches_with_one_commit_per_step(world: World) -> None:
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    first = world.daemon.run_pass()
    assert _web(first).phase is Phase.READY  # a first install applies at once
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    started = world.daemon.run_pass()
    web = _web(started)
    assert web.phase is Phase.PROGRESSING and web.rollout is not None
    assert (web.version, web.desired_version) == ("6.5.0", "6.6.0")
    assert started.report is not None and started.report.next_look is not None
    outcomes = settle(world.daemon)
    web = _web(outcomes[-1])
    assert web.version == "6.6.0" and web.rollout is not None
    assert str(web.rollout.state) == "rolloutSucceed"
    assert _image(world, _deploy(world)).endswith(":6.6.0")
    assert world.client.get(_copy(world)) is None  # no helper left
    metrics = world.daemon.metrics.render().decode()
    assert (
        f'reconciler_rollouts_total{{cluster="{world.cluster}",result="rolloutSucceed"}} 1.0'
        in metrics
    )
    assert (
        f'reconciler_rollout_batch_duration_seconds_count{{cluster="{world.cluster}"}} 3.0'
        in metrics
    )
    assert (
        f'reconciler_instance_rollout_batch{{cluster="{world.cluster}",instance="web"}} 0.0'
        in metrics
    )
    world.daemon.flush_events()
    events = world.client.list("v1", "Event", namespace=world.ns("web"))
    reasons = {e["reason"] for e in events if e["reason"].startswith("Rollout")}
    assert {"RolloutStarted", "RolloutBatch", "RolloutSucceeded"} <= reasons
    subjects = [
        line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, f"status/{world.cluster}")
    ]
    rollout = [s for s in reversed(subjects) if s.startswith(f"{world.cluster}/web: rollout")]
    assert rollout == [
        f"{world.cluster}/web: rollout podinfo 6.5.0 -> 6.6.0: started, 3 batches",
        f"{world.cluster}/web: rollout podinfo 6.5.0 -> 6.6.0: batch 1/3 ready (1/5 replicas)",
        f"{world.cluster}/web: rollout podinfo 6.5.0 -> 6.6.0: batch 2/3 ready (3/5 replicas)",
        f"{world.cluster}/web: rollout podinfo 6.5.0 -> 6.6.0: batch 3/3 ready (5/5 replicas)",
        f"{world.cluster}/web: rollout podinfo 6.5.0 -> 6.6.0: succeeded (5/5 replicas)",
    ]


# 6.6.0 with an image tag no registry has: ImagePullBackOff on a real cluster, and
# the sandbox fails the same pattern (tests/lanes.py FAIL_IMAGES)
FAILING_66 = (
    "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: 6.6.0\n"
    'upgradeFrom: ">=6.0.0"\n'
    f"images:\n  podinfo: ghcr.io/stefanprodan/podinfo:{MISSING_TAG}\n"
    "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
    "rollout:\n  batches: [1, 50%, 50%]\n"
)


def _pod_versions(world: World) -> set[str]:
    pods = world.client.list("v1", "Pod", namespace=world.ns("web"))
    return {
        str(c["image"]).rsplit(":", 1)[1]
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        for c in p["spec"]["containers"]
    }


@pytest.mark.slow
def test_partition_waits_for_a_promotion_commit(world: World) -> None:
    world.commit(
        "clusters/prod/instances/web.yaml", WEB.format(extra="  partition: 1\n"), "web: gate"
    )
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    outcomes = settle(world.daemon, until_waiting=True)
    web = _web(outcomes[-1])
    assert web.phase is Phase.PROGRESSING and web.reason == "WaitingForPromotion"
    assert web.rollout is not None and web.rollout.batch == 1
    assert _pod_versions(world) == {"6.5.0", "6.6.0"}  # 1 new pod, 4 old ones still serve
    quiet = world.daemon.run_pass()
    assert quiet.commits == [] and _web(quiet).reason == "WaitingForPromotion"
    assert quiet.report is not None and quiet.report.next_look is None  # only a commit moves it
    _promote(world, "6.6.0")  # approved through batch 2
    second = settle(world.daemon, until_waiting=True)
    assert _web(second[-1]).rollout.batch == 2  # type: ignore[union-attr]
    _promote(world, "6.6.0")  # approved through batch 3
    done = settle(world.daemon)
    assert _web(done[-1]).phase is Phase.READY and _web(done[-1]).version == "6.6.0"
    assert _pod_versions(world) == {"6.6.0"}


def _promote(world: World, target: str, *, approve_all: bool = False) -> None:
    change_gate(
        world.repo.work,
        world.cluster,
        "web",
        "promote",
        batches=3,
        target=target,
        approve_all=approve_all,
        push=True,
    )


V67 = (
    "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: 6.7.0\n"
    'upgradeFrom: ">=6.0.0"\n'
    "images:\n  podinfo: ghcr.io/stefanprodan/podinfo:6.7.0\n"
    "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
)
V67_MANIFEST = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${instance.name}\n"
    "spec:\n  replicas: ${params.replicas}\n"
    "  selector: {matchLabels: {app.kubernetes.io/instance: '${instance.name}'}}\n"
    "  template:\n"
    "    metadata: {labels: {app.kubernetes.io/instance: '${instance.name}'}}\n"
    "    spec:\n      containers:\n"
    "        - name: podinfo\n          image: ${images.podinfo}\n"
)


def _release_66_gated(world: World, *, partition: int) -> Any:
    """web at 6.5.0 gated after batch ``partition``, 6.7.0 in the catalog, and
    channel stable moved to 6.6.0: the status once that rollout waits at its gate."""
    world.commit(
        "clusters/prod/instances/web.yaml",
        WEB.format(extra=f"  partition: {partition}\n"),
        "web: gate",
    )
    world.commit("apps/podinfo/versions/6.7.0/version.yaml", V67, "6.7.0")
    world.commit("apps/podinfo/versions/6.7.0/manifests/deployment.yaml", V67_MANIFEST, "6.7.0")
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release 6.6.0")
    return _web(settle(world.daemon, until_waiting=True)[-1])


@pytest.mark.slow
def test_the_gate_rearms_two_releases_in_a_row_each_stop_at_the_partition(
    world: World,
) -> None:
    """SPEC section 4, "gates re-arm": approving every batch of 6.6.0 leaves the
    partition in the file, and that approval is inert for 6.7.0, which stops after
    batch 1 again without anyone re-adding the gate."""
    first = _release_66_gated(world, partition=1)
    assert first.reason == "WaitingForPromotion" and first.rollout is not None
    assert (first.rollout.to_version, first.rollout.batch) == ("6.6.0", 1)
    _promote(world, "6.6.0", approve_all=True)
    done = _web(settle(world.daemon)[-1])
    assert done.phase is Phase.READY and done.version == "6.6.0"
    text = (world.repo.work / world.path("clusters/prod/instances/web.yaml")).read_text()
    assert "  partition: 1\n" in text and "promoted: {to: 6.6.0, through: 3}" in text

    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.7.0"), "release 6.7.0")
    second = _web(settle(world.daemon, until_waiting=True)[-1])
    assert second.reason == "WaitingForPromotion" and second.rollout is not None
    assert (second.rollout.from_version, second.rollout.to_version) == ("6.6.0", "6.7.0")
    assert second.rollout.batch == 1 and second.rollout.partition == 1
    assert _pod_versions(world) == {"6.6.0", "6.7.0"}  # 1 new pod, 4 on 6.6.0 still serve
    quiet = world.daemon.run_pass()  # the 6.6.0 approval opens nothing
    assert quiet.commits == [] and _web(quiet).reason == "WaitingForPromotion"
    _promote(world, "6.7.0")
    again = _web(settle(world.daemon, until_waiting=True)[-1])
    assert again.rollout is not None and again.rollout.batch == 2
    _promote(world, "6.7.0")
    final = _web(settle(world.daemon)[-1])
    assert final.phase is Phase.READY and final.version == "6.7.0"
    assert _pod_versions(world) == {"6.7.0"}


def test_a_failing_version_rolls_back_by_itself(world: World) -> None:
    web = WEB.format(extra="  onFailure: rollback\n")
    world.commit("clusters/prod/instances/web.yaml", web, "web: roll back on failure")
    world.commit("clusters/prod/instances/api.yaml", API_AT_65, "api stays at 6.5.0")
    world.daemon.run_pass()
    world.commit("apps/podinfo/versions/6.6.0/version.yaml", FAILING_66, "bad")
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    outcomes = settle(world.daemon)
    web_status = _web(outcomes[-1])
    assert web_status.phase is Phase.STALLED and web_status.reason == "RolledBack"
    assert web_status.version == "6.5.0" and "pods failing" in web_status.message
    # the rollback's cleanup finishes over the next passes: old template, no copy left
    for _ in range(100):
        if world.client.get(_copy(world)) is None:
            break
        rested(world.daemon).run_pass()
    assert world.client.get(_copy(world)) is None
    assert _image(world, _deploy(world)).endswith(":6.5.0")
    again = world.daemon.run_pass()  # same desired version and file: not retried
    assert _web(again).reason == "RolledBack" and again.commits == []


def test_reverting_after_a_held_failure_rolls_back_and_cleans_up(world: World) -> None:
    """SPEC section 4: a held failure keeps both versions; moving the channel back to
    ``from`` rolls it back, and the copy never outlives the rollout."""
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.commit("clusters/prod/instances/api.yaml", API_AT_65, "api stays at 6.5.0")
    world.daemon.run_pass()
    world.commit("apps/podinfo/versions/6.6.0/version.yaml", FAILING_66, "bad")
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    held = _web(settle(world.daemon)[-1])
    assert held.phase is Phase.STALLED and held.reason == "RolloutFailed"
    assert world.client.get(_copy(world)) is not None  # hold: both versions keep running
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.5.0"), "revert")
    statuses = []
    for _ in range(100):
        outcome = rested(world.daemon).run_pass()
        statuses.append((_web(outcome).phase, _web(outcome).reason))
        if world.client.get(_copy(world)) is None and _web(outcome).phase is Phase.READY:
            break
    assert world.client.get(_copy(world)) is None, statuses
    assert (Phase.STALLED, "RolledBack") in statuses  # the revert is recorded as a rollback
    web = _web(outcome)
    assert web.phase is Phase.READY and web.version == "6.5.0", web
    assert _pod_versions(world) == {"6.5.0"}
    subjects = log_oneline(world.repo.remote, f"status/{world.cluster}")
    assert any("rolled back" in line and "desired version reverted" in line for line in subjects)


@pytest.mark.slow
def test_a_broken_file_between_rollback_and_cleanup_leaves_no_copy(world: World) -> None:
    """The rollout stays on the record while the instance cannot be driven (here a
    broken instance file), so its cleanup resumes once the file is fixed."""
    rollback = WEB.format(extra="  onFailure: rollback\n")
    world.commit("clusters/prod/instances/web.yaml", rollback, "web: roll back on failure")
    world.commit("clusters/prod/instances/api.yaml", API_AT_65, "api stays at 6.5.0")
    world.daemon.run_pass()
    world.commit("apps/podinfo/versions/6.6.0/version.yaml", FAILING_66, "bad")
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    assert _web(settle(world.daemon)[-1]).reason == "RolledBack"
    # the copy goes only once the old pods are back (usually a pass or two later; the
    # record below is what lets the cleanup resume whenever that is)
    world.commit("clusters/prod/instances/web.yaml", "name: web\nchannel: [stable\n", "broken")
    broken = _web(world.daemon.run_pass())
    assert broken.reason == "CatalogInvalid"
    assert broken.rollout is not None and broken.rollout.state.value == "rolledBack"
    world.commit("clusters/prod/instances/web.yaml", rollback, "fixed")
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.5.0"), "revert")
    for _ in range(100):
        web = _web(rested(world.daemon).run_pass())
        if web.phase is Phase.READY and world.client.get(_copy(world)) is None:
            break
    assert world.client.get(_copy(world)) is None
    assert web.phase is Phase.READY and web.version == "6.5.0" and web.rollout is None
    assert _pod_versions(world) == {"6.5.0"}


def test_another_instance_changes_while_a_batch_verifies(world: World) -> None:
    """Nothing waits in line: api's upgrade lands in the pass that also starts web's
    rollout, and web's slow batches never hold api's status commit."""
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.daemon.run_pass()
    api = (
        "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: podinfo\n"
        'version: "6.6.0"\nnamespace: team-api\n'
    )
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release web")
    started = world.daemon.run_pass()
    assert _web(started).phase is Phase.PROGRESSING
    world.commit("clusters/prod/instances/api.yaml", api, "api: pin 6.6.0")
    moved = world.daemon.run_pass()
    assert _web(moved).phase is Phase.PROGRESSING  # web is still rolling...
    api_status = next(s for s in moved.report.statuses if s.instance == "api")  # type: ignore[union-attr]
    assert api_status.phase is Phase.READY and api_status.version == "6.6.0"  # ...api is done


@pytest.mark.slow
def test_a_restarted_daemon_continues_without_duplicating_or_rolling_back(world: World) -> None:
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    first = world.daemon
    for _ in range(200):  # up to the first ready batch, then the daemon "dies"
        web = _web(rested(first).run_pass())
        if web.rollout is not None and web.rollout.batch >= 1 and "ready" in web.message:
            break
    updated = web.rollout.replicas.updated if web.rollout else 0
    assert updated >= 1
    restarted = world.new_daemon()  # nothing in memory: the record comes from Git
    outcomes = settle(restarted)
    assert _web(outcomes[0]).rollout is not None
    assert _web(outcomes[0]).rollout.replicas.updated >= updated  # type: ignore[union-attr]
    assert _web(outcomes[-1]).phase is Phase.READY
    subjects = [
        line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, f"status/{world.cluster}")
    ]
    steps = [s for s in subjects if s.startswith(f"{world.cluster}/web: rollout")]
    assert len(steps) == len(set(steps)) == 5  # started, 3 batches, succeeded: once each


@pytest.mark.slow
def test_after_success_the_cluster_is_the_plain_render(world: World) -> None:
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    settle(world.daemon)
    catalog = load_catalog(world.repo.work)
    entry = catalog.clusters[world.cluster]
    live = LiveState(world.client, world.cluster, entry.namespaces)
    plans = plan_cluster(catalog, world.cluster, live.deployed_versions(entry.instances))
    web = next(p for p in plans if p.name == "web")
    diffs = diff_instance(world.client, instance_target(world.cluster, web), ApplyOptions(), live)
    assert diffs == []
    quiet = world.daemon.run_pass()
    assert quiet.commits == []


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _tag(pod: Mapping[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"]).rsplit(":", 1)[1]


BATCH_READY = re.compile(r"batch (\d)/3 ready")


@pytest.mark.slow
def test_invariants_hold_at_every_change_of_the_rollout(world: World) -> None:
    """Checked on every pod change a watch delivers, not on samples (the API server
    sends each write to a watcher in order): ready pods never drop below the desired 5
    (maxUnavailable 0: the copy serves ``from`` until each batch is verified), no pod
    ever runs anything but 6.5.0 or 6.6.0, and when batch k is recorded exactly the
    planned 1, 3, 5 pods run 6.6.0, counted from the pods (not from a spec)."""
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    settle(world.daemon)
    lowest: list[int] = []
    versions: set[str] = set()

    def on_event(event: Event, pods: Mapping[str, Any]) -> None:
        lowest.append(sum(1 for p in pods.values() if _ready(p)))
        versions.update(_tag(p) for p in pods.values())

    running_to: dict[int, int] = {}

    def at_batch(outcome: PassOutcome) -> None:
        for commit in outcome.commits:
            m = BATCH_READY.search(commit.subject)
            if m and commit.instance == "web":
                pods = watched.caught_up().values()
                live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
                running_to[int(m[1])] = sum(1 for p in live if _tag(p) == "6.6.0")

    assert world.kubeconfig is not None
    with watching(world.kubeconfig, "Pod", world.ns("web"), on_event) as watched:
        world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
        outcomes = settle(world.daemon, each=at_batch)
        assert _web(outcomes[-1]).phase is Phase.READY
        watched.caught_up()
    assert running_to == {1: 1, 2: 3, 3: 5}
    assert lowest and min(lowest) >= 5
    assert versions == {"6.5.0", "6.6.0"}


@pytest.mark.slow
def test_a_restart_before_every_pass_still_finishes_once(world: World) -> None:
    """Kill the daemon after every transition: each pass is made by a new daemon that
    knows only the status branch and the cluster. No step is committed twice or lost,
    nothing rolls back, and the rollout finishes."""
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    updated: list[int] = []
    for _ in range(300):
        web = _web(rested(world.new_daemon()).run_pass())
        if web.rollout is not None:
            updated.append(web.rollout.replicas.updated)
        if web.phase is not Phase.PROGRESSING:
            break
    assert web.phase is Phase.READY and web.version == "6.6.0"
    subjects = [
        line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, f"status/{world.cluster}")
    ]
    steps = [s for s in reversed(subjects) if s.startswith(f"{world.cluster}/web: rollout")]
    assert [s.split(": ", 2)[2].split(" (")[0] for s in steps] == [
        "started, 3 batches",
        "batch 1/3 ready",
        "batch 2/3 ready",
        "batch 3/3 ready",
        "succeeded",
    ]
    assert _pod_versions(world) == {"6.6.0"}


def test_a_long_pass_does_not_add_its_length_to_the_next_look(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout asks to be looked at again ~2 s after it was observed, not 2 s after the
    pass ends: with hundreds of rollouts a pass takes seconds, and adding them to every
    wait would make many rollouts at once slower than each alone (issue 10's goal)."""
    world.commit("clusters/prod/instances/web.yaml", WEB.format(extra=""), "web: batches")
    world.daemon.run_pass()
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    started = world.daemon.run_pass()
    assert started.report is not None and started.report.next_look == 0.0  # its next step
    waiting = world.daemon.run_pass()  # the first batch is starting: look again in ~2 s
    assert waiting.report is not None and 1.0 < (waiting.report.next_look or 0) <= 2.0
    ticks = iter(range(0, 10_000, 30))  # every reading of the pass's clock is 30 s later
    clock = types.SimpleNamespace(monotonic=lambda: float(next(ticks)), time=time.time)
    monkeypatch.setattr(passes, "time", clock)
    long = world.daemon.run_pass()
    assert _web(long).rollout is not None
    assert long.report is not None and long.report.next_look == 0.0  # overdue: at once


@pytest.mark.slow
def test_rollouts_in_several_namespaces_move_together_each_as_alone(world: World) -> None:
    """A pass drives instances of different namespaces at once, those of one namespace
    in turn (they share the pass's list of it): each of three rollouts, two sharing a
    namespace, takes the same steps and status commits as a rollout alone."""
    names = {"web": "web", "web2": "web", "shop": "team-shop"}
    for name, namespace in names.items():
        text = WEB.format(extra="").replace("name: web\n", f"name: {name}\n")
        text = text.replace("namespace: web\n", f"namespace: {namespace}\n")
        world.commit(f"clusters/prod/instances/{name}.yaml", text, f"{name}: batches")
    assert world.daemon.run_pass().ok
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    outcomes = settle(world.daemon)
    assert outcomes[-1].report is not None
    statuses = {s.instance: s for s in outcomes[-1].report.statuses}
    subjects = [
        line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, f"status/{world.cluster}")
    ]
    for name, namespace in names.items():
        status = statuses[name]
        assert status.version == "6.6.0" and status.rollout is not None
        assert str(status.rollout.state) == "rolloutSucceed"
        deploy = ObjectRef("apps/v1", "Deployment", world.ns(namespace), name)
        assert _image(world, deploy).endswith(":6.6.0")
        copy = ObjectRef("apps/v1", "Deployment", world.ns(namespace), copy_name(name))
        assert world.client.get(copy) is None
        steps = [s for s in reversed(subjects) if s.startswith(f"{world.cluster}/{name}: rollout")]
        assert [s.split(": ", 2)[2] for s in steps] == [
            "started, 3 batches",
            "batch 1/3 ready (1/5 replicas)",
            "batch 2/3 ready (3/5 replicas)",
            "batch 3/3 ready (5/5 replicas)",
            "succeeded (5/5 replicas)",
        ]


@pytest.mark.slow
def test_a_new_version_mid_rollout_starts_from_the_version_most_replicas_run(
    world: World,
) -> None:
    """SPEC section 4 (issue 28): with 3 of 5 replicas on 6.6.0, a move to 6.7.0
    abandons the rollout saying so (3/5 replicas), brings every replica to 6.6.0,
    and the new rollout goes 6.6.0 -> 6.7.0, never back through 6.5.0."""
    waiting = _release_66_gated(world, partition=2)
    assert waiting.rollout is not None and waiting.rollout.batch == 2
    assert waiting.rollout.replicas.updated == 3
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.7.0"), "release 6.7.0")
    outcomes = settle(world.daemon, until_waiting=True)
    web = _web(outcomes[-1])
    assert web.rollout is not None and web.reason == "WaitingForPromotion"
    assert (web.rollout.from_version, web.rollout.to_version) == ("6.6.0", "6.7.0")
    subjects = [
        line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, f"status/{world.cluster}")
    ]
    rollout = [s for s in reversed(subjects) if s.startswith(f"{world.cluster}/web: rollout")]
    assert (
        f"{world.cluster}/web: rollout podinfo 6.5.0 -> 6.6.0: abandoned at batch 2/3 (3/5 replicas)"
        in (rollout)
    )
    assert f"{world.cluster}/web: rollout podinfo 6.6.0 -> 6.7.0: started, 3 batches" in rollout
    assert not any("6.5.0 -> 6.7.0" in s for s in rollout)
    assert "6.5.0" not in _pod_versions(world)
    assert _image(world, _deploy(world)).endswith(":6.7.0")
