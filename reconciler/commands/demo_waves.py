"""The demo's waves chapter: one release through three clusters, gated by Git alone.

Three clusters of one catalog, each with its own daemon, on the demo's sandbox (a
namespace per cluster): ``staging`` (wave canary), ``prod-eu`` (wave eu, approval
required) and ``prod-us`` (wave rest, soak 20 s here; an hour in a real fleet). The
catalog is the chapter's own (``fleet_catalog``), so ``waves.yaml`` never holds the
main story's cluster.

1. a good release (channel stable of podinfo to 6.6.0) runs on staging; prod-eu
   waits for its approval commit (``wave approve``), then runs it; prod-us waits for
   eu's soak, then runs it; each step a status commit;
2. a bad release (6.7.0, whose image crashes: the sandbox's ``--fail-image``) fails
   on staging; prod-eu and prod-us halt (``WaveHalted``) and keep running 6.6.0;
3. it shows ``wave status`` and ``git log --format='%h %s' status/prod-us``.

``demo.py`` calls ``wave_chapter`` with its progress printers and its ``_roll``
(passes until an instance settles), like the image-build chapter.
"""

from __future__ import annotations

import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.commands.waves import board_text, read_board
from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source.approvals import approve_wave
from reconciler.source.channels import set_channel
from reconciler.source.scaffold import CatalogRepo, create_catalog_repo, log_oneline
from reconciler.waves import WAITING_FOR_WAVE, WAVE_HALTED, BoardWave, Waiting

APP = "podinfo"
INSTANCE = "web"
GOOD, BAD = "6.6.0", "6.7.0"
SOAK_SECONDS = 20
# (cluster, wave); the waves are in this order
CLUSTERS = (("staging", "canary"), ("prod-eu", "eu"), ("prod-us", "rest"))
IMAGE = "ghcr.io/stefanprodan/podinfo"
# the bad release's image crashes on start; demo.py passes this to its sandbox
FAIL_IMAGES = (f"{IMAGE}:{BAD}",)
SOAK_LOOKS = 5  # passes that show the soak going on, spread over it

Roll = Callable[[Daemon, str], PassOutcome]
Say = Callable[[str], None]

WAVES_YAML = """\
apiVersion: reconciler/v1
kind: Waves
waves:
  - name: canary
    clusters: [staging]
  - name: eu
    clusters: [{{matchLabels: {{region: eu}}}}]
    approval: required
  - name: rest
    clusters: ["*"]
    soak: {soak}s        # an hour in a real fleet
"""


def fleet_catalog(root: Path, soak: int = SOAK_SECONDS) -> None:
    """Write the chapter's catalog under ``root``: podinfo 6.5.0-6.7.0, three clusters."""
    files = {
        "waves.yaml": WAVES_YAML.format(soak=soak),
        f"apps/{APP}/app.yaml": f"""\
            apiVersion: reconciler/v1
            kind: App
            name: {APP}
            description: Demo web service
            owners: [web-team@example.com]
            """,
        f"apps/{APP}/channels.yaml": _channels("6.5.0"),
    }
    for version in ("6.5.0", GOOD, BAD):
        base = f"apps/{APP}/versions/{version}"
        files[f"{base}/version.yaml"] = f"""\
            apiVersion: reconciler/v1
            kind: AppVersion
            app: {APP}
            version: {version}
            images:
              podinfo: {IMAGE}:{version}
            parameters:
              replicas: {{default: 1}}
            """
        files[(Path(base) / "manifests" / "deployment.yaml").as_posix()] = """\
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: ${instance.name}
            spec:
              replicas: ${params.replicas}
              selector:
                matchLabels:
                  app.kubernetes.io/instance: ${instance.name}
              template:
                metadata:
                  labels:
                    app.kubernetes.io/instance: ${instance.name}
                spec:
                  containers:
                    - name: podinfo
                      image: ${images.podinfo}
            """
    for cluster, _wave in CLUSTERS:
        region = "eu" if cluster.endswith("-eu") else "us"
        files[f"clusters/{cluster}/cluster.yaml"] = f"""\
            apiVersion: reconciler/v1
            kind: Cluster
            name: {cluster}
            labels: {{region: {region}}}
            allowedNamespaces: [{namespace(cluster)}]
            """
        files[f"clusters/{cluster}/instances/{INSTANCE}.yaml"] = f"""\
            apiVersion: reconciler/v1
            kind: Instance
            name: {INSTANCE}
            app: {APP}
            channel: stable
            namespace: {namespace(cluster)}
            """
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def namespace(cluster: str) -> str:
    return f"{INSTANCE}-{cluster}"


