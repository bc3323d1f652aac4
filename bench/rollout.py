"""Benchmark: 200 batch rollouts at once under the running daemon, and a promotion's latency.

Every instance has 5 replicas and the plan ``batches: [1, 50%, 50%]`` (1, 3, 5 pods on
the new version); the sandbox makes each new pod Ready 1 s after it starts
(``--ready-delay '*=1'``). Both worlds run the daemon as it runs in production
(``Service``: webhook, next look scheduled from ``PassReport.next_look``), each
against its own sandbox process with the same settings:

  * **baseline**: one instance rolling alone; the time from the commit that moves
    its channel to its ``rolloutSucceed`` status commit;
  * **200 at once**: one commit moves the channel of 200 instances; the time until
    the last of them has its ``rolloutSucceed`` commit. Goal: within 1.5x of the
    baseline (the rollouts move in parallel, not one after another). Printed
    beside it: the slowest single rollout of the run (its ``started`` commit to its
    ``succeeded`` commit), the passes, the daemon's CPU, and the API requests
    (sandbox request log) and status commits per rollout, against the baseline's;
  * **promotion latency**: one more instance in the big world has ``partition: 1``;
    once it waits for promotion, the 200 are done and their copies are gone,
    ``reconciler rollout promote`` (the one-line commit) and a webhook; the time
    until its next batch starts (the Deployment scaled to that batch's replicas).
    Goal: under 1 s plus the fetch, printed beside it. Twice: batch 2 (partition
    raised), batch 3 (partition removed).

Run: ``.venv/bin/python bench/rollout.py [--instances 200] [--namespaces 10] [--verbose]``
(``--verbose``: one line per daemon pass). At 200 instances it takes about 2 minutes on
the 2-core machine (a pass over the 200 rollouts takes about 1.4 s, the one creating
their copies about 3 s; the README's benchmark table has the figures, which depend on
what else the machine runs: compare ratios within one run); ``--instances 20`` takes
about a minute.
"""

# ruff: noqa: E402  (imports must follow the sys.path guard below)
from __future__ import annotations

import sys
from pathlib import Path

# bench/git.py would shadow GitPython's ``git`` package: this folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import argparse
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from benchkit import (
    SECRET,
    GitCounter,
    create_own_namespace,
    figure,
    fmt,
    request_log,
    sandbox_process,
    send_webhook,
    wait_for,
)

from reconciler.daemon.loop import Checkout, Daemon, DaemonSettings, PassOutcome
from reconciler.daemon.service import Service
from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.model.rollout import RollingState, RolloutRecord
from reconciler.source.gates import change_gate
from reconciler.source.scaffold import IDENTITY, CatalogRepo, commit_file, create_catalog_repo

CLUSTER = "bench"
REPLICAS = 5
READY_DELAY = 1.0
MAX_LOOK = DaemonSettings.max_look
SETTLE_PASSES = 100  # passes after the install until every instance is Ready
SANDBOX = (
    "--controller-delay",
    "0.05",
    "--ready-delay",
    f"*={READY_DELAY:g}",
    "--nodes",
    "20",  # 110 pods each, as on a real node: room for 200 x (5 + 5) pods
    "--pod-grace-scale",
    "0.01",  # a deleted pod lingers 0.3 s, not the real 30 s
)
APP = "apiVersion: reconciler/v1\nkind: App\nname: web\n"
CHANNELS = "apiVersion: reconciler/v1\nkind: Channels\napp: web\nchannels:\n  stable: {v}\n"
VERSION = """\
apiVersion: reconciler/v1
kind: AppVersion
app: web
version: {v}
images: {{web: "registry.example.com/web:{v}"}}
parameters: {{replicas: {{default: 2}}}}
"""
MANIFESTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: "${instance.name}"}
data: {version: "${app.version}"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: "${instance.name}"}
spec:
  replicas: ${params.replicas}
  selector: {matchLabels: {app: "${instance.name}"}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 25%}}
  template:
    metadata: {labels: {app: "${instance.name}"}}
    spec:
      containers: [{name: web, image: "${images.web}"}]
