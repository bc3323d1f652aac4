"""DaemonSets roll in batches with ``OnDelete`` (SPEC section 4, docs/ROLLOUTS.md).

A DaemonSet under ``updateStrategy: OnDelete`` replaces a pod only when it is
deleted, and then from the current template
(https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/), so the rollout
applies ``to`` with ``OnDelete`` and deletes ``from`` pods batch by batch. These
tests drive the daemon against the sandbox's DaemonSet controller (one pod per
node, four nodes) and count pods through the API, checking at every write the
sandbox stores that no pod runs anything but ``from`` or ``to`` and that no more
pods run ``to`` than the batch the rollout is in allows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.applying import instance_target
from reconciler.daemon.loop import PassOutcome
from reconciler.daemon.plan import plan_cluster
from reconciler.kube import ApplyOptions, KubeClient, LiveState, diff_instance
from reconciler.kube.rollout_daemonset import ROLLOUT_ANNOTATION
from reconciler.kube.rollout_driver import KubeRolloutDriver
from reconciler.model.changeset import ObjectRef
from reconciler.model.rollout import BatchState, RollingState, RolloutRecord
from reconciler.model.status import Phase
from reconciler.rollout import Observation, Prepare, RetireOld, Rollback, ScaleBatch, Workload
from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.testing import running_sandbox
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World, next_look, sandbox_world

NAMESPACE = "team-agent"
DS = ObjectRef("apps/v1", "DaemonSet", NAMESPACE, "agent")
NODES = 4
DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ${instance.name}
spec:
  selector:
    matchLabels:
      app: ${instance.name}
  template:
    metadata:
      labels:
        app: ${instance.name}
%s    spec:
      containers:
        - name: agent
          image: ${images.agent}
"""
FAILING = "      annotations:\n        sandbox.reconciler.dev/fail: 'true'\n"


def _version(version: str) -> str:
    return (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: agent\n"
        f"version: {version}\nupgradeFrom: '>=1.0.0'\n"
        f"images:\n  agent: registry.example/agent:{version}\n"
    )


def instance(version: str, extra: str = "") -> str:
    return (
        "apiVersion: reconciler/v1\nkind: Instance\nname: agent\napp: agent\n"
        f'version: "{version}"\nnamespace: {NAMESPACE}\n'
        f"rollout:\n  batches: [1, 50%, 50%]\n{extra}"
    )


CATALOG: dict[str, str | bytes | None] = {
    "apps/agent/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: agent\n"
    "description: A node agent\nowners: [ops@example.com]\n",
    **{f"apps/agent/versions/{v}/version.yaml": _version(v) for v in ("1.0.0", "1.1.0", "1.2.0")},
    "apps/agent/versions/1.0.0/manifests/daemonset.yaml": DAEMONSET % "",
    "apps/agent/versions/1.1.0/manifests/daemonset.yaml": DAEMONSET % "",
    "apps/agent/versions/1.2.0/manifests/daemonset.yaml": DAEMONSET % FAILING,
    "clusters/prod/instances/agent.yaml": instance("1.0.0"),
    "clusters/prod/instances/web.yaml": None,  # the agent alone: fewer pods, faster passes
    "clusters/prod/instances/api.yaml": None,
}


@pytest.fixture
def nodes4(tmp_path: Path) -> Iterator[World]:
    """The daemon tests' world with the agent app on a sandbox of four nodes."""
    with sandbox_world(
        tmp_path,
        CATALOG,
        timing=Timing(pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.02, nodes=NODES),
    ) as w:
        yield w


def _agent(outcome: PassOutcome) -> Any:
    assert outcome.report is not None, outcome.error
    return next(s for s in outcome.report.statuses if s.instance == "agent")


def _running(world: World) -> dict[str, str]:
    """Node -> version of the agent pod on it (pods not being deleted)."""
    pods = world.client.list("v1", "Pod", namespace=NAMESPACE)
    return {
        p["spec"]["nodeName"]: str(p["spec"]["containers"][0]["image"]).rsplit(":", 1)[1]
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    }


