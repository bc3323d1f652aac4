"""``reconciler run --shards 3``: three replicas over one sandbox and one bare remote.

Each replica is a ``Daemon`` (its own cache, as its own pod would have) with a
``ShardCoordinator``; all of them share one hand-moved clock, so a killed
replica's Leases expire when the test moves the clock, not after a sleep. Passes
of the three run at the same time, so their status pushes race on the one
remote branch. What each test counts comes from the sandbox's request log and
from the status branch's ``Reconciler-Instance`` trailers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.daemon.loop import Daemon, PassOutcome
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.service import Service
from reconciler.kube.inventory import inventory_name, read_inventories, shared_name
from reconciler.kube.shards import ShardCoordinator
from reconciler.model.changeset import ObjectRef
from reconciler.model.shards import shard_of
from reconciler.model.status import Phase
from reconciler.source.ledger import StatusLedger
from tests.daemon.conftest import World, sandbox_world
from tests.daemon.test_service import eventually, running
from tests.factories import remove_file

COUNT = 30
SHARDS = 3
NAMES = [f"shop-{i:02d}" for i in range(COUNT)]
TIMINGS = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}

VERSION = """\
apiVersion: reconciler/v1
kind: AppVersion
app: settings
version: {v}
parameters:
  colour: {{default: {colour}}}
"""
MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${instance.name}
data:
  colour: ${params.colour}
"""
CHANNELS = """\
apiVersion: reconciler/v1
kind: Channels
app: settings
channels:
  stable: {stable}
"""
INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: {name}
app: settings
channel: stable
namespace: team-shop
"""


def catalog() -> dict[str, str | bytes | None]:
    """30 instances of a one-ConfigMap app (healthy at once) on channel stable, 1.0.0."""
    files: dict[str, str | bytes | None] = {
        "clusters/prod/instances/web.yaml": None,
        "clusters/prod/instances/api.yaml": None,
        "apps/settings/app.yaml": (
            "apiVersion: reconciler/v1\nkind: App\nname: settings\n"
            "description: one ConfigMap\nowners: [shop@example.com]\n"
        ),
        "apps/settings/channels.yaml": CHANNELS.format(stable="1.0.0"),
        "apps/settings/versions/1.0.0/version.yaml": VERSION.format(v="1.0.0", colour="blue"),
        "apps/settings/versions/1.0.0/manifests/configmap.yaml": MANIFEST,
        "apps/settings/versions/1.1.0/version.yaml": VERSION.format(v="1.1.0", colour="red"),
        "apps/settings/versions/1.1.0/manifests/configmap.yaml": MANIFEST,
    }
    for name in NAMES:
        files[f"clusters/prod/instances/{name}.yaml"] = INSTANCE.format(name=name)
    return files


@dataclass
class Replica:
    daemon: Daemon
    leases: ShardCoordinator

    def run_pass(self) -> PassOutcome:
        scope = self.leases.begin_pass()
        try:
            return self.daemon.run_pass(scope)
        finally:
            self.leases.end_pass()


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[World]:
    with sandbox_world(tmp_path, catalog()) as w:
        yield w


def replicas(world: World, clock: Clock) -> list[Replica]:
    out = []
    for name in ("a", "b", "c"):
        daemon = world.new_daemon(
            shards=SHARDS,
            identity=name,
            leader_namespace="default",
            lease_name="reconciler-prod",
            cache_dir=world.cache / name,
            **TIMINGS,
        )
        leases = ShardCoordinator(
            world.client,
            "default",
            "reconciler-prod",
            SHARDS,
            name,
            clock=clock,
            monotonic=clock,
            **TIMINGS,
        )
        out.append(Replica(daemon, leases))
    return out


def tick(group: list[Replica], rounds: int = 1) -> None:
    for _ in range(rounds):
        for r in group:
            r.leases.tick()


def concurrently(group: list[Replica]) -> list[PassOutcome]:
    """One pass of every replica at the same time (their pushes race)."""
    outcomes: list[PassOutcome | None] = [None] * len(group)

    def run(i: int) -> None:
        outcomes[i] = group[i].run_pass()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(group))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def reconciled(outcomes: list[PassOutcome]) -> Counter[str]:
    """How many replicas produced a record for each instance in this pass."""
    seen: Counter[str] = Counter()
    for outcome in outcomes:
        assert outcome.error is None and outcome.report is not None, outcome.error
        seen.update(s.instance for s in outcome.report.statuses)
    return seen


def configmap_writes(world: World) -> Counter[str]:
    """Writes of each instance's own ConfigMap (not its inventory), dry runs excluded."""
    assert world.sandbox is not None
    prefix = "/api/v1/namespaces/team-shop/configmaps/"
    found: Counter[str] = Counter()
    for e in world.sandbox.request_log():
        if e.method in ("POST", "PUT", "PATCH", "DELETE") and "dryRun=" not in e.query:
            name = e.path.removeprefix(prefix)
            if e.path.startswith(prefix) and name in NAMES:
                found[name] += 1
    return found


