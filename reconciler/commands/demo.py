"""``reconciler demo``: the whole story on the built-in example, in plain progress lines.

It sets up what a platform team has (a catalog repository with a remote, and a
cluster) on the local machine: the sandbox API server and a copy of
``catalog-repo-template/`` pushed to a bare repository. Then it runs the real
daemon's passes and tells what happens:

1. the first pass installs every instance of cluster ``prod`` and records one
   status commit per instance on ``status/prod``;
2. a pass with nothing new writes nothing and commits nothing;
3. a one-line commit moves channel ``stable`` of podinfo, and the next pass
   upgrades the instances that follow it;
4. a commit that breaks an instance file is recorded as ``CatalogInvalid``
   while the cluster keeps running the last good version, and the fix recovers;
5. moving ledger to 2.1.0 considers its migration hooks: the global one runs as a
   Job, the post one is skipped because the cluster is already in shape, and both
   land in the ledger (in the cluster and on the status branch);
6. a release that serves 8% errors is measured by a real Prometheus after its
   first batch and rolls back by itself, the commit saying why (``demo_analysis``;
   needs Debian's prometheus, which ``make demo`` installs when it can);
7. a rebuilt image (a CVE fix under a new long tag) is committed by the daemon's
   image scan and rolls out in batches (``demo_builds``; needs Debian's
   docker-registry, which ``make demo`` installs when it can);
7. waves: one release through three clusters (staging, prod-eu, prod-us), gated
   by their status branches; a bad one halts after staging (``demo_waves``);
8. it prints the status branch's ``git log`` and the commands to explore.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reconciler.analysis.local import Exporter, LocalPrometheus
from reconciler.commands.demo_analysis import demo_prometheus, metrics_chapter
from reconciler.commands.demo_builds import (
    NAMESPACE,
    demo_registry,
    image_build_chapter,
    pin_first_builds,
    point_catalog_at,
)
from reconciler.commands.demo_waves import FAIL_IMAGES as WAVES_FAIL_IMAGES
from reconciler.commands.demo_waves import wave_chapter
from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.kube import KubeClient
from reconciler.migrations import ledger_rows, ledger_table
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import UsageError
from reconciler.model.status import InstanceStatus, Phase
from reconciler.registry.local import LocalRegistry
from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.sandbox.timing import Timing
from reconciler.source.channels import set_channel
from reconciler.source.gates import change_gate
from reconciler.source.scaffold import IDENTITY, CatalogRepo, commit_file, log_oneline

CLUSTER = "prod"
# Slow enough to see pods roll. A deleted pod's 30 s grace period lasts 1.5 s: long
# enough for ``kubectl get pods -w`` to show old pods Terminating during a rollout,
# short enough that the story's "old pods gone" waits do not drag.
DEMO_TIMING = Timing(controller_delay=0.1, pod_start=0.3, pod_grace_scale=0.05)
BROKEN_INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: status-page
app: podinfo
version: ">=6.0.0 <7.0.0"
namespace: team-status
parameters: {replicas: 2
"""
# status-page tries the release candidate with a rollout that undoes itself on failure
CANDIDATE_INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: status-page
app: podinfo
version: 6.7.0-rc.1
allowPrerelease: true
namespace: team-status
parameters: {replicas: 2}
rollout: {batches: [1, 50%, 50%], onFailure: rollback}
"""


def example_catalog() -> Path:
    """The example catalog: in a source checkout, ``catalog-repo-template/`` beside the package."""
    here = Path(__file__).resolve().parent.parent.parent / "catalog-repo-template"
    if (here / "apps").is_dir():
        return here
    raise UsageError(
        "the example catalog (catalog-repo-template/) was not found next to the package; "
        "run the demo from a source checkout (make demo)"
    )


class Story:
    """Numbered progress lines, with the time since the demo started."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.step = 0

    def chapter(self, text: str) -> None:
        self.step += 1
        print(f"\n[{time.monotonic() - self.started:5.1f}s] {self.step}. {text}", flush=True)

    def line(self, text: str) -> None:
        print(f"         {text}", flush=True)


