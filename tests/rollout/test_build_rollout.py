"""A new build of a running version rolls out like a version change (SPEC sections 8, 4).

``builds.yaml`` pins ``podinfo`` of 6.5.0 (intermediate tag ``6.5.0-rev1``) to a long
tag and digest. A commit that moves the pin keeps the version, so the rollout's sides
are the builds: the status commits name ``6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1``, the
pods are counted per build at every ready batch, a plan without batches applies at
once, and a failing build with ``onFailure: rollback`` returns to the old pinned image
(rendered from the record, since ``builds.yaml`` has moved on). Sandbox with real Git.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator

import pytest

from reconciler.cli import main
from reconciler.daemon.loop import PassOutcome
from reconciler.kube.rollout_driver import copy_name
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World, rested, settle, world
from tests.daemon.test_pass import CHANNELS
from tests.factories import BASE_FILES
from tests.lanes import MISSING_DIGEST

REPO = "ghcr.io/stefanprodan/podinfo"
D5 = "sha256:" + "5" * 64
D6 = "sha256:" + "6" * 64
B5 = f"{REPO}:6.5.0-rev1-b5.1@{D5}"
B6 = f"{REPO}:6.5.0-rev1-b6.1@{D6}"
V650 = BASE_FILES["apps/podinfo/versions/6.5.0/version.yaml"].replace(
    "podinfo:6.5.0", "podinfo:6.5.0-rev1"
)
WEB = (
    "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\nchannel: stable\n"
    "namespace: web\nparameters: {{replicas: 5}}\n{rollout}"
)
BATCHES = "rollout:\n  batches: [1, 50%, 50%]\n"
DEPLOY = ObjectRef("apps/v1", "Deployment", "web", "web")
COPY = ObjectRef("apps/v1", "Deployment", "web", copy_name("web"))
__all__ = ["world"]  # the sandbox world fixture of the daemon tests


def builds(tag: str, digest: str) -> str:
    return (
        "apiVersion: reconciler/v1\nkind: ImageBuilds\napp: podinfo\nbuilds:\n"
        f"  6.5.0:\n    podinfo:\n      tag: {tag}\n      digest: {digest}\n"
    )


@pytest.fixture
def installed(world: World) -> Iterator[World]:
    """web runs 6.5.0 pinned to build b5.1 (a first install: at once)."""
    world.commit("apps/podinfo/versions/6.5.0/version.yaml", V650, "6.5.0: intermediate tag")
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b5.1", D5), "pin b5.1")
    world.commit("clusters/prod/instances/web.yaml", WEB.format(rollout=BATCHES), "web")
    web = _web(world.daemon.run_pass())
    assert web.phase is Phase.READY and web.version == "6.5.0"
    assert web.images == {"podinfo": f"6.5.0-rev1-b5.1@{D5}"}
    assert _image(world) == B5
    yield world


def _web(outcome: PassOutcome) -> InstanceStatus:
    assert outcome.report is not None, outcome.error
    return next(s for s in outcome.report.statuses if s.instance == "web")


def _image(world: World, ref: ObjectRef = DEPLOY) -> str:
    obj = world.client.get(ref)
    assert obj is not None
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def _pods(world: World) -> Counter[str]:
    """Running pods per image, counted from the pods (not from any spec)."""
    pods = world.client.list("v1", "Pod", namespace="web")
    return Counter(
        str(p["spec"]["containers"][0]["image"])
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    )


def _steps(world: World) -> list[str]:
    lines = log_oneline(world.repo.remote, "status/prod", limit=200)
    subjects = [line.split(" ", 1)[1] for line in reversed(lines)]
    return [s for s in subjects if s.startswith("prod/web: rollout")]


def _trailers(world: World, grep: str) -> list[str]:
    out = subprocess.run(
        [
            "git",
            "log",
            "status/prod",
            "--format=%(trailers:key=Reconciler-Rollout,valueonly)",
            f"--grep={grep}",
        ],
        cwd=world.repo.remote,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


@pytest.mark.slow
def test_a_new_build_rolls_out_in_batches_named_by_its_builds(
    installed: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world = installed
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b6.1", D6), "rebuild b6.1")
    at_batch: dict[int, Counter[str]] = {}

    def count(outcome: PassOutcome) -> None:
        web = _web(outcome)
        record = web.rollout
        if record is not None and str(record.batch_state) == "batchReady":
            at_batch.setdefault(record.batch, _pods(world))

    outcomes = settle(world.daemon, each=count)
    web = _web(outcomes[-1])
    assert web.phase is Phase.READY and web.version == "6.5.0"
    assert web.images == {"podinfo": f"6.5.0-rev1-b6.1@{D6}"}
    assert web.rollout is not None and str(web.rollout.state) == "rolloutSucceed"
    # [1, 50%, 50%] on 5 replicas: 1, 3, 5 pods on b6.1, the rest still on b5.1
    assert {k: (c[B6], c[B5]) for k, c in at_batch.items()} == {1: (1, 4), 2: (3, 2), 3: (5, 0)}
    label = "6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1"
    assert _steps(world) == [
        f"prod/web: rollout podinfo {label}: started, 3 batches",
        f"prod/web: rollout podinfo {label}: batch 1/3 ready (1/5 replicas)",
        f"prod/web: rollout podinfo {label}: batch 2/3 ready (3/5 replicas)",
        f"prod/web: rollout podinfo {label}: batch 3/3 ready (5/5 replicas)",
        f"prod/web: rollout podinfo {label}: succeeded (5/5 replicas)",
    ]
    assert set(_trailers(world, "rollout podinfo")) == {label}
    assert _image(world) == B6 and world.client.get(COPY) is None
    assert _pods(world) == Counter({B6: 5})
    quiet = world.daemon.run_pass()  # the cluster is the plain render of b6.1 now
    assert quiet.commits == [] and _web(quiet).rollout is not None
    remote = str(world.repo.remote)
    capsys.readouterr()
    assert main(["history", "--repo", remote, "--cluster", "prod", "web"]) == 0
    history = capsys.readouterr().out
    assert f"rollout podinfo {label}: batch 2/3 ready" in history
    assert main(["rollout", "status", "web", "--cluster", "prod", "--repo", remote]) == 0
    assert label in capsys.readouterr().out


def test_without_batches_a_new_build_applies_at_once_and_is_named(installed: World) -> None:
    world = installed
    world.commit("clusters/prod/instances/web.yaml", WEB.format(rollout=""), "web: no batches")
    world.daemon.run_pass()
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b6.1", D6), "rebuild b6.1")
    outcome = world.daemon.run_pass()
    web = _web(outcome)
    assert web.rollout is None and web.images == {"podinfo": f"6.5.0-rev1-b6.1@{D6}"}
    assert _image(world) == B6 and world.client.get(COPY) is None  # no batches, no copy
    settle(world.daemon)
    assert _pods(world) == Counter({B6: 5})
    subjects = [line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, "status/prod")]
    assert any(
        s.startswith("prod/web: rebuilt podinfo 6.5.0: builds 6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1")
        for s in subjects
    ), subjects
    assert _trailers(world, "rebuilt podinfo") == ["6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1"]


def test_a_failing_build_rolls_back_to_the_old_pinned_image(installed: World) -> None:
    world = installed
    rollback = BATCHES + "  onFailure: rollback\n"
    world.commit("clusters/prod/instances/web.yaml", WEB.format(rollout=rollback), "web: rb")
    world.daemon.run_pass()
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b7", MISSING_DIGEST), "bad")
    web = _web(settle(world.daemon)[-1])
    assert web.phase is Phase.STALLED and web.reason == "RolledBack", web.message
    assert web.images == {"podinfo": f"6.5.0-rev1-b5.1@{D5}"}  # the old build runs
    for _ in range(100):  # the copy goes once the Deployment is back on b5.1
        if world.client.get(COPY) is None:
            break
        rested(world.daemon).run_pass()
    assert world.client.get(COPY) is None
    assert _image(world) == B5  # rendered from the record: builds.yaml says b7
    settle(world.daemon)
    assert set(_pods(world)) == {B5}
    assert any(
        "rolled back" in s and "6.5.0-rev1-b5.1 -> 6.5.0-rev1-b7" in s for s in _steps(world)
    )
    again = world.daemon.run_pass()  # same builds and file: not tried again
    assert again.commits == [] and _web(again).reason == "RolledBack"


def test_reverting_the_builds_commit_during_a_rollout_rolls_back(installed: World) -> None:
    world = installed
    gate = BATCHES + "  partition: 1\n"
    world.commit("clusters/prod/instances/web.yaml", WEB.format(rollout=gate), "web: gate")
    world.daemon.run_pass()
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b6.1", D6), "rebuild b6.1")
    settle(world.daemon, until_waiting=True)
    assert _pods(world)[B6] == 1
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b5.1", D5), "revert")
    web = _web(settle(world.daemon)[-1])
    assert web.reason == "RolledBack" and "reverted" in web.message
    for _ in range(100):
        if world.client.get(COPY) is None:
            break
        rested(world.daemon).run_pass()
    settle(world.daemon)
    assert _image(world) == B5 and set(_pods(world)) == {B5}


def test_a_newer_build_abandons_and_a_restart_continues(installed: World) -> None:
    """A restarted daemon (no memory, the record from Git) continues the build rollout;
    a newer build during it abandons it and rolls out from what most pods run."""
    world = installed
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b6.1", D6), "rebuild b6.1")
    daemon = world.daemon
    for _ in range(50):  # up to batch 1 ready, restarting after every pass
        web = _web(rested(daemon).run_pass())
        daemon = world.new_daemon()
        if web.rollout is not None and web.rollout.batches_done >= 1:
            break
    assert _pods(world)[B6] >= 1
    d8 = "sha256:" + "8" * 64
    world.commit("apps/podinfo/builds.yaml", builds("6.5.0-rev1-b8", d8), "rebuild b8")
    world.daemon = daemon
    web = _web(settle(daemon)[-1])
    assert web.phase is Phase.READY and web.images == {"podinfo": f"6.5.0-rev1-b8@{d8}"}
    steps = _steps(world)
    assert any("6.5.0-rev1-b5.1 -> 6.5.0-rev1-b6.1: abandoned" in s for s in steps), steps
    assert "-> 6.5.0-rev1-b8: succeeded" in steps[-1], steps
    assert len([s for s in steps if "b6.1: started" in s]) == 1  # the restarts began nothing
    assert set(_pods(world)) == {f"{REPO}:6.5.0-rev1-b8@{d8}"}


@pytest.mark.slow
def test_a_version_change_from_a_pinned_build_is_named_by_versions(installed: World) -> None:
    """From 6.5.0 (pinned b5.1) to 6.6.0 (no builds): a version change as before; the
    record keeps the build it came from, and the status drops the pin once 6.6.0 runs."""
    world = installed
    world.commit("apps/podinfo/channels.yaml", CHANNELS.format(stable="6.6.0"), "release")
    started = _web(world.daemon.run_pass())
    assert started.rollout is not None and started.rollout.label == "6.5.0 -> 6.6.0"
    assert dict(started.rollout.from_images) == {"podinfo": f"6.5.0-rev1-b5.1@{D5}"}
    assert started.images == {"podinfo": f"6.5.0-rev1-b5.1@{D5}"}  # b5.1 still runs
    web = _web(settle(world.daemon)[-1])
    assert web.phase is Phase.READY and web.version == "6.6.0" and web.images == {}
    assert all("6.5.0 -> 6.6.0" in s for s in _steps(world))
    assert set(_pods(world)) == {f"{REPO}:6.6.0"}