"""
INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: {name}
app: web
channel: stable
namespace: {ns}
parameters: {{replicas: {replicas}}}
rollout:
  batches: [1, 50%, 50%]
{extra}"""
GATE = "gate"  # the instance whose promotions are timed
STEPS = 3  # batch steps of a rollout: [1, 50%, 50%]


def resource_of(path: str) -> str:
    """The resource a request's path names: ``/apis/apps/v1/namespaces/a/deployments/b``
    -> ``deployments``; a status subresource stays visible (``deployments/status``)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if "namespaces" in parts:
        at = parts.index("namespaces")
        rest = parts[at + 2 :] if len(parts) > at + 2 else ["namespaces"]
    else:
        rest = parts[3:] if parts[:1] == ["apis"] else parts[2:]
    if not rest:
        return "discovery"
    return rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


def generate(root: Path, instances: int, namespaces: int, gate: bool) -> None:
    files = {"apps/web/app.yaml": APP, "apps/web/channels.yaml": CHANNELS.format(v="1.0.0")}
    for v in ("1.0.0", "1.1.0"):
        files[f"apps/web/versions/{v}/version.yaml"] = VERSION.format(v=v)
        files[f"apps/web/versions/{v}/manifests/app.yaml"] = MANIFESTS
    for i in range(instances):
        name = f"web{i:04d}"
        files[f"clusters/{CLUSTER}/instances/{name}.yaml"] = INSTANCE.format(
            name=name, ns=f"ns{i % namespaces}", replicas=REPLICAS, extra=""
        )
    if gate:
        files[f"clusters/{CLUSTER}/instances/{GATE}.yaml"] = INSTANCE.format(
            name=GATE, ns=GATE, replicas=REPLICAS, extra="  partition: 1\n"
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@dataclass
class Recorder:
    """What the service's passes did, seen from inside the process (no extra requests).

    Times are ``perf_counter`` at the end of the pass, i.e. once its status commits
    are pushed: a rollout has "succeeded" when its ``rolloutSucceed`` record is in Git.
    """

    started: dict[str, float] = field(default_factory=dict)
    succeeded: dict[str, float] = field(default_factory=dict)
    latest: dict[str, RolloutRecord] = field(default_factory=dict)
    commits: Counter[str] = field(default_factory=Counter)
    passes: list[tuple[float, float, float]] = field(default_factory=list)  # start, end, fetch
    lock: threading.Lock = field(default_factory=threading.Lock)
    verbose: bool = False
    _fetch: float = 0.0
    _origin: float = field(default_factory=time.perf_counter)

    def attach(self, daemon: Daemon) -> None:
        run_pass, sync = daemon.run_pass, daemon.sync

        def timed_sync() -> tuple[Checkout, bool]:
            start = time.perf_counter()
            try:
                return sync()
            finally:
                self._fetch = time.perf_counter() - start

        def recorded_pass() -> PassOutcome:
            start = time.perf_counter()
            outcome = run_pass()
            self.seen(outcome, start, time.perf_counter())
            return outcome

        daemon.sync = timed_sync  # type: ignore[method-assign]
        daemon.run_pass = recorded_pass  # type: ignore[method-assign]

    def seen(self, outcome: PassOutcome, start: float, end: float) -> None:
        with self.lock:
            self.passes.append((start, end, self._fetch))
            self.commits.update(c.instance for c in outcome.commits)
            rolling = 0
            for status in outcome.report.statuses if outcome.report else ():
                rollout = status.rollout
                if rollout is None:
                    continue
                self.latest[status.instance] = rollout
                if rollout.state is RollingState.SUCCEEDED:
                    self.succeeded.setdefault(status.instance, end)
                elif not rollout.state.terminal:
                    self.started.setdefault(status.instance, end)
                    rolling += 1
            if self.verbose:
                print(
                    f"    pass at {start - self._origin:7.2f} s: {end - start:5.2f} s "
                    f"(fetch {self._fetch:.2f} s), {len(outcome.commits)} status commits, "
                    f"{rolling} rolling, {len(self.succeeded)} succeeded",
                    flush=True,
                )

    def reset(self) -> None:
        with self.lock:
            self.started.clear()
            self.succeeded.clear()
            self.commits.clear()
            self.passes.clear()
            self._origin = time.perf_counter()


@dataclass
class World:
    repo: CatalogRepo
    url: str
    client: KubeClient
    daemon: Daemon
    service: Service
    recorder: Recorder
    gits: GitCounter

    def push(self, rel: str, text: str, message: str) -> None:
        commit_file(self.repo, rel, text, message)
        send_webhook(self.service.http_port)


@contextmanager
def world(
    work: Path, instances: int, namespaces: int, gate: bool, gits: GitCounter, verbose: bool
) -> Iterator[World]:
    """A catalog, its own sandbox process, the daemon's first pass (install), then its service."""
    generate(work / "template", instances, namespaces, gate)
    repo = create_catalog_repo(work / "template", work / "repos")
    with (
        sandbox_process(work / "sandbox", *SANDBOX) as (url, kubeconfig),
        KubeClient.connect(str(kubeconfig)) as client,
    ):
        settings = DaemonSettings(
            repo=repo.url,
            cluster=CLUSTER,
            health_timeout=120.0,
            cache_dir=work / "cache",
            interval=600.0,  # every pass below comes from a webhook or a rollout's next look
            jitter=0.0,
            drift_interval=3600.0,
            metrics_address="127.0.0.1:0",
            webhook_secret=SECRET,
            max_look=MAX_LOOK,
        )
        daemon = Daemon(settings, client)
        started = time.perf_counter()
        first = daemon.run_pass()
        print(
            f"  install of {instances + gate} instances: {time.perf_counter() - started:.2f} s",
            flush=True,
        )
        # each pass polls health for a grace of 2 s: on a busy machine the install's
        # pods may still be starting when it ends; the next passes see them Ready
        for _ in range(SETTLE_PASSES):
            if first.ok or first.error:
                break
            time.sleep(0.2)
            first = daemon.run_pass()
        assert first.ok, first.error or "the install passes left instances not ready"
        recorder = Recorder(verbose=verbose)
        recorder.attach(daemon)
        create_own_namespace(client, settings.leader_namespace)
        service = Service(daemon, install_signals=False)
        thread = threading.Thread(target=service.run, daemon=True)
        thread.start()
        wait_for(lambda: service.http_port != 0 and bool(recorder.passes), what="the service")
        try:
            yield World(repo, url, client, daemon, service, recorder, gits)
        finally:
            service.shutdown("benchmark done")
            thread.join(timeout=120)