def demo_command(args: argparse.Namespace) -> int:
    example_catalog()  # a usage error before anything is created
    workdir = (
        Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="reconciler-demo-"))
    )
    if args.workdir:
        if workdir.exists() and any(workdir.iterdir()):
            raise UsageError(f"--workdir {workdir} is not empty; give a new or empty directory")
        workdir.mkdir(parents=True, exist_ok=True)
    for key, value in IDENTITY.items():  # the demo's own commits; no Git config needed
        os.environ.setdefault(key, value)
    story = Story()
    story.chapter(
        f"Starting a local Kubernetes API (reconciler sandbox) and a catalog in {workdir}"
    )
    with demo_logs(workdir / "demo.log", explicit=args.log_level is not None) as log_file:
        if log_file is not None:
            story.line(f"daemon log   {log_file}  (kept out of the story)")
        return _demo(args, story, workdir)


def _demo(args: argparse.Namespace, story: Story, workdir: Path) -> int:
    kubeconfig = workdir / "kubeconfig"
    timing = DEMO_TIMING
    with (
        running_sandbox(
            timing=timing,
            kubeconfig=kubeconfig,
            fail_images=("*:6.7.0-rc.1", *WAVES_FAIL_IMAGES),
        ) as sandbox,
        demo_registry(workdir / "registry", story.line) as registry,
        demo_prometheus(workdir / "prometheus", story.line) as prometheus,
    ):
        from reconciler.source.scaffold import create_catalog_repo

        prepare = (lambda copy: point_catalog_at(copy, registry)) if registry else None
        repo = create_catalog_repo(example_catalog(), workdir, prepare=prepare)
        story.line(f"API server   {sandbox.url}  (kubeconfig: {kubeconfig})")
        story.line(f"catalog      {repo.work}  (remote: {repo.url})")
        if registry is not None:
            pin_first_builds(repo, registry, story.line)
        ok = _tell(story, repo, workdir, sandbox, registry, prometheus)
        print(closing_hints(repo, workdir, kubeconfig, serve=args.serve), flush=True)
        if shutil.which("kubectl") is None:
            print("(kubectl is not installed here; any kubectl works with the kubeconfig above)")
        if args.serve:
            _serve_until_interrupted(story)
    return 0 if ok else 1