def _allowed(record: RolloutRecord | None) -> int:
    """The most pods of ``to`` the next pass may reach: the batch it may start."""
    if record is None or not record.targets:
        return 0
    if record.state is not RollingState.ROLLING:
        return record.targets[0] if record.state is RollingState.INITIALIZING else NODES
    started = record.batch + (record.batch_state is BatchState.READY)
    return record.targets[min(started, len(record.targets)) - 1]


def _is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class Watch:
    """Every pod write in the namespace: versions seen, ready pods, and pods of ``to``
    against the bound of the batch in flight."""

    def __init__(self, world: World, to: str) -> None:
        self.to = to
        self.pods = {
            str(p["spec"]["nodeName"]): (
                str(p["metadata"]["name"]),
                str(p["spec"]["containers"][0]["image"]).rsplit(":", 1)[1],
            )
            for p in world.client.list("v1", "Pod", namespace=NAMESPACE)
        }
        self.ready = {
            str(p["metadata"]["name"])
            for p in world.client.list("v1", "Pod", namespace=NAMESPACE)
            if _is_ready(p)
        }
        self.lowest = len(self.ready)  # fewest ready pods at any write
        self.versions: set[str] = set(v for _, v in self.pods.values())
        self.bound = 0
        self.over: list[tuple[int, int]] = []
        self.per_node: list[str] = []
        self.moved: list[str] = []  # nodes in the order their pod came to run ``to``
        world.sandbox.observe(self.on_event)

    def on_event(self, event: StoredEvent) -> None:
        if event.resource != ("", "pods") or event.namespace != NAMESPACE:
            return
        name = event.obj["metadata"]["name"]
        self.pods = {n: p for n, p in self.pods.items() if p[0] != name}
        self.ready.discard(name)
        if event.type != "DELETED" and not event.obj["metadata"].get("deletionTimestamp"):
            if _is_ready(event.obj):
                self.ready.add(name)
            node = str(event.obj["spec"].get("nodeName", ""))
            if node in self.pods:
                self.per_node.append(node)  # two live pods on one node
            image = str(event.obj["spec"]["containers"][0]["image"])
            self.pods[node] = (name, image.rsplit(":", 1)[1])
            if self.pods[node][1] == self.to and node not in self.moved:
                self.moved.append(node)
        self.versions.update(v for _, v in self.pods.values())
        self.lowest = min(self.lowest, len(self.ready))
        moved = sum(1 for _, v in self.pods.values() if v == self.to)
        if moved > self.bound:
            self.over.append((moved, self.bound))


def _roll(world: World, watch: Watch, limit: int = 300) -> tuple[list[PassOutcome], list[int]]:
    """Passes until the agent is no longer Progressing; pods of ``to`` at each ready batch."""
    outcomes: list[PassOutcome] = []
    at_ready: list[int] = []
    record: RolloutRecord | None = None
    for _ in range(limit):
        # the first pass starts the rollout and may reach batch 1
        watch.bound = 1 if record is None else max(watch.bound, _allowed(record))
        since = world.sandbox.resource_version() if world.sandbox is not None else 0
        outcome = world.daemon.run_pass()
        outcomes.append(outcome)
        status = _agent(outcome)
        record = status.rollout
        if (
            record is not None
            and record.state is RollingState.ROLLING
            and record.batch_state is BatchState.READY
            and len(at_ready) < record.batch
        ):
            at_ready.append(sum(1 for v in _running(world).values() if v == watch.to))
        if status.phase is not Phase.PROGRESSING:
            return outcomes, at_ready
        next_look(world.sandbox, since, outcome.report.next_look if outcome.report else None)
    raise AssertionError("the agent is still progressing")


def _strategy(world: World) -> Any:
    live = world.client.get(DS)
    assert live is not None
    return live["spec"]["updateStrategy"], (live["metadata"].get("annotations") or {})