@dataclass
class Phase:
    """One timed stretch: wall time, the daemon's CPU, requests, git commands, passes."""

    wall: float
    cpu: float
    requests: Counter[str]
    truncated: bool
    git: int
    passes: list[tuple[float, float, float]]
    commits: Counter[str]
    # requests by verb and resource ("get deployments"), to see what a step reads
    resources: Counter[str] = field(default_factory=Counter)

    def line(self, rollouts: int) -> str:
        total = sum(self.requests.values())
        steps = rollouts * STEPS
        by_resource = self.resources.items()
        longest = max((end - start for start, end, _ in self.passes), default=0.0)
        commits = sum(self.commits.values())
        note = " (request log full: counts are a lower bound)" if self.truncated else ""
        mean = sum(end - start for start, end, _ in self.passes) / max(1, len(self.passes))
        per_look = total / max(1, rollouts * len(self.passes))
        return (
            f"    {len(self.passes)} passes (mean {mean:.2f} s, longest {longest:.2f} s), "
            f"daemon CPU {self.cpu:.2f} s, {self.git} git commands, "
            f"{per_look:.1f} API requests per instance per pass\n"
            f"    per rollout: {total / rollouts:.1f} API requests "
            f"({fmt(Counter({k: round(v / rollouts, 1) for k, v in self.requests.items()}))})"
            f"{note}, {commits / rollouts:.1f} status commits\n"
            f"    per batch step ({STEPS} per rollout): {self.per_step(rollouts):.1f} API "
            f"requests ({fmt(Counter({k: round(v / steps, 2) for k, v in by_resource}))})"
        )

    def per_rollout(self, rollouts: int) -> float:
        return sum(self.requests.values()) / rollouts

    def per_step(self, rollouts: int) -> float:
        return self.per_rollout(rollouts) / STEPS