def _channels(version: str) -> str:
    return (
        f"apiVersion: reconciler/v1\nkind: Channels\napp: {APP}\nchannels:\n  stable: {version}\n"
    )


@dataclass(frozen=True)
class WaveStory:
    """What the chapter saw: each cluster's ``web`` after each release, the board, the log."""

    good: dict[str, InstanceStatus | None]
    bad: dict[str, InstanceStatus | None]
    board: list[BoardWave]
    log: list[str]

    @property
    def ok(self) -> bool:
        """The story the chapter tells happened: 6.6.0 everywhere, then 6.7.0 halted."""
        good = all(
            s is not None and (s.phase, s.version) == (Phase.READY, GOOD)
            for s in self.good.values()
        )
        staging = self.bad.get("staging")
        failed = staging is not None and staging.phase in (Phase.FAILED, Phase.STALLED)
        halted = all(
            s is not None and (s.reason, s.version) == (WAVE_HALTED, GOOD)
            for c, s in self.bad.items()
            if c != "staging"
        )
        gates = [w.state for w in self.board] == ["open", "halted", "halted"]
        return good and failed and halted and gates


class _Fleet:
    """The chapter's repository and one daemon per cluster, all on one sandbox."""

    def __init__(self, repo: CatalogRepo, client: KubeClient, workdir: Path, say: Say) -> None:
        self.repo = repo
        self.client = client
        self.say = say
        self.daemons = {
            cluster: Daemon(
                DaemonSettings(
                    repo=repo.url,
                    cluster=cluster,
                    health_timeout=5.0,  # the bad release's pods never get ready
                    cache_dir=workdir / f"cache-{cluster}",
                ),
                client,
            )
            for cluster, _wave in CLUSTERS
        }

    def look(self, cluster: str) -> InstanceStatus | None:
        """One pass of ``cluster``'s daemon; its commits and the gate's word are said."""
        return web_of(self.looked(cluster))

    def looked(self, cluster: str) -> PassOutcome:
        """``look``, answering the whole pass (the gate's holds with their soak left)."""
        outcome = self.daemons[cluster].run_pass()
        for info in outcome.commits:
            self.say(f"  {info.commit[:7]} {info.subject}")
        status = web_of(outcome)
        if status is not None and status.reason in (WAITING_FOR_WAVE, WAVE_HALTED):
            self.say(f"{cluster}/{INSTANCE}: {status.phase} ({status.reason}): {status.message}")
        elif outcome.error is not None:
            self.say(f"{cluster}: pass failed: {outcome.error}")
        return outcome

    def image(self, cluster: str) -> str:
        obj = self.client.get(ObjectRef("apps/v1", "Deployment", namespace(cluster), INSTANCE))
        spec = (obj or {}).get("spec", {}).get("template", {}).get("spec", {})
        return ", ".join(str(c.get("image")) for c in spec.get("containers", [])) or "nothing"


def web_of(outcome: PassOutcome) -> InstanceStatus | None:
    report = outcome.report
    if report is None:
        return None
    return next((s for s in report.statuses if s.instance == INSTANCE), None)


def wave_chapter(
    chapter: Say,
    say: Say,
    client: KubeClient,
    workdir: Path,
    roll: Roll,
    *,
    soak: int = SOAK_SECONDS,
) -> WaveStory:
    """Tell the chapter; ``roll(daemon, instance)`` runs passes until the instance settles.

    ``soak`` (seconds) is wave rest's; the soak is real: measured from the times of
    the status commits, as in any fleet.
    """
    chapter("Waves: one release through three clusters, gated by their status branches")
    with tempfile.TemporaryDirectory(prefix="reconciler-demo-waves-") as source:
        fleet_catalog(Path(source), soak)
        repo = create_catalog_repo(Path(source), workdir)
    say(f"catalog      {repo.work}  (its own, with waves.yaml; remote {repo.url})")
    say(
        f"waves        canary: staging; eu: prod-eu (approval required); rest: prod-us "
        f"(soak {soak}s)"
    )
    fleet = _Fleet(repo, client, workdir, say)
    for cluster, _wave in CLUSTERS:  # a first install is never held
        roll(fleet.daemons[cluster], INSTANCE)
    good = _good_release(chapter, say, fleet, roll, soak)
    bad = _bad_release(chapter, say, fleet, roll)

    chapter(f"Where the release stands: reconciler wave status {APP} --repo {repo.url}")
    board = read_board(repo.url, APP, None)
    for text in board_text(board).splitlines():
        say(text)
    say("git log --format='%h %s' status/prod-us:")
    log = log_oneline(repo.remote, "status/prod-us")
    for text in log:
        say(f"  {text}")
    for daemon in fleet.daemons.values():
        daemon.flush_events()
    return WaveStory(good, bad, board, log)


