"""Waves end to end (SPEC section 4b): three clusters' daemons, one catalog, real Git.

Each daemon reconciles its own cluster (one sandbox, a namespace per cluster) and reads
the others' status branches from the same repository. Status commits carry the tests'
pinned Git date (2026-01-01T00:00:00Z), so soak is driven by the daemons' injected
clock: no test sleeps for an hour.
"""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import pytest

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.commands.waves import fleet_board
from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.ledger import StatusLedger
from reconciler.status.report import Pipeline
from tests.daemon.conftest import World, sandbox_world, settle
from tests.factories import DEPLOYMENT_TEMPLATE
from tests.source.gittrace import GitTrace, git_trace

__all__ = ["git_trace"]

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # the pinned date of every test commit
HEALTH_TIMEOUT = 3.0  # seconds of the daemons' health clock (``Fleet.health_now``)
CLUSTERS = ("staging", "prod-eu", "prod-us")
WAVES = """\
apiVersion: reconciler/v1
kind: Waves
waves:
  - name: canary
    clusters: [staging]
  - name: eu
    clusters: [prod-eu]
    approval: required
  - name: rest
    clusters: ["*"]
    soak: 1h
    maxFailures: {max_failures}
"""
CHANNELS = """\
apiVersion: reconciler/v1
kind: Channels
app: podinfo
channels:
  stable: {version}
"""
BAD_VERSION = """\
apiVersion: reconciler/v1
kind: AppVersion
app: podinfo
version: 6.7.0
images:
  podinfo: ghcr.io/stefanprodan/podinfo:6.7.0-does-not-exist
parameters:
  replicas: {default: 1}
  message: {default: hello}
"""


def files(max_failures: int = 0) -> dict[str, str | bytes | None]:
    out: dict[str, str | bytes | None] = {
        "clusters/prod/cluster.yaml": None,
        "clusters/prod/instances/web.yaml": None,
        "clusters/prod/instances/api.yaml": None,
        "apps/podinfo/channels.yaml": CHANNELS.format(version="6.5.0"),
        "waves.yaml": WAVES.format(max_failures=max_failures),
    }
    for cluster in CLUSTERS:
        out[f"clusters/{cluster}/instances/web.yaml"] = textwrap.dedent(
            f"""\
            apiVersion: reconciler/v1
            kind: Instance
            name: web
            app: podinfo
            channel: stable
            namespace: web-{cluster}
            parameters: {{replicas: 1}}
            """
        )
    return out


@dataclass
class Fleet:
    """The world's repository and sandbox, a daemon per cluster, and their shared clock."""

    world: World
    tmp_path: Path
    now: datetime = T0
    daemons: dict[str, Daemon] = field(default_factory=dict)
    # the daemons' health clock (seconds): it stands still until a test lets unready
    # pods outlast the health timeout (``fail_unready``), so no test waits a timeout
    # out, and a good release's pods never time out however slow a busy machine is
    health_now: float = 0.0

    def clock(self) -> datetime:
        return self.now

    def health_clock(self) -> float:
        return self.health_now

    def daemon(self, cluster: str, *, fresh: bool = False) -> Daemon:
        """The cluster's daemon (``fresh``: a restarted one, with nothing in memory)."""
        if fresh or cluster not in self.daemons:
            base = self.world.daemon.settings
            settings = DaemonSettings(
                **{
                    **base.__dict__,
                    "cluster": cluster,
                    "cache_dir": self.tmp_path / f"cache-{cluster}",
                    "health_timeout": HEALTH_TIMEOUT,
                    # a pass polls health for half a second, not 2 s: a bad release's
                    # pods never get ready, and each of its passes waited the grace out
                    "health_grace": 0.5,
                }
            )
            daemon = Daemon(
                settings, self.world.client, clock=self.clock, registry=self.world.daemon.registry
            )
            daemon.health.clock = self.health_clock
            self.daemons[cluster] = daemon
        return self.daemons[cluster]

    def run(self, cluster: str) -> PassOutcome:
        outcome = self.daemon(cluster).run_pass()
        assert outcome.error is None, outcome.error
        return outcome

    def settle(self, cluster: str) -> PassOutcome:
        return settle(self.daemon(cluster))[-1]

    def fail_unready(self, cluster: str) -> PassOutcome:
        """A pass applies what never gets ready; its pods then outlast the health
        timeout, and the passes that follow fail it (``HealthCheckFailed``)."""
        applied = self.run(cluster)
        assert applied.report is not None
        statuses = applied.report.statuses
        assert any(s.phase is Phase.PROGRESSING for s in statuses), statuses
        self.health_now += HEALTH_TIMEOUT
        return self.settle(cluster)

    def record(self, cluster: str) -> InstanceStatus:
        ledger = StatusLedger(self.world.repo.url, cluster, cache_dir=self.tmp_path / "reader")
        return ledger.read()["web"]

    def release(self, version: str) -> str:
        return self.world.commit(
            "apps/podinfo/channels.yaml", CHANNELS.format(version=version), f"stable {version}"
        )

    def approve(self, version: str) -> None:
        """``reconciler wave approve`` in the work clone, pushed, as a person runs it."""
        work = str(self.world.repo.work)
        argv = ["wave", "approve", "podinfo", version, "--wave", "eu", "--repo", work, "--push"]
        assert main(argv) == 0


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with sandbox_world(tmp_path, files(), cluster="staging") as world:
        fleet = Fleet(world, tmp_path)
        for cluster in CLUSTERS:  # first installs are never held
            assert fleet.settle(cluster).report is not None
            assert fleet.record(cluster).version == "6.5.0"
        yield fleet