def roll(w: World, names: list[str], timeout: float) -> tuple[Phase, float]:
    """Move the channel to 1.1.0 (commit + webhook); wait until ``names`` all succeeded."""
    request_log(w.url, reset=True)
    w.recorder.reset()
    git_before, cpu = w.gits.count, time.process_time()
    start = time.perf_counter()
    w.push("apps/web/channels.yaml", CHANNELS.format(v="1.1.0"), "web: stable 1.1.0")

    def done() -> bool:
        with w.recorder.lock:
            return all(n in w.recorder.succeeded for n in names)

    wait_for(done, timeout=timeout, what="every rollout to succeed")
    with w.recorder.lock:
        last = max(w.recorder.succeeded[n] for n in names)
        slowest = max(w.recorder.succeeded[n] - w.recorder.started.get(n, start) for n in names)
        passes = [p for p in w.recorder.passes if p[1] <= last]
        commits = Counter({n: c for n, c in w.recorder.commits.items() if n in names})
    log = request_log(w.url, reset=True)
    phase = Phase(
        wall=last - start,
        cpu=time.process_time() - cpu,
        requests=Counter(str(e.get("verb")) for e in log),
        resources=Counter(f"{e.get('verb')} {resource_of(str(e.get('path')))}" for e in log),
        truncated=len(log) >= 100_000,
        git=w.gits.count - git_before,
        passes=passes,
        commits=commits,
    )
    return phase, slowest


def gate_waits(w: World, batch: int) -> bool:
    with w.recorder.lock:
        record = w.recorder.latest.get(GATE)
    return record is not None and record.state is RollingState.WAITING and record.batch == batch


def idle_after() -> float:
    """Seconds without a pass after which none is due: the service looks again at most
    ``--max-look`` after a pass while anything is in flight, so four of those (at least
    0.5 s for a busy machine's late look, at most the 2 s of a default run) with none
    mean it waits for a commit. A smoke run's ``--max-look 0.1`` waits 0.5 s, not 2."""
    return min(2.0, max(4 * MAX_LOOK, 0.5))