def _tell(
    story: Story,
    repo: CatalogRepo,
    workdir: Path,
    sandbox: SandboxHandle,
    registry: LocalRegistry | None,
    prometheus: tuple[LocalPrometheus, Exporter] | None = None,
) -> bool:
    settings = DaemonSettings(
        repo=repo.url,
        cluster=CLUSTER,
        health_timeout=30.0,
        # status-page's pods count as available only after minReadySeconds (3s): a
        # grace above that lets each chapter's change end in one Ready commit
        health_grace=5.0,
        cache_dir=workdir / "cache",
    )
    with KubeClient.connect(str(sandbox.kubeconfig)) as client:
        daemon = Daemon(settings, client)

        story.chapter(f"First pass of the daemon for cluster {CLUSTER}: install every instance")
        first = daemon.run_pass()
        _summarise(story, first)

        story.chapter("A pass with nothing new: no writes to the cluster, no status commits")
        sandbox.reset_request_log()
        quiet = daemon.run_pass()
        _summarise(story, quiet)
        requests = sandbox.request_log()
        writes = sum(1 for e in requests if e.method in ("POST", "PUT", "PATCH", "DELETE"))
        story.line(f"API requests of this pass: {len(requests)} ({writes} writes)")

        story.chapter("Release: move channel stable of podinfo to 6.6.0 with a one-line commit")
        story.line(f"web runs {_image(client, 'web', 'web')} on 5 replicas")
        move = set_channel(repo.work, "podinfo", "stable", "6.6.0", push=True)
        story.line(
            f"commit {move.commit[:12] if move.commit else '?'}: "
            f"podinfo: move channel stable {move.previous} -> {move.version} (pushed)"
        )
        story.line("web rolls in batches [1, 50%, 50%] with partition: 1 (a canary, then a gate)")
        rollout = ReadyPods("web", ":6.6.0")
        sandbox.observe(rollout.on_event)
        upgrade = _roll(story, daemon, "web")
        story.line(f"ready pods (new+old) so far: {rollout.describe()}")

        for _ in range(2):
            story.chapter(
                "Approve the next batch: reconciler rollout promote web (a one-line commit)"
            )
            gate = change_gate(
                repo.work, CLUSTER, "web", "promote", batches=3, target="6.6.0", push=True
            )
            story.line(f"commit {gate.commit[:12]}: {gate.before} -> {gate.after}")
            upgrade = _roll(story, daemon, "web")
        story.line(f"web now runs {_image(client, 'web', 'web')}")
        story.line(f"its pods rolled (ready new+old): {rollout.describe()}")

        story.chapter("A release candidate that crashes rolls back by itself")
        story.line(f"status-page runs {_image(client, 'team-status', 'status-page')}")
        commit_file(
            repo,
            "clusters/prod/instances/status-page.yaml",
            CANDIDATE_INSTANCE,
            "status-page: try 6.7.0-rc.1, roll back if it fails",
        )
        story.line("the sandbox crashes every container of an image *:6.7.0-rc.1 (--fail-image)")
        candidate = _roll(story, daemon, "status-page")
        story.line(f"status-page runs {_image(client, 'team-status', 'status-page')} again")

        story.chapter("A broken commit: status-page's file loses a closing brace")
        commit_file(
            repo,
            "clusters/prod/instances/status-page.yaml",
            BROKEN_INSTANCE,
            "status-page: try 2 replicas (oops)",
        )
        broken = daemon.run_pass()
        _summarise(story, broken)
        story.line(f"status-page keeps running {_image(client, 'team-status', 'status-page')}")

        story.chapter("The fix is one more commit")
        fixed_text = BROKEN_INSTANCE.replace("{replicas: 2\n", "{replicas: 2}\n")
        commit_file(
            repo,
            "clusters/prod/instances/status-page.yaml",
            fixed_text,
            "status-page: fix the YAML",
        )
        fixed = daemon.run_pass()
        _summarise(story, fixed)

        migrated = _migrations(story, repo, client, daemon)
        measured = None
        if prometheus is not None:
            measured = metrics_chapter(
                story.chapter,
                story.line,
                repo,
                prometheus,
                roll=lambda instance: _roll(story, daemon, instance),
            )
        rebuilt = None
        if registry is not None:
            rebuilt = image_build_chapter(
                story.chapter,
                story.line,
                repo,
                daemon,
                registry,
                workdir,
                roll=lambda instance: _roll(story, daemon, instance),
                image_of=lambda: _image(client, NAMESPACE, "shop"),
            )
        waves = wave_chapter(
            story.chapter,
            story.line,
            client,
            workdir / "waves",
            roll=lambda daemon, instance: _roll(story, daemon, instance),
        )

    story.chapter(f"What happened, as recorded on status/{CLUSTER} (git log --oneline)")
    for line in log_oneline(repo.remote, f"status/{CLUSTER}"):
        story.line(line)
    outcomes: tuple[PassOutcome, ...] = (first, quiet, upgrade, candidate, broken, fixed, migrated)
    ready = _final(fixed, "web") is Phase.READY and _final(migrated, "ledger") is Phase.READY
    if measured is not None:  # the bad release must have rolled back by itself
        outcomes += (measured,)
        status = _status_of(measured, "partner-api")
        ready = ready and status is not None and status.reason == "RolledBack"
    if rebuilt is not None:
        outcomes += (rebuilt,)
        ready = ready and _final(rebuilt, "shop") is Phase.READY
    return all(o.error is None for o in outcomes) and ready and waves.ok