def commits_per_instance(world: World) -> Counter[str]:
    ledger = StatusLedger(world.repo.url, "prod", cache_dir=world.cache / "reader")
    return Counter(entry.instance for entry in ledger.history())


@pytest.mark.slow
def test_three_replicas_reconcile_each_instance_once_and_take_over_a_dead_one(
    shop: World,
) -> None:
    clock = Clock()
    group = replicas(shop, clock)
    tick(group, rounds=4)
    held = [r.leases.held for r in group]
    assert sorted(k for h in held for k in h) == [0, 1, 2], held

    first = concurrently(group)
    assert reconciled(first) == Counter(dict.fromkeys(NAMES, 1))  # each once, by one replica
    for r, outcome in zip(group, first, strict=True):
        assert outcome.report is not None
        assert {shard_of(s.instance, SHARDS) for s in outcome.report.statuses} <= r.leases.held
    assert configmap_writes(shop) == Counter(dict.fromkeys(NAMES, 1))
    assert commits_per_instance(shop) == Counter(dict.fromkeys(NAMES, 1))  # none lost or twice
    records = StatusLedger(shop.repo.url, "prod", cache_dir=shop.cache / "reader").read()
    assert set(records) == set(NAMES)  # one tree, merged per instance by every shard
    assert all(s.phase is Phase.READY for s in records.values())

    # a pass with nothing new: every instance looked at once more, nothing written
    assert shop.sandbox is not None
    shop.sandbox.reset_request_log()
    assert reconciled(concurrently(group)) == Counter(dict.fromkeys(NAMES, 1))
    assert configmap_writes(shop) == Counter()
    assert commits_per_instance(shop) == Counter(dict.fromkeys(NAMES, 1))

    # replica c is killed: it neither renews nor releases its Lease
    a, b, c = group
    (dead,) = c.leases.held
    orphans = {n for n in NAMES if shard_of(n, SHARDS) == dead}
    shop.commit("apps/settings/channels.yaml", CHANNELS.format(stable="1.1.0"), "stable -> 1.1.0")
    shop.sandbox.reset_request_log()
    before = reconciled(concurrently([a, b]))  # the dead shard is nobody's yet
    assert set(before) == set(NAMES) - orphans
    clock.now += 1.1  # past c's lease duration
    tick([a, b], rounds=2)
    assert sorted(k for r in (a, b) for k in r.leases.held) == [0, 1, 2]
    # every instance once again; only the orphans had anything left to do
    assert reconciled(concurrently([a, b])) == Counter(dict.fromkeys(NAMES, 1))
    assert configmap_writes(shop) == Counter(dict.fromkeys(NAMES, 1))  # each moved once
    assert commits_per_instance(shop) == Counter(dict.fromkeys(NAMES, 2))
    records = StatusLedger(shop.repo.url, "prod", cache_dir=shop.cache / "reader").read()
    assert {s.version for s in records.values()} == {"1.1.0"}

    # deleted from Git: each is pruned once, by the shard its name hashes to
    gone = NAMES[:2]
    for name in gone:
        remove_file(shop.repo, f"clusters/prod/instances/{name}.yaml", f"remove {name}")
    shop.sandbox.reset_request_log()
    outcomes = concurrently([a, b])
    for r, outcome in zip((a, b), outcomes, strict=True):
        assert outcome.report is not None
        assert all(shard_of(x.instance, SHARDS) in r.leases.held for x in outcome.report.removed)
    removed = Counter(x.instance for o in outcomes if o.report for x in o.report.removed)
    assert removed == Counter(dict.fromkeys(gone, 1))
    assert configmap_writes(shop) == Counter(dict.fromkeys(gone, 1))  # one DELETE each
    commits = commits_per_instance(shop)
    assert {n: commits[n] for n in gone} == dict.fromkeys(gone, 3)  # installed, moved, removed