def test_a_daemonset_rolls_node_by_batch_and_ends_as_the_plain_render(nodes4: World) -> None:
    world = nodes4
    first = world.daemon.run_pass()
    assert _agent(first).phase is Phase.READY  # a first install applies at once
    for _ in range(200):
        if len(_running(world)) == NODES:
            break
        time.sleep(0.02)
    assert set(_running(world).values()) == {"1.0.0"}
    watch = Watch(world, "1.1.0")
    world.commit("clusters/prod/instances/agent.yaml", instance("1.1.0"), "agent 1.1.0")
    outcomes, at_ready = _roll(world, watch)
    status = _agent(outcomes[-1])
    assert status.phase is Phase.READY and status.version == "1.1.0", status.message
    # 1, then half of the 4 nodes, then every node; counted from pods, not the record
    assert status.rollout is not None and status.rollout.targets == (1, 2, 4)
    assert at_ready == [1, 2, 4]
    assert watch.over == []  # never more pods of ``to`` than the batch allows
    assert watch.versions == {"1.0.0", "1.1.0"} and watch.per_node == []
    # a DaemonSet cannot surge under OnDelete: ready pods dip by at most the largest
    # batch step (2 of 4 in batch 3), never more
    assert watch.lowest >= NODES - 2
    assert _running(world) == {f"node-{i}": "1.1.0" for i in range(1, NODES + 1)}
    assert watch.moved[:2] == ["node-1", "node-2"]  # lowest node first
    # after success: the rendered strategy back (defaulted), no trace of the rollout
    strategy, annotations = _strategy(world)
    assert strategy["type"] == "RollingUpdate" and ROLLOUT_ANNOTATION not in annotations
    catalog = load_catalog(world.repo.work)
    entry = catalog.clusters["prod"]
    live = LiveState(world.client, "prod", entry.namespaces)
    plans = plan_cluster(catalog, "prod", live.deployed_versions(entry.instances))
    agent = next(p for p in plans if p.name == "agent")
    assert diff_instance(world.client, instance_target("prod", agent), ApplyOptions(), live) == []
    # kubectl rollout history: one ControllerRevision per template, pods on the newest
    revisions = world.client.list("apps/v1", "ControllerRevision", namespace=NAMESPACE)
    newest = max(revisions, key=lambda r: int(r["revision"]))
    assert len(revisions) == 2
    hashes = {
        p["metadata"]["labels"]["controller-revision-hash"]
        for p in world.client.list("v1", "Pod", namespace=NAMESPACE)
    }
    assert hashes == {newest["metadata"]["labels"]["controller-revision-hash"]}
    subjects = [line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, "status/prod")]
    steps = [s for s in reversed(subjects) if s.startswith("prod/agent: rollout")]
    assert steps == [
        "prod/agent: rollout agent 1.0.0 -> 1.1.0: started, 3 batches",
        "prod/agent: rollout agent 1.0.0 -> 1.1.0: batch 1/3 ready (1/4 replicas)",
        "prod/agent: rollout agent 1.0.0 -> 1.1.0: batch 2/3 ready (2/4 replicas)",
        "prod/agent: rollout agent 1.0.0 -> 1.1.0: batch 3/3 ready (4/4 replicas)",
        "prod/agent: rollout agent 1.0.0 -> 1.1.0: succeeded (4/4 replicas)",
    ]
    quiet = world.daemon.run_pass()
    assert quiet.commits == []


def test_a_failing_daemonset_version_rolls_every_pod_back(nodes4: World) -> None:
    world = nodes4
    extra = "  onFailure: rollback\n"
    world.commit("clusters/prod/instances/agent.yaml", instance("1.1.0", extra), "agent")
    world.daemon.run_pass()
    for _ in range(200):
        if len(_running(world)) == NODES:
            break
        time.sleep(0.02)
    watch = Watch(world, "1.2.0")
    world.commit("clusters/prod/instances/agent.yaml", instance("1.2.0", extra), "bad")
    outcomes, _ = _roll(world, watch)
    status = _agent(outcomes[-1])
    assert status.phase is Phase.STALLED and status.reason == "RolledBack", status.message
    assert status.version == "1.1.0" and "pods failing" in status.message
    assert watch.over == [] and watch.versions == {"1.1.0", "1.2.0"}
    # the rollback's write put the template and RollingUpdate back together: the
    # controller itself moves every pod of 1.2.0 back (an OnDelete left behind would not)
    for _ in range(300):
        if set(_running(world).values()) == {"1.1.0"} and len(_running(world)) == NODES:
            break
        time.sleep(0.02)
    assert _running(world) == {f"node-{i}": "1.1.0" for i in range(1, NODES + 1)}
    strategy, annotations = _strategy(world)
    assert strategy["type"] == "RollingUpdate" and ROLLOUT_ANNOTATION not in annotations
    again = world.daemon.run_pass()  # same desired version and file: not retried
    assert _agent(again).reason == "RolledBack" and again.commits == []