def promote(w: World, batch: int) -> tuple[float, float, int]:
    """``reconciler rollout promote gate`` + webhook once the daemon is idle and the
    other rollouts' cleanup is over (a settled cluster): seconds until
    batch ``batch`` starts, the fetch time of the first pass, and the passes it took."""
    ref = ObjectRef("apps/v1", "Deployment", GATE, GATE)
    want = {2: 3, 3: REPLICAS}[batch]

    def idle() -> bool:  # no pass for a while: the service waits for a commit
        with w.recorder.lock:
            return time.perf_counter() - w.recorder.passes[-1][1] > idle_after()

    def quiet() -> bool:  # the finished rollouts' copies and their pods are gone
        copies = [
            d
            for d in w.client.list("apps/v1", "Deployment")
            if d["metadata"]["name"].startswith("reconciler-rollout-")
            and d["metadata"].get("namespace") != GATE
        ]
        pods = w.client.list("v1", "Pod")
        return not copies and not any(p["metadata"].get("deletionTimestamp") for p in pods)

    wait_for(quiet, timeout=300, what="the sandbox to finish the rollouts' cleanup")
    wait_for(idle, timeout=120, what="the daemon to be idle")
    start = time.perf_counter()
    change_gate(w.repo.work, CLUSTER, GATE, "promote", batches=3, target="1.1.0", push=True)
    send_webhook(w.service.http_port)

    def scaled() -> bool:
        obj = w.client.get(ref)
        return obj is not None and int(obj["spec"].get("replicas", 0)) >= want

    wait_for(scaled, timeout=60, what=f"batch {batch} of {GATE} to start")
    latency = time.perf_counter() - start
    with w.recorder.lock:
        after = [(s, e, f) for s, e, f in w.recorder.passes if s >= start and s <= start + latency]
    fetch = after[0][2] if after else 0.0
    return latency, fetch, len(after)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument(
        "--namespaces", type=int, default=10, help="namespaces the instances share (round robin)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per phase")
    parser.add_argument("--verbose", action="store_true", help="one line per daemon pass")
    parser.add_argument(
        "--ready-delay",
        type=float,
        default=READY_DELAY,
        help="seconds until a new pod is Ready (the figures use 1; a smoke run less)",
    )
    parser.add_argument(
        "--max-look",
        type=float,
        default=DaemonSettings.max_look,
        help="the daemon's longest wait before it looks at a rollout again",
    )
    args = parser.parse_args()
    global SANDBOX, MAX_LOOK
    MAX_LOOK = args.max_look
    SANDBOX = tuple(f"*={args.ready_delay:g}" if a == f"*={READY_DELAY:g}" else a for a in SANDBOX)
    for key, value in IDENTITY.items():
        os.environ.setdefault(key, value)
    n = args.instances
    gits = GitCounter()
    print(
        f"sandbox: {' '.join(SANDBOX)}; {REPLICAS} replicas, batches [1, 50%, 50%]; "
        f"{n} instances in {min(n, args.namespaces)} namespaces"
    )
    with tempfile.TemporaryDirectory() as tmp:
        with world(Path(tmp) / "solo", 1, 1, False, gits, args.verbose) as solo:
            base, _ = roll(solo, ["web0000"], args.timeout)
        print(f"baseline: 1 rollout alone          {base.wall:6.2f} s")
        print(base.line(1))
        with world(Path(tmp) / "many", n, args.namespaces, True, gits, args.verbose) as many:
            names = [f"web{i:04d}" for i in range(n)]
            phase, slowest = roll(many, names, args.timeout)
            ratio = phase.wall / base.wall
            print(
                f"{n} rollouts at once: all succeeded {phase.wall:6.2f} s = {ratio:.2f}x "
                f"the baseline (goal <= 1.5x); = {phase.wall / slowest:.2f}x the slowest "
                f"single rollout of the run, {slowest:.2f} s (parallel: goal <= 1.5x)"
            )
            print(phase.line(n))
            per = sum(phase.requests.values()) / n / max(1, sum(base.requests.values()))
            print(f"    requests per rollout vs. the baseline's: {per:.2f}x")
            figure(
                f"{n} rollouts at once, all succeeded",
                f"{phase.wall:.2f} s = {ratio:.2f}x",
                "<= 1.5x",
                f"1 rollout alone {base.wall:.2f} s",
                ratio <= 1.5,
            )
            figure(
                f"API requests per rollout, {n} at once",
                f"{phase.per_rollout(n):.1f} ({phase.per_step(n):.1f} per batch step)",
                "-",
                f"1 rollout alone {base.per_rollout(1):.1f} ({base.per_step(1):.1f} per step)",
                None,
            )
            for batch in (2, 3):
                wait_for(lambda b=batch: gate_waits(many, b - 1), 60, f"{GATE} to wait")
                latency, fetch, passes = promote(many, batch)
                goal = 1.0 + fetch
                figure(
                    f"promotion to batch {batch} starting, webhook, {n + 1} instances",
                    f"{latency:.2f} s in {passes} passes",
                    f"< 1 s + fetch = {goal:.2f} s",
                    f"fetch of the pass {fetch:.2f} s",
                    latency < goal,
                )
                print(
                    f"promotion to batch {batch} starting (webhook, {n + 1} instances): "
                    f"{latency:5.2f} s in {passes} passes (goal < 1 s + fetch {fetch:.2f} s "
                    f"= {goal:.2f} s: {latency / goal:.2f}x)"
                )


if __name__ == "__main__":
    main()
