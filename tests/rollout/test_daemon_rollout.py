"""Batch rollouts driven by the daemon against the sandbox (SPEC section 4).

The sandbox's Deployments roll with real ReplicaSets and pods, so these tests run
the two-Deployment scheme end to end: each pass makes one transition and never
waits, every step a person cares about is one status commit, the copy
``reconciler-rollout-<name>`` serves the old pods until the last batch, and after
success the cluster is the plain render of the new version.
"""

from __future__ import annotations

from typing import Any

from reconciler.daemon.loop import PassOutcome
from reconciler.kube.rollout_driver import copy_name
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from reconciler.source.scaffold import log_oneline
from tests.daemon.conftest import World, settle, world

CHANNELS = """\
apiVersion: reconciler/v1
kind: Channels
app: podinfo
channels:
  stable: {stable}
  fast: 6.6.0
"""
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
__all__ = ["world"]  # the daemon tests' fixture: a catalog repository and a sandbox
DEPLOY = ObjectRef("apps/v1", "Deployment", "web", "web")
COPY = ObjectRef("apps/v1", "Deployment", "web", copy_name("web"))


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
    assert _image(world, DEPLOY).endswith(":6.6.0")
    assert world.client.get(COPY) is None  # no helper left
    subjects = [line.split(" ", 1)[1] for line in log_oneline(world.repo.remote, "status/prod")]
    rollout = [s for s in reversed(subjects) if s.startswith("prod/web: rollout")]
    assert rollout == [
        "prod/web: rollout podinfo 6.5.0 -> 6.6.0: started, 3 batches",
        "prod/web: rollout podinfo 6.5.0 -> 6.6.0: batch 1/3 ready (1/5 replicas)",
        "prod/web: rollout podinfo 6.5.0 -> 6.6.0: batch 2/3 ready (3/5 replicas)",
        "prod/web: rollout podinfo 6.5.0 -> 6.6.0: batch 3/3 ready (5/5 replicas)",
        "prod/web: rollout podinfo 6.5.0 -> 6.6.0: succeeded (5/5 replicas)",
    ]