def _plain(version: str, strategy: str | None = None) -> dict[str, Any]:
    labels = {"app": "agent"}
    updates = {"updateStrategy": {"type": strategy}} if strategy else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": NAMESPACE},
        "spec": {
            **updates,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "agent", "image": f"agent:{version}"}]},
            },
        },
    }


@pytest.mark.parametrize("strategy", [None, "OnDelete"])
def test_the_driver_deletes_only_what_a_batch_needs_even_when_repeated(
    strategy: str | None,
) -> None:
    """``ScaleBatch`` twice in a row (a restart between a delete and the controller's
    replacement) and once more later deletes one batch's pods, lowest nodes first.
    A rollback brings every pod back whether the render leaves the strategy to the
    API server's default (``RollingUpdate``) or itself says ``OnDelete``."""
    timing = Timing(pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.05, nodes=NODES)
    with (
        running_sandbox(timing=timing) as sandbox,
        KubeClient.connect(str(sandbox.kubeconfig)) as client,
    ):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        client.apply(_plain("1", strategy))

        def apply_render(version: str) -> None:
            """The plain render of ``version``, applied as the daemon's apply does."""
            client.apply(_plain(version, strategy))

        driver = KubeRolloutDriver(
            client=client,
            instance="agent",
            namespace=NAMESPACE,
            objects=[_plain("2", strategy)],
            from_version="1",
            to_version="2",
            apply_render=apply_render,
        )

        def seen(check: Any) -> Observation:
            for _ in range(250):
                obs = driver.observe("2", datetime.now(UTC))
                if check(obs):
                    return obs
                time.sleep(0.02)
            raise AssertionError(f"not reached: {obs}")

        first = seen(lambda o: o.workloads[0].ready == NODES)
        assert first.workloads[0] == Workload("DaemonSet/agent", NODES, 0, NODES, 0, NODES)
        assert not first.prepared and not first.helpers_left
        driver.execute([Prepare(), Prepare()])
        prepared = seen(lambda o: o.prepared)
        assert (
            prepared.helpers_left and prepared.workloads[0].old == NODES
        )  # OnDelete: no pod moved
        deleted: list[str] = []

        def on_event(event: StoredEvent) -> None:
            if event.resource == ("", "pods") and event.type == "DELETED":
                deleted.append(str(event.obj["spec"]["nodeName"]))

        sandbox.observe(on_event)
        batch = ScaleBatch(1, "DaemonSet/agent", 2)
        driver.execute([batch, batch])
        moved = seen(lambda o: o.workloads[0].updated_ready == 2)
        driver.execute([batch])
        assert sorted(deleted) == ["node-1", "node-2"]
        assert moved.workloads[0].old == 2 and moved.workloads[0].failing == ()
        driver.execute([RetireOld(1, "DaemonSet/agent", 2)])  # nothing for a DaemonSet
        assert seen(lambda o: o.workloads[0].updated_ready == 2).workloads[0].old == 2
        rollback = Rollback("test")
        driver.execute([rollback])  # the plain ``from``, strategy as rendered
        for _ in range(250):
            back = driver.observe("2", datetime.now(UTC))
            if back.helpers_left:  # what the machine does after a rollback
                driver.execute([rollback])
            pods = client.list("v1", "Pod", namespace=NAMESPACE)
            images = {p["spec"]["containers"][0]["image"] for p in pods}
            if images == {"agent:1"} and len(pods) == NODES and not back.helpers_left:
                break
            time.sleep(0.02)
        assert images == {"agent:1"} and len(pods) == NODES and not back.helpers_left
        assert back.workloads[0].updated == 0  # the live template is ``from`` again
        live = client.get(DS)
        assert live is not None
        assert live["spec"]["updateStrategy"]["type"] == (strategy or "RollingUpdate")
        assert ROLLOUT_ANNOTATION not in (live["metadata"].get("annotations") or {})