@pytest.mark.slow  # about 3 s: it waits on a real clock for a Lease to expire
def test_three_services_share_the_shards_and_take_over_a_killed_ones(shop: World) -> None:
    """The running daemons, as three pods would run them (short Leases, real clock).

    Each wait is for a condition, with a generous bound: how long a takeover takes is
    not asserted. The replica that takes the killed one's shard over reconciles its
    instances at once (its pass counts them in its gauges), and records nothing twice.
    """
    common = {
        "interval": 3600.0,  # passes come from start-up and from shards taken over
        "drift_interval": 3600.0,
        "shards": SHARDS,
        "leader_namespace": "default",
        "lease_name": "reconciler-prod",
        **TIMINGS,
    }
    daemons = [shop.new_daemon(identity=n, cache_dir=shop.cache / n, **common) for n in "abc"]
    with running(daemons[0]) as a, running(daemons[1]) as b, running(daemons[2]) as c:
        services = [a, b, c]

        def held(service: Service) -> frozenset[int]:
            # None until the service's thread has started its Leases
            return service.shards.held if service.shards is not None else frozenset()

        def ready(*group: Service) -> float:
            key = ("reconciler_instances", (("cluster", "prod"), ("phase", "Ready")))
            return sum(samples(s.daemon.metrics).get(key, 0.0) for s in group)

        eventually(lambda: sorted(k for s in services for k in held(s)) == [0, 1, 2])
        eventually(lambda: len(commits_per_instance(shop)) == COUNT)
        eventually(lambda: ready(a, b, c) == COUNT)
        shards = ("reconciler_shards_held", (("cluster", "prod"),))

        def one_each() -> bool:
            # a short Lease a starved replica renews late may lapse and be taken back:
            # waited for, as the held shards above are, never read at one instant
            return all(
                samples(s.daemon.metrics).get(shards) == len(held(s)) == 1
                # a replica holding a shard acts: reconciler_is_leader reads 1 for each
                and samples(s.daemon.metrics).get(("reconciler_is_leader", ())) == 1
                for s in services
            )

        eventually(one_each)
        # reconciler_instance_info: each instance once, on the replica holding its shard
        infos = [
            dict(labels)["instance"]
            for s in services
            for (name, labels) in samples(s.daemon.metrics)
            if name == "reconciler_instance_info"
        ]
        assert sorted(infos) == sorted(NAMES)
        assert c.shards is not None
        c.shards.release_on_cancel = False  # killed: its Leases stay until they expire
        c.shutdown("killed")
        eventually(lambda: sorted([*held(a), *held(b)]) == [0, 1, 2])
        eventually(lambda: ready(a, b) == COUNT)  # the orphans were reconciled by a or b
    assert commits_per_instance(shop) == Counter(dict.fromkeys(NAMES, 1))  # none twice


def samples(metrics: DaemonMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the daemon's registry, as a scrape collects them (the exposition
    itself is ``test_metrics``'s: a wait that looks every 50 ms need not render and
    parse every metric text each time)."""
    found = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


SHARED_CLUSTER = """\
apiVersion: reconciler/v1
kind: Cluster
name: prod
allowedNamespaces: [web, "team-*"]
allowClusterScoped: false
inventory: perNamespace
"""


@pytest.fixture
def shared_shop(tmp_path: Path) -> Iterator[World]:
    """``shop`` with ``inventory: perNamespace``: the 30 instances' inventories are keys of
    one ConfigMap, which the three replicas write at the same time."""
    with sandbox_world(tmp_path, {**catalog(), "clusters/prod/cluster.yaml": SHARED_CLUSTER}) as w:
        yield w


def shared_inventory(world: World) -> dict[str, str]:
    ref = ObjectRef("v1", "ConfigMap", "team-shop", shared_name("prod"))
    found = world.client.get(ref)
    assert found is not None
    return dict(found.get("data") or {})


@pytest.mark.slow
def test_three_replicas_writing_one_shared_inventory_keep_each_other_s_keys(
    shared_shop: World,
) -> None:
    clock = Clock()
    group = replicas(shared_shop, clock)
    tick(group, rounds=4)
    assert sorted(k for r in group for k in r.leases.held) == [0, 1, 2]
    assert reconciled(concurrently(group)) == Counter(dict.fromkeys(NAMES, 1))
    # each replica wrote its own instances' keys of the one ConfigMap, at the same time
    assert sorted(shared_inventory(shared_shop)) == NAMES
    found = read_inventories(shared_shop.client, "prod")
    assert sorted(found) == NAMES and {i.version for i in found.values()} == {"1.0.0"}
    for name in NAMES:
        own = ObjectRef("v1", "ConfigMap", "team-shop", inventory_name(name))
        assert shared_shop.client.get(own) is None

    # a channel move: every replica rewrites its keys; none is lost to another's write
    shared_shop.commit(
        "apps/settings/channels.yaml", CHANNELS.format(stable="1.1.0"), "stable -> 1.1.0"
    )
    assert reconciled(concurrently(group)) == Counter(dict.fromkeys(NAMES, 1))
    found = read_inventories(shared_shop.client, "prod")
    assert sorted(found) == NAMES and {i.version for i in found.values()} == {"1.1.0"}

    # deleted from Git: each key goes, by the shard its name hashes to; the others stay
    gone = NAMES[:2]
    for name in gone:
        remove_file(shared_shop.repo, f"clusters/prod/instances/{name}.yaml", f"remove {name}")
    outcomes = concurrently(group)
    removed = Counter(x.instance for o in outcomes if o.report for x in o.report.removed)
    assert removed == Counter(dict.fromkeys(gone, 1))
    assert sorted(shared_inventory(shared_shop)) == NAMES[2:]
