"""Issue 8, "two daemons for one cluster": another writer is detected and reported.

Two daemons following different branches for one cluster, without leader
election between them, undo each other's work every pass. Nothing failed, so
nothing said so. Each inventory now records who applied it (the daemon's
source: repository and branch, never a credential); a pass that finds another
writer there reports ``ConflictingWriter`` on the instance's status and as a
Warning Event on its inventory ConfigMap, every pass it happens.
"""

from __future__ import annotations

import subprocess

import pytest

from reconciler.kube.inventory import from_configmap
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import ConditionType, Phase
from tests.daemon.conftest import World

WEB = ObjectRef("apps/v1", "Deployment", "web", "web")
WEB_DEV = """\
apiVersion: reconciler/v1
kind: Instance
name: web
app: podinfo
channel: stable
namespace: web
parameters: {replicas: 2}
"""


def _git(world: World, *args: str) -> None:
    subprocess.run(["git", *args], cwd=world.repo.work, check=True, capture_output=True)


def _push_dev_branch(world: World) -> None:
    """A ``dev`` branch where web runs 2 replicas instead of 5."""
    _git(world, "checkout", "-q", "-b", "dev")
    _git(world, "push", "-q", "-u", "origin", "dev")
    world.commit("clusters/prod/instances/web.yaml", WEB_DEV, "web: 2 replicas on dev")
    _git(world, "checkout", "-q", "main")


def _replicas(world: World) -> int:
    live = world.client.get(WEB)
    assert live is not None
    return int(live["spec"]["replicas"])


def _writer_events(world: World) -> list[dict[str, object]]:
    events = world.client.list("v1", "Event", namespace="web")
    return [e for e in events if e.get("reason") == "ConflictingWriter"]


@pytest.mark.slow
def test_two_daemons_on_two_branches_report_each_other(world: World) -> None:
    _push_dev_branch(world)
    main_daemon = world.daemon
    dev_daemon = world.new_daemon(branch="dev", cache_dir=world.cache / "dev")

    first = main_daemon.run_pass()
    assert first.report is not None and _replicas(world) == 5
    web = next(s for s in first.report.statuses if s.instance == "web")
    assert web.condition(ConditionType.CONFLICTING_WRITER) is None  # nobody else yet

    flipped = dev_daemon.run_pass()
    assert flipped.report is not None and _replicas(world) == 2
    web = next(s for s in flipped.report.statuses if s.instance == "web")
    condition = web.condition(ConditionType.CONFLICTING_WRITER)
    assert condition is not None and condition.status == "True"
    assert f"{world.repo.url} (default branch)" in condition.message
    assert web.phase is Phase.READY  # reported, not acted upon

    back = main_daemon.run_pass()
    assert back.report is not None and _replicas(world) == 5
    web = next(s for s in back.report.statuses if s.instance == "web")
    condition = web.condition(ConditionType.CONFLICTING_WRITER)
    assert condition is not None and f"{world.repo.url} (dev)" in condition.message

    assert main_daemon.run_pass().report is not None  # main sees itself: no report
    dev_daemon.run_pass()
    main_daemon.run_pass()  # main sees dev again: the same Event, counted
    main_daemon.flush_events()
    dev_daemon.flush_events()
    events = _writer_events(world)
    assert {e["type"] for e in events} == {"Warning"}
    assert {e["involvedObject"]["name"] for e in events} == {"reconciler-inventory-web"}  # type: ignore[index]
    seen_by_main = [e for e in events if "(dev)" in str(e["message"])]
    assert len(seen_by_main) == 1 and seen_by_main[0]["count"] == 2


def test_the_same_source_is_one_writer(world: World) -> None:
    """Replicas (or a restart) of one daemon follow the same source: no report."""
    assert world.daemon.run_pass().report is not None
    again_daemon = world.new_daemon(identity="replica-2")
    again = again_daemon.run_pass()
    assert again.report is not None
    assert all(s.condition(ConditionType.CONFLICTING_WRITER) is None for s in again.report.statuses)
    world.daemon.flush_events()
    again_daemon.flush_events()
    assert _writer_events(world) == []


def test_a_hand_over_is_reported_once(world: World) -> None:
    """A daemon moved to another branch sees its predecessor once, then owns the inventory."""
    _push_dev_branch(world)
    assert world.daemon.run_pass().report is not None
    dev_daemon = world.new_daemon(branch="dev", cache_dir=world.cache / "dev")
    seen = dev_daemon.run_pass().report
    after = dev_daemon.run_pass().report
    assert seen is not None and after is not None
    assert any(s.condition(ConditionType.CONFLICTING_WRITER) for s in seen.statuses)
    assert all(s.condition(ConditionType.CONFLICTING_WRITER) is None for s in after.statuses)
    configmap = world.client.get(ObjectRef("v1", "ConfigMap", "web", "reconciler-inventory-web"))
    assert configmap is not None
    inventory = from_configmap(configmap)
    assert inventory is not None and inventory.writer == f"{world.repo.url} (dev)"


def test_the_writer_never_carries_a_credential() -> None:
    from reconciler.daemon.loop import DaemonSettings

    settings = DaemonSettings(repo="https://bot:s3cret@git.example.com/catalog.git", cluster="c")
    assert "s3cret" not in settings.writer
    assert settings.writer.endswith("(default branch)")