def web(outcome: PassOutcome) -> InstanceStatus:
    assert outcome.report is not None
    return next(s for s in outcome.report.statuses if s.instance == "web")


def wave_status(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    url = fleet.world.repo.url
    code = main(["wave", "status", "podinfo", "--repo", url, "-o", "json"])
    board: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["waves"]
    assert code == (1 if any(w["gate"] == "halted" for w in board) else 0)
    return board


@pytest.mark.slow
def test_a_good_release_flows_canary_approval_eu_soak_rest(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.release("6.6.0")
    held = web(fleet.run("prod-us"))
    assert (held.phase, held.reason, held.version, held.desired_version) == (
        Phase.PROGRESSING,
        "WaitingForWave",
        "6.5.0",
        "6.6.0",
    )
    assert held.message == "waiting for wave canary: staging/web runs 6.5.0 (Ready) (and 1 more)"
    again = fleet.run("prod-us")
    assert again.commits == []  # an unchanged wait reason is no commit

    assert web(fleet.settle("staging")).version == "6.6.0"
    eu = web(fleet.run("prod-eu"))
    assert eu.reason == "WaitingForWave" and eu.version == "6.5.0"
    assert "waiting for an approval of wave eu for podinfo 6.6.0" in eu.message
    us = fleet.run("prod-us")
    assert len(us.commits) == 1  # a changed wait reason is one commit
    assert web(us).message.startswith("waiting for wave eu: prod-eu/web runs 6.5.0")

    fleet.approve("6.6.0")
    assert web(fleet.settle("prod-eu")).version == "6.6.0"
    fleet.now = T0 + timedelta(minutes=12)
    soaking = web(fleet.run("prod-us"))
    assert soaking.message == "waiting for wave eu: prod-eu/web 6.6.0 Ready for 12m of 1h"
    assert soaking.version == "6.5.0"
    # a restarted daemon reads the same history and reaches the same answer: no commit
    restarted = fleet.daemon("prod-us", fresh=True).run_pass()
    assert web(restarted).message == soaking.message and restarted.commits == []
    metrics = fleet.daemon("prod-us").metrics.render().decode()
    assert 'reconciler_wave_gate_waiting{app="podinfo",wave="rest"} 1.0' in metrics
    # the soak goes on: the same wait, no commit per pass; the gate says the live figure
    fleet.now = T0 + timedelta(minutes=30)
    later = fleet.run("prod-us")
    assert later.commits == [] and web(later).message == soaking.message
    assert later.report is not None
    assert [h.decision.message for h in later.report.waves] == [
        "waiting for wave eu: prod-eu/web 6.6.0 Ready for 30m of 1h"
    ]
    assert fleet.record("prod-us").message == soaking.message

    # the CLI's clock is the real one: long after the tests' pinned commit dates
    board = wave_status(fleet, capsys)
    assert [(w["wave"], w["gate"]) for w in board] == [
        ("canary", "open"),
        ("eu", "open"),
        ("rest", "open"),
    ]
    # the same board at the daemons' time says what the daemon said
    catalog = load_catalog(fleet.world.repo.work)
    head = git.Repo(fleet.world.repo.work).head.commit.hexsha
    bare = str(fleet.world.repo.remote)  # a local path this time: its refs, its history
    at = fleet_board(catalog, bare, "podinfo", None, head, now=fleet.now)
    assert at[2].decision.message == later.report.waves[0].decision.message
    assert at[2].state == "waiting"
    assert [(i["cluster"], i["version"], i["phase"]) for i in board[1]["instances"]] == [
        ("prod-eu", "6.6.0", "Ready")
    ]
    fleet.now = T0 + timedelta(hours=1, minutes=1)
    done = web(fleet.settle("prod-us"))
    assert (done.phase, done.version) == (Phase.READY, "6.6.0")
    assert fleet.record("prod-us").version == "6.6.0"
    metrics = fleet.daemon("prod-us").metrics.render().decode()
    assert 'reconciler_wave_gate_waiting{app="podinfo",wave="rest"} 0.0' in metrics


@pytest.mark.slow
def test_an_approval_for_another_version_is_inert(fleet: Fleet) -> None:
    fleet.approve("6.5.0")
    fleet.release("6.6.0")
    fleet.settle("staging")
    eu = web(fleet.run("prod-eu"))
    assert eu.reason == "WaitingForWave" and "approval of wave eu for podinfo 6.6.0" in eu.message


def bad_release(fleet: Fleet) -> None:
    fleet.world.commit("apps/podinfo/versions/6.7.0/version.yaml", BAD_VERSION, "6.7.0")
    fleet.world.commit("apps/podinfo/versions/6.7.0/manifests/deployment.yaml", DEPLOYMENT_TEMPLATE)
    fleet.release("6.7.0")
    failed = web(fleet.fail_unready("staging"))
    assert failed.phase is Phase.FAILED and failed.desired_version == "6.7.0", failed


@pytest.mark.slow
def test_a_bad_release_halts_the_later_waves(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_release(fleet)
    fleet.approve("6.7.0")
    for cluster in ("prod-eu", "prod-us"):
        halted = web(fleet.run(cluster))
        assert (halted.phase, halted.reason, halted.version) == (
            Phase.STALLED,
            "WaveHalted",
            "6.5.0",
        )
        assert "failed in earlier waves on staging/web (1 > maxFailures 0)" in halted.message
    metrics = fleet.daemon("prod-eu").metrics.render().decode()
    assert 'reconciler_wave_halts_total{app="podinfo",wave="eu"} 1.0' in metrics
    board = wave_status(fleet, capsys)  # exit 1: halted
    assert [w["gate"] for w in board] == ["open", "halted", "halted"]
    assert board[1]["message"].startswith("halted: podinfo 6.7.0 failed in earlier waves")
    # moving the channel back clears it
    fleet.release("6.5.0")
    back = web(fleet.settle("prod-eu"))
    assert (back.phase, back.version) == (Phase.READY, "6.5.0")


def wave_events(fleet: Fleet, cluster: str) -> dict[str, list[dict[str, Any]]]:
    """The daemon's Events on the inventory of ``web`` in ``cluster``, by reason (the
    cluster's controllers record their own Events on pods and ReplicaSets beside them)."""
    fleet.daemon(cluster).flush_events()
    out: dict[str, list[dict[str, Any]]] = {}
    for event in fleet.world.client.list("v1", "Event", namespace=f"web-{cluster}"):
        if event["involvedObject"]["name"] == "reconciler-inventory-web":
            out.setdefault(event["reason"], []).append(event)
    return out


@pytest.mark.slow
def test_a_wait_and_a_halt_are_each_said_once(fleet: Fleet) -> None:
    fleet.release("6.6.0")
    assert web(fleet.run("prod-us")).reason == "WaitingForWave"
    fleet.run("prod-us")  # the same wait: no commit, nothing said again
    [waiting] = wave_events(fleet, "prod-us")["WaitingForWave"]
    assert (
        waiting["type"] == "Normal"
        and "podinfo 6.6.0: waiting for wave canary" in (waiting["message"])
    )
    bad_release(fleet)  # 6.7.0 fails on staging: prod-us halts
    halted = fleet.run("prod-us")
    assert web(halted).reason == "WaveHalted" and len(halted.commits) == 1
    # one more canary instance fails 6.7.0: the halt's message changes (a commit), but it
    # is the same halt: counted once, said once
    fleet.world.commit(
        "clusters/staging/instances/web2.yaml",
        "apiVersion: reconciler/v1\nkind: Instance\nname: web2\napp: podinfo\n"
        "channel: stable\nnamespace: web2-staging\nparameters: {replicas: 1}\n",
    )
    fleet.fail_unready("staging")
    again = fleet.run("prod-us")
    assert len(again.commits) == 1
    assert "on staging/web, staging/web2 (2 > maxFailures 0)" in web(again).message
    fleet.run("prod-us")
    metrics = fleet.daemon("prod-us").metrics.render().decode()
    assert 'reconciler_wave_halts_total{app="podinfo",wave="rest"} 1.0' in metrics
    events = wave_events(fleet, "prod-us")
    [halt] = events["WaveHalted"]
    assert halt["type"] == "Warning" and halt.get("count", 1) == 1
    assert "podinfo 6.7.0: halted: podinfo 6.7.0 failed in earlier waves" in halt["message"]
    # a restarted daemon reads the halt from the branch: not a new one
    restarted = fleet.daemon("prod-us", fresh=True)
    assert restarted.run_pass().commits == []
    assert "reconciler_wave_halts_total{" not in restarted.metrics.render().decode()


@pytest.mark.slow
def test_failures_within_max_failures_let_the_next_wave_go(tmp_path: Path) -> None:
    with sandbox_world(tmp_path, files(max_failures=1), cluster="staging") as world:
        fleet = Fleet(world, tmp_path)
        for cluster in CLUSTERS:
            fleet.settle(cluster)
        # the canary fails 6.7.0: eu (maxFailures 0) halts, rest (maxFailures 1) would
        # not halt for it, but waits for eu, which never runs 6.7.0
        bad_release(fleet)
        assert web(fleet.run("prod-eu")).reason == "WaveHalted"
        us = web(fleet.run("prod-us"))
        assert us.reason == "WaitingForWave" and "prod-eu/web runs 6.5.0" in us.message


@pytest.mark.slow
def test_a_stale_ready_from_an_older_release_does_not_open(fleet: Fleet) -> None:
    fleet.release("6.6.0")
    fleet.settle("staging")  # staging is Ready on 6.6.0 at this commit
    fleet.release("6.5.0")  # moved back; staging's daemon is down and never sees it
    fleet.release("6.6.0")  # released again: staging's Ready is from the older release
    fleet.approve("6.6.0")
    fleet.now = T0 + timedelta(days=1)
    eu = web(fleet.run("prod-eu"))
    assert eu.reason == "WaitingForWave" and eu.version == "6.5.0"
    assert "6.6.0 Ready is from an older release" in eu.message
    fleet.run("staging")  # its daemon comes back: the record names the new release
    assert web(fleet.settle("prod-eu")).version == "6.6.0"


def test_two_daemons_push_status_concurrently_and_no_record_is_lost(fleet: Fleet) -> None:
    fleet.release("6.6.0")
    outcomes: dict[str, PassOutcome] = {}

    def run(cluster: str) -> None:
        outcomes[cluster] = fleet.daemon(cluster).run_pass()

    threads = [threading.Thread(target=run, args=(c,)) for c in ("prod-eu", "prod-us")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(o.error is None for o in outcomes.values())
    for cluster in ("prod-eu", "prod-us"):
        record = fleet.record(cluster)
        assert record.reason == "WaitingForWave" and record.cluster == cluster
    assert fleet.record("staging").version == "6.5.0"


def test_a_broken_waves_file_holds_catalog_changes_only(fleet: Fleet) -> None:
    fleet.world.commit(
        "waves.yaml", "apiVersion: reconciler/v1\nkind: Waves\nwaves:\n  - name: a\n"
    )
    fleet.release("6.6.0")
    held = web(fleet.run("staging"))
    assert (held.phase, held.reason, held.version) == (Phase.STALLED, "CatalogInvalid", "6.5.0")
    assert held.message.startswith("podinfo 6.6.0 waits: waves.yaml:4:")
    # an exact version in the instance file is not held, even now
    fleet.world.commit(
        "clusters/staging/instances/web.yaml",
        "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
        "version: 6.6.0\nnamespace: web-staging\nparameters: {replicas: 1}\n",
    )
    assert web(fleet.settle("staging")).version == "6.6.0"


def test_a_pass_lists_the_remote_once_and_fetches_only_what_moved(
    fleet: Fleet, git_trace: GitTrace
) -> None:
    """One listing (``git ls-remote``, or in process for a remote on this machine) answers
    for the catalog branch and every status branch.

    A settled pass asks the gate nothing: it fetches no status branch, not even one
    that moved, and reads no history. A held pass fetches the moved branches and the
    catalog's new commit once; held again after one cluster's record moved, it fetches
    that branch alone and reads its new commits in process, and where the release
    began is known from before (no ``git log``).
    """
    fleet.run("prod-us")
    fleet.world.move_status_branch("prod-eu")
    git_trace.clear()
    quiet = fleet.run("prod-us")
    assert quiet.commits == [] and not quiet.source_changed
    assert git_trace.listings() == 1
    assert git_trace.count("fetch") == 0
    assert git_trace.count("log") == 0

    fleet.release("6.6.0")
    git_trace.clear()
    first = fleet.run("prod-us")
    assert web(first).reason == "WaitingForWave"
    assert git_trace.listings() == 1
    fetches = [args for args in git_trace.commands() if "fetch" in args]
    assert len(fetches) == 2  # the catalog's clone, and the status mirror
    refspecs = sorted(arg for args in fetches for arg in args if arg.startswith("+"))
    assert refspecs == [
        "+refs/heads/main:refs/reconciler/catalog",
        "+refs/heads/main:refs/remotes/origin/main",
        "+refs/heads/status/prod-eu:refs/remotes/origin/status/prod-eu",
    ]

    assert web(fleet.settle("staging")).version == "6.6.0"  # status/staging moves
    git_trace.clear()
    held = fleet.run("prod-us")
    assert web(held).reason == "WaitingForWave"
    assert git_trace.listings() == 1
    fetches = [args for args in git_trace.commands() if "fetch" in args]
    refspecs = sorted(arg for args in fetches for arg in args if arg.startswith("+"))
    assert refspecs == ["+refs/heads/status/staging:refs/remotes/origin/status/staging"]
    assert git_trace.count("log") == 0


def staging_card(pipelines: list[Pipeline]) -> tuple[str | None, str]:
    """The version and phase podinfo's pipeline shows for staging's web."""
    (pipeline,) = [p for p in pipelines if p.app == "podinfo"]
    (card,) = [c for wave in pipeline.waves for c in wave.cards if c.cluster == "staging"]
    return card.version, card.phase


@pytest.mark.parametrize("interval", [0.0, 3600.0])
def test_the_status_page_fetches_what_moved_at_most_once_per_poll_interval(
    fleet: Fleet, git_trace: GitTrace, interval: float
) -> None:
    """A pass that asks the gate nothing fetches no status branch, so ``/ui``'s pipelines
    fetch the moved ones themselves, when the last fetch is older than a poll interval:
    with ``interval: 0`` the page shows staging's newest record; within the interval it
    shows what was fetched last and runs no Git process."""
    base = fleet.daemon("prod-us").settings
    fleet.daemons["prod-us"] = Daemon(
        replace(base, interval=interval), fleet.world.client, clock=fleet.clock
    )
    fleet.release("6.6.0")
    assert web(fleet.run("prod-us")).reason == "WaitingForWave"  # fetched every branch
    assert staging_card(fleet.daemon("prod-us").wave_pipelines())[0] == "6.5.0"
    assert web(fleet.settle("staging")).version == "6.6.0"  # status/staging moves
    git_trace.clear()
    shown = staging_card(fleet.daemon("prod-us").wave_pipelines())
    if interval:
        assert shown[0] == "6.5.0"
        assert git_trace.commands() == []
    else:
        assert shown == ("6.6.0", "Ready")
        assert git_trace.listings() == 1