def _roll(story: Story, daemon: Daemon, instance: str, limit: float = 120.0) -> PassOutcome:
    """Passes as the service schedules them (its next look) until ``instance`` settles.

    Settled: Ready, Stalled, Failed, or waiting for a promotion commit. Every status
    commit is printed as it is made: the rollout's story is its ``git log``.
    """
    deadline = time.monotonic() + limit
    while True:
        outcome = daemon.run_pass()
        for info in outcome.commits:
            story.line(f"  {info.commit[:7]} {info.subject}")
        report = outcome.report
        status = (
            next((s for s in report.statuses if s.instance == instance), None) if report else None
        )
        waiting = status is not None and status.reason == "WaitingForPromotion"
        if status is None or status.phase is not Phase.PROGRESSING or waiting:
            if status is not None:
                story.line(f"{instance}: {status.phase} ({status.reason}): {status.message}")
            return outcome
        if time.monotonic() > deadline:
            story.line(f"{instance} still rolling after {limit:g}s; the daemon would keep going")
            return outcome
        look = report.next_look if report is not None else None
        time.sleep(min(look if look is not None else 0.5, 0.5))


def _status_of(outcome: PassOutcome, instance: str) -> InstanceStatus | None:
    report = outcome.report
    if report is None:
        return None
    return next((s for s in report.statuses if s.instance == instance), None)


def _final(outcome: PassOutcome, instance: str) -> Phase | None:
    status = _status_of(outcome, instance)
    return status.phase if status is not None else None


class ReadyPods:
    """Ready pods running the new version and the old one, at each change.

    Read from the sandbox's writes as they happen (ReplicaSets of the Deployment and of
    the rollout's copy), so the demo shows the batches move, not just their end.
    """

    def __init__(self, namespace: str, new_tag: str) -> None:
        self.namespace = namespace
        self.new_tag = new_tag
        self.ready: dict[str, tuple[bool, int]] = {}  # ReplicaSet -> (runs new, ready pods)
        self.steps: list[tuple[int, int]] = []

    def on_event(self, event: StoredEvent) -> None:
        if event.resource != ("apps", "replicasets") or event.namespace != self.namespace:
            return
        name = event.obj["metadata"]["name"]
        if event.type == "DELETED":
            self.ready.pop(name, None)
        else:
            containers = event.obj["spec"]["template"]["spec"].get("containers") or []
            new = any(str(c.get("image", "")).endswith(self.new_tag) for c in containers)
            ready = int((event.obj.get("status") or {}).get("readyReplicas") or 0)
            self.ready[name] = (new, ready)
        step = (
            sum(n for new, n in self.ready.values() if new),
            sum(n for new, n in self.ready.values() if not new),
        )
        if step != (0, 0) and (not self.steps or self.steps[-1] != step):
            self.steps.append(step)

    def describe(self) -> str:
        return " -> ".join(f"{new}+{old}" for new, old in self.steps) or "no change"


def _migrations(story: Story, repo: CatalogRepo, client: KubeClient, daemon: Daemon) -> PassOutcome:
    """Chapter: migration hooks run once, decided by the cluster's state."""
    story.chapter("Migration hooks: move channel stable of ledger to 2.1.0")
    story.line("2.1.0 ships register-event-schemas (global, pre: a Job) and")
    story.line(
        "backfill-order-totals (post), needed while ConfigMap ledger-order-totals is missing;"
    )
    story.line("this cluster's totals were backfilled by hand last year, so it exists:")
    meta = {"name": "ledger-order-totals", "namespace": "ledger"}
    client.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"done": "1"}})
    move = set_channel(repo.work, "ledger", "stable", "2.1.0", push=True)
    story.line(f"commit {move.commit[:12] if move.commit else '?'}: ledger: stable -> 2.1.0")
    _roll(story, daemon, "ledger")  # 2.1.0 plans batches: pre migrations, then the batches
    outcome = daemon.run_pass()  # post migrations once the new version is healthy
    _summarise(story, outcome)
    status = daemon.ledger.read().get("ledger")
    rows, _ = ledger_rows("ledger", status.migrations if status is not None else None)
    story.line("the ledger of instance ledger (reconciler migrations --cluster prod ledger):")
    for line in ledger_table(rows).splitlines():
        story.line(f"  {line}")
    story.line("the next upgrade never runs these again, whatever version ships them")
    return outcome