def _good_release(
    chapter: Say, say: Say, fleet: _Fleet, roll: Roll, soak: int
) -> dict[str, InstanceStatus | None]:
    chapter(f"A good release: move channel stable of {APP} to {GOOD}; staging (canary) first")
    _move(say, fleet.repo, GOOD)
    for cluster in ("prod-eu", "prod-us"):
        fleet.look(cluster)
    roll(fleet.daemons["staging"], INSTANCE)
    fleet.look("prod-eu")

    chapter(f"Approve wave eu for {GOOD}: reconciler wave approve {APP} {GOOD} --wave eu --push")
    done = approve_wave(fleet.repo.work, APP, GOOD, "eu", push=True)
    say(f"commit {(done.commit or '?')[:12]}: {done.file}: approvals += {APP} {GOOD} eu")
    roll(fleet.daemons["prod-eu"], INSTANCE)

    chapter(
        f"prod-us (wave rest) waits until prod-eu has been Ready on {GOOD} for "
        f"{soak}s, by the times of its status commits"
    )
    _soak(say, fleet, "prod-us", soak)
    roll(fleet.daemons["prod-us"], INSTANCE)
    return {c: fleet.look(c) for c, _wave in CLUSTERS}


def _soak(say: Say, fleet: _Fleet, cluster: str, soak: int) -> None:
    """A pass every few seconds until the gate opens; the first one records the wait.

    A look never comes later than the soak's end as the last pass's gate counted it
    (``Waiting.remaining``): the release goes on when the soak is over, not up to a
    look's spacing after. Bounded: a soak not over after four times its length ends
    the chapter's wait (the story then says so and the demo fails), never a hang.
    """
    limit = soak * 4
    deadline = time.monotonic() + limit
    outcome = fleet.looked(cluster)
    while time.monotonic() < deadline:
        time.sleep(min(soak / SOAK_LOOKS, _soak_left(outcome)))
        outcome = fleet.daemons[cluster].run_pass()
        holds = outcome.report.waves if outcome.report is not None else ()
        waiting = [h.decision.message for h in holds if h.instance == INSTANCE]
        for info in outcome.commits:
            say(f"  {info.commit[:7]} {info.subject}")
        if not waiting or outcome.commits:
            return  # the gate opened: the pass started the version
        say(f"gate now: {waiting[0]} (no commit: the same wait)")
    say(f"{cluster}: still waiting after {limit}s; the daemon would keep looking")


def _soak_left(outcome: PassOutcome) -> float:
    """Seconds of soak the pass's gate still counted for ``web`` (inf: it named none)."""
    holds = outcome.report.waves if outcome.report is not None else ()
    left = [
        h.decision.remaining
        for h in holds
        if h.instance == INSTANCE
        and isinstance(h.decision, Waiting)
        and h.decision.remaining is not None
    ]
    return max(min(left), 0.0) if left else float("inf")


def _bad_release(
    chapter: Say, say: Say, fleet: _Fleet, roll: Roll
) -> dict[str, InstanceStatus | None]:
    chapter(f"A bad release: {BAD} crashes on start (the sandbox crashes image {FAIL_IMAGES[0]})")
    _move(say, fleet.repo, BAD)
    roll(fleet.daemons["staging"], INSTANCE)
    approve_wave(fleet.repo.work, APP, BAD, "eu", push=True)
    say(f"even with wave eu approved for {BAD}, the later waves halt:")
    bad = {c: fleet.look(c) for c, _wave in CLUSTERS}
    for cluster, _wave in CLUSTERS:
        say(f"{cluster} runs {fleet.image(cluster)}")
    return bad


def _move(say: Say, repo: CatalogRepo, version: str) -> None:
    move = set_channel(repo.work, APP, "stable", version, push=True)
    say(
        f"commit {(move.commit or '?')[:12]}: {APP}: move channel stable "
        f"{move.previous} -> {move.version} (pushed)"
    )