def _summarise(story: Story, outcome: PassOutcome) -> None:
    report = outcome.report
    if report is None:
        story.line(f"pass failed: {outcome.error}")
        return
    phases = ", ".join(f"{n} {p}" for p, n in report.phase_counts().items() if n)
    story.line(f"catalog commit {report.commit[:12]}: {len(report.statuses)} instances ({phases})")
    story.line(f"objects: {report.changes.summary()}")
    for status in report.statuses:
        if status.phase.value != "Ready":
            story.line(f"{status.instance}: {status.phase} ({status.reason}): {status.message}")
    if outcome.commits:
        story.line(f"{len(outcome.commits)} status commit(s):")
        for info in outcome.commits:
            story.line(f"  {info.commit[:7]} {info.subject}")
    else:
        story.line("no status commits: nothing changed")


def _image(client: KubeClient, namespace: str, name: str) -> str:
    obj: dict[str, Any] | None = client.get(ObjectRef("apps/v1", "Deployment", namespace, name))
    if obj is None:
        return "nothing (not found)"
    containers = obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return ", ".join(str(c.get("image")) for c in containers) or "no containers"


def closing_hints(
    repo: CatalogRepo, workdir: Path, kubeconfig: Path, *, serve: bool, program: str | None = None
) -> str:
    """What to try next, spelled so it runs as printed (``program``: see ``command_name``)."""
    rc = program or command_name()
    hints = f"""
Explore what the demo left behind in {workdir}:
  {rc} status  --repo {repo.url} --cluster {CLUSTER}
  {rc} history --repo {repo.url} --cluster {CLUSTER} web
  {rc} migrations --repo {repo.url} --cluster {CLUSTER}
  git -C {repo.remote} log status/{CLUSTER} --format='%h %s%n%b' -3
  git -C {repo.work} log --oneline
  {rc} resolve --repo {repo.work} --cluster {CLUSTER} --explain
"""
    if serve:
        hints += f"""The sandbox keeps serving below; in another terminal:
  kubectl --kubeconfig {kubeconfig} get deploy,sts,svc,cm -A
"""
    else:
        hints += f"""The cluster lived in memory; to look at it with kubectl, run the demo again:
  {rc} demo --serve      # then, in another terminal:
  kubectl --kubeconfig {kubeconfig} get deploy,sts,svc,cm -A
"""
    if rc != "reconciler":
        hints += f"({rc} is this reconciler; `source .venv/bin/activate` puts it on PATH)\n"
    return hints + f"Clean up with: rm -rf {workdir}"


def command_name(argv0: str | None = None, path_lookup: str | None = None) -> str:
    """How a person runs this reconciler again: ``reconciler`` if that is on PATH, else its path.

    ``make demo`` runs ``.venv/bin/reconciler``, which is not on PATH until the venv
    is activated: a hint saying bare ``reconciler`` would fail as printed.
    """
    script = Path(argv0 if argv0 is not None else sys.argv[0])
    found = path_lookup if path_lookup is not None else shutil.which("reconciler")
    if script.name != "reconciler":  # python -m reconciler
        beside = Path(sys.executable).parent / "reconciler"
        if not beside.is_file():
            return f"{_shown(Path(sys.executable))} -m reconciler"
        script = beside
    if found and Path(found).absolute() == script.absolute():
        return "reconciler"
    return _shown(script)


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is below it (``.venv/bin/...``)."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


@contextmanager
def demo_logs(path: Path, *, explicit: bool) -> Iterator[Path | None]:
    """The daemon's log lines go to ``path`` while the story prints, not between its lines.

    The story already says what each pass did; a Stalled instance's warning in the
    middle of it reads like the demo failing. ``--log-level`` given: the person asked
    for the lines where they are (stderr), so nothing is moved.
    """
    if explicit:
        yield None
        return
    root = logging.getLogger()
    previous, level = root.handlers[:], root.level
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(previous[0].formatter if previous else logging.Formatter())
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    try:
        yield path
    finally:
        root.handlers[:] = previous
        root.setLevel(level)
        handler.close()


def _serve_until_interrupted(story: Story) -> None:
    story.chapter("Serving the sandbox for kubectl; press Ctrl-C to stop")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
