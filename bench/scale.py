"""Benchmark: the daemon at 1,000 / 5,000 / 10,000 instances (issue 12), beside its goals.

Each size runs in a fresh child process (so max RSS is that size's alone) against
a sandbox API server in its own process (so CPU seconds are the reconciler's
alone; requests come from the sandbox's request log). One app with three objects
per instance (ConfigMap, Service, Deployment); one instance in ten follows the
channel ``fast``, the others ``stable``. Per size it prints:

  * first pass (install), against ``kubectl apply --server-side -f`` of the same
    rendered manifests (namespaces included) on a second, fresh sandbox;
  * a no-op pass, against ``kubectl apply --server-side`` of the same manifests
    again (what a reconciler that re-applies everything costs);
  * a commit that only edits the README (goal: 0 writes, no status commit, the
    cost of a no-op pass);
  * a channel move touching 10% of the instances (goal: the no-op pass plus the
    changed instances' share of the first pass);
  * memory per instance (max RSS growth over the process before the daemon was
    built, divided by the instances) and cost (CPU ms) per instance per step,
    which should stay flat from 1,000 to 10,000.

Without ``kubectl`` on PATH (or with ``--no-kubectl``) the baseline is a naive
server-side apply of every object, one request after another, through the
project's official-client wrapper.

Both sandboxes answer each request 5 ms late by default (``--request-latency``), as
a real API server does (5-10 ms, the issue's premise): that is what the daemon's
concurrent requests (``--max-requests-in-flight``, default 8 as ``reconciler run``;
1 is the old serial pass) are for, while kubectl sends one request after another;
the first pass says how many were in flight at once. With ``--request-latency 0``
the sandbox answers at once and serves practically one request at a time (one
event loop), so concurrency has little to overlap and its CPU per request is the
floor: then the install is as fast as its request count, 5 per new instance (3
objects, the inventory, the ReconcileSucceeded Event) against kubectl's 3. At
1,000 instances, after a first install stopped sending dry runs (7.9 requests per
instance before): 13.2 s against kubectl's 9.3 s at 0 ms (1.42x), 18.7 s against
28.4 s at 5 ms (0.66x). Earlier, at 300 instances and 5 ms: first install 31.5 s
with 8 in flight against kubectl's 21.5 s (1.46x); serially 43.5 s against 19.3 s
(2.25x), each from a loaded machine.

The daemon runs as ``reconciler run`` does, with its watch cache (``kube.watchcache``):
the first pass lists each kind once and watches it from then on, so later passes read
the watched store instead of listing, and the install's health is read from it instead
of one GET per Deployment. The no-op pass keeps each settled instance's last verdict
(``reconciler.daemon.memo``): it renders and compares nothing for an instance whose
catalog inputs and objects' ``resourceVersion`` did not change; the line under the
table says how many instances it reused. With the watch cache, at 1,000 instances
(load average 1.1): no-op pass 0 requests, 0.13 s wall, 0.11 s CPU, 0.03x kubectl's
re-apply (before, listing: 8 requests, 0.33 s, 0.08x); README commit 0 requests,
0.18 s; first pass 7,907 requests from 8,907 (no health GETs), 17.0 s wall as before
(1.39x kubectl), but 7.7 s CPU from 6.3: the watches decode every status update the
controllers write; channel move 800 requests from 968; max RSS 49.1 KiB per instance.
Figures from before the watch cache, on the shared 2-core machine (other jobs
running), no-op pass: at 1,000 instances 0.34 s wall, 0.20 s CPU against kubectl's re-apply in
4.70 s, 0.07x (0.10x in another run; before: 1.37 s wall, 0.73 s CPU, 0.25x; the README's
earlier figure 0.40x); at 5,000 3.75 s wall, 1.19 s CPU (0.24 ms per instance, as at 1,000)
against 21.09 s, 0.18x: most of that wall is the sandbox serving the 40 list pages. A
channel move reuses the instances it does not move (1.1 s CPU for 100 of 1,000, from 2.1).
Max RSS: 60.2 KiB per instance at 1,000, 40.9 at 5,000 (before: 63.0 and 42.5; load 0.7
and 0.7). Where it goes, per instance at 3,000 (RSS): the install pass reaches 24 KiB
(catalog and rendered objects 11, every rendered object of the cluster held at once
until the pass ends; then the live view, apply answers, change sets and inventories 10;
the status commit 2.4), and every later pass that lists adds to it, since CPython keeps an
arena of small objects resident while any object in it lives: 35 KiB after ten passes.
A decoded 500-object list page is tens of MiB at once (a fixed part: 20 of the 60 KiB at
1,000); kept strings no longer pin it (``kube.live._copy``), which took the second pass's
growth from 20 KiB to 12 at 1,000. glibc's per-thread malloc arenas (8 apply threads)
add about 4 KiB (``MALLOC_ARENA_MAX=1``: 42.8 KiB after two passes at 1,000, from 48.9;
the whole bench at 1,000 with ``MALLOC_ARENA_MAX=2``: 43.0 KiB against 45.2, in a run
that shared the machine, so its cost in time is not known and the image does not set it).

The no-op pass then repeated per instance work that nothing had changed (issue 33, 0.57 s
CPU at 10,000 on a loaded machine): each kind's objects compared with the memo's one by one,
the inventories parsed and checked, the status ledger's records compared, the one-owner check
over every reused plan's keys, the change set scanned once per action. Now a pass whose
watched kinds are at the generation the last pass checked them at compares no object
(``daemon.memo``) and takes the last inventories as they are (``kube.live.InventoryCache``);
the ledger builds nothing when the very statuses come back to the head they were compared at;
reused plans are not checked again when every instance is reused. Median of 7 no-op passes (with
timers around its steps) at 2,000 instances, machine loaded: 70 ms CPU before, 30 ms after (0.035
-> 0.015 ms per instance); both trees side by side (``--sizes 1000,3000``, load average 12
to 27): at 1,000 the no-op pass 0.20 s wall, 0.04 s CPU before, 0.07 s and 0.01 s after (0.036 ->
0.014 ms per instance); at 3,000 0.51 s and 0.10 s before, 0.15 s and 0.03 s after (0.033
-> 0.010); a README commit 0.066 -> 0.040 ms per instance at 3,000; max RSS per instance
20.1 KiB at 1,000 in both, 14.0 -> 13.7 at 3,000.

Latest (``--sizes 1000,10000``, quiet machine, 18 minutes in all): at 10,000 instances
the first install 205.5 s, 50,063 requests against kubectl's 272.0 s, 0.76x; the no-op
pass 0 requests, 1.22 s, 0.01x; a README commit 0 writes, 0.93x the no-op pass; a
channel move of 1,000 instances 7,000 requests, 1.69x; max RSS 13.4 KiB per instance
(19.3 at 1,000). What took it from 32.2 through 16.0 to 13.4: packed live objects
deflated against a dictionary per kind, one ``bytes`` each; slotted, interned records;
the memo holding references and the live view's own packed objects; the instance info
metric built at scrape time; relists that keep unchanged objects, one at a time, in
pages of 100; and this bench reading the sandbox's request log a page at a time (its
50,000 entries decoded at once, ~50 MiB, counted as the daemon's: 14.5 KiB per instance
in the run just before).

With 5 ms per request (the default since), after a first install stopped sending dry
runs and an upgrade stopped dry-running the first object it writes, and with plans
keeping their rendered objects packed (``daemon.rendered``), on the idle machine
(``--sizes 1000,10000``, 19 minutes in all): at 10,000 instances the first install
238.5 s, 50,062 requests against kubectl's 305.5 s and 30,063 requests, 0.78x; the
no-op pass 0 requests, 1.46 s wall, 0.01x kubectl's re-apply (234.8 s); a README commit
0 writes, 1.20x the no-op pass; a channel move of 1,000 instances 7,000 requests,
1.56x; max RSS 32.2 KiB per instance (36.6 at 1,000); CPU per instance flat (install
6.5 -> 6.7 ms, no-op 0.13 -> 0.14 ms, move 1.04 -> 1.17 ms).

Before, with the sandbox answering at once, on the idle machine (``--sizes 1000,10000``,
14 minutes in all): at 10,000
instances the no-op pass sends 0 requests, 1.17 s wall, 1.12 s CPU, 0.02x kubectl's
re-apply (49.96 s); a README commit 0 writes, 1.08x the no-op pass; the first install
219.3 s, 73,784 requests against kubectl's 159.2 s and 30,063 requests, 1.38x (the dry
runs of instances whose namespace exists are 3 requests each); a channel move of 1,000
instances 1.29x; max RSS 40.2 KiB per instance (45.2 at 1,000); CPU per instance flat
(install 8.5 -> 9.0 ms, no-op 0.13 -> 0.11 ms). Before the watch cache, at 10,000 and
with other jobs running: the no-op pass 80 lists, 21.5 s wall, 0.42x; the install 2.79x.

Requests are counted from the sandbox's request log; requests to the ``events``
resource are counted apart ("Events apart"): kubectl records none, and the daemon sends
them in the background (``kube.events.EventQueue``), so they are not part of the work
compared with kubectl's. The bench waits for a pass's Events after its clock stopped,
so each step counts its own. "requests per installed instance" is the install's other
requests over the instances: at least 4 (3 objects and the instance's inventory
ConfigMap, one server-side apply each) plus its share of the namespaces.

``--busy N`` runs N CPU-bound processes beside both the daemon's steps and the
baseline, as on a machine other work keeps busy; the ratio is still taken within one
run. Each step's figures also go to stderr as soon as they are measured, with the load
average, so a run cut short (``timeout``) still tells what it finished.

Run: ``.venv/bin/python bench/scale.py [--sizes 1000,5000,10000] [--no-kubectl]
[--request-latency S] [--max-requests-in-flight N] [--busy N]``.
The default is 300 instances. The issue's sizes are passed with ``--sizes``: 1,000 takes
about 3 minutes, 10,000 about 16 on the idle 2-core machine at 5 ms per request (most of
it the sandbox creating Deployments, ReplicaSets and Pods for our install and kubectl's,
and kubectl's two serial passes).
"""

# ruff: noqa: E402  (imports must follow the sys.path guard below)
from __future__ import annotations

import sys
from pathlib import Path

# bench/git.py would shadow GitPython's ``git`` package for scripts run from this
# folder: the folder goes last on the import path (benchkit).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import orjson
from benchkit import WEB_MANIFESTS, figure, request_log_pages, sandbox_process

# The daemon's stack is imported where a size is measured (``one_size``, in the child
# process): the parent only starts a child per size and prints, and importing it there
# cost 0.6 s of CPU per run.
if TYPE_CHECKING:
    from reconciler.daemon.loop import Daemon, PassOutcome
    from reconciler.daemon.plan import InstancePlan

SANDBOX = ("--controller-delay", "0.05", "--pod-grace-scale", "0.01")
WRITES = ("create", "update", "patch", "delete", "deletecollection")
LOG_LIMIT = 100_000  # the sandbox keeps this many request log entries
APP = "apiVersion: reconciler/v1\nkind: App\nname: web\n"
CHANNELS = (
    "apiVersion: reconciler/v1\nkind: Channels\napp: web\n"
    "channels:\n  stable: 1.0.0\n  fast: {fast}\n"
)
VERSION = """\
apiVersion: reconciler/v1
kind: AppVersion
app: web
version: {v}
upgradeFrom: ">=1.0.0"
images: {{web: "registry.example.com/web:{v}"}}
parameters: {{replicas: {{default: 2}}, message: {{default: hello}}}}
"""
INSTANCE = """\
apiVersion: reconciler/v1
kind: Instance
name: {name}
app: web
channel: {channel}
namespace: ns{ns}
"""


CLUSTER = """\
apiVersion: reconciler/v1
kind: Cluster
name: bench
inventory: {layout}
"""


def generate(root: Path, instances: int, layout: str = "perInstance") -> None:
    files = {
        "README.md": "# bench catalog\n",
        "apps/web/app.yaml": APP,
        "apps/web/channels.yaml": CHANNELS.format(fast="1.0.0"),
        "clusters/bench/cluster.yaml": CLUSTER.format(layout=layout),
    }
    for v in ("1.0.0", "1.1.0"):
        files[f"apps/web/versions/{v}/version.yaml"] = VERSION.format(v=v)
        files[f"apps/web/versions/{v}/manifests/app.yaml"] = WEB_MANIFESTS
    for i in range(instances):
        name = f"web{i:05d}"
        channel = "fast" if i % 10 == 0 else "stable"
        files[f"clusters/bench/instances/{name}.yaml"] = INSTANCE.format(
            name=name, channel=channel, ns=i % 50
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def requests_by_verb(url: str, reset: bool = True) -> Counter[str]:
    """Requests served since the last reset, by Kubernetes verb; resets the log.

    Two keys are not verbs. ``in-flight`` is the most requests the sandbox was
    serving at once (its request log records that for each request). ``events`` counts
    the requests to the ``events`` resource (create or patch of an Event, core or
    ``events.k8s.io``): they are kept out of the verbs, because they are not part of
    the work kubectl is compared with (kubectl records no Event), and the daemon sends
    them in the background (``kube.events.EventQueue``).
    """
    counts: Counter[str] = Counter()
    peak = seen = 0
    for e in request_log_pages(url, reset):  # a page at a time: not the daemon's memory
        seen += 1
        if EVENTS_PATH.search(str(e.get("path", ""))):
            counts["events"] += 1
        elif "dryRun=" in str(e.get("query", "")):  # not a write: changes nothing
            counts["dry-run"] += 1
        else:
            counts[str(e["verb"])] += 1
        peak = max(peak, int(e.get("in_flight", 0)))
    if seen >= LOG_LIMIT:
        print(f"  (request log full: counts below are at least {LOG_LIMIT})")
    return counts + Counter({"in-flight": peak}) if peak else counts


EVENTS_PATH = re.compile(r"/events(/|$)")
NOT_REQUESTS = ("in-flight", "events")


def requests(counter: Counter[str]) -> int:
    """Requests other than Events (``requests_by_verb`` counts those apart)."""
    return sum(n for verb, n in counter.items() if verb not in NOT_REQUESTS)


def writes(counter: Counter[str]) -> int:
    return sum(counter[v] for v in WRITES)


def rss_now() -> float:
    """Resident set size of this process now, in KiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1024


@dataclass
class Step:
    wall: float
    cpu: float
    requests: int
    writes: int
    commits: int = 0
    in_flight: int = 0  # the most requests in flight at once
    events: int = 0  # requests that recorded an Event (not in ``requests``)

    def row(self, name: str, n: int, goal: str) -> str:
        per = self.cpu / n * 1000
        return (
            f"  {name:<22} {self.wall:8.2f} {self.cpu:8.2f} {per:7.3f} {self.requests:8d} "
            f"{self.writes:7d} {self.commits:7d}   {goal}"
        )


def timed_pass(daemon: Daemon, url: str, name: str) -> tuple[PassOutcome, Step]:
    """One pass, timed; its requests and the Events it queued counted.

    The Events a pass queued are sent in the background (``kube.events.EventQueue``),
    some after the pass returned: the bench waits for them after the clock stopped, so
    that each step counts its own Events and none lands in the next step's requests.
    """
    daemon.flush_events()
    requests_by_verb(url)
    cpu, wall = time.process_time(), time.perf_counter()
    outcome = daemon.run_pass()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if outcome.error:
        sys.exit(f"bench: pass failed: {outcome.error}")
    daemon.flush_events(EVENTS_FLUSH)
    verbs = requests_by_verb(url)
    step = Step(
        wall,
        cpu,
        requests(verbs),
        writes(verbs),
        len(outcome.commits),
        verbs["in-flight"],
        verbs["events"],
    )
    progress(name, step)
    return outcome, step


def progress(what: str, step: Step) -> None:
    """A step's figures on stderr as soon as it is measured: a run cut short (``timeout``
    at 10,000 instances on a busy machine) still tells what it finished."""
    print(
        f"  [{time.strftime('%H:%M:%S')}] {what}: {step.wall:.2f} s wall, {step.cpu:.2f} s CPU, "
        f"{step.requests} requests, {step.events} Events, load {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
        flush=True,
    )


EVENTS_FLUSH = 600.0  # seconds the bench waits for a pass's Events (10,000 at most)


@contextmanager
def busy(count: int) -> Iterator[None]:
    """``count`` CPU-bound processes running beside what the block measures.

    The issue's machine is shared: a ratio taken on a quiet machine says little about
    one where another job keeps a core busy. The same processes run beside both sides
    of a ratio (the daemon's steps, then kubectl's), started and stopped here.
    """
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=30)


def settle(daemon: Daemon, limit: int = 200) -> int:
    """Passes until no instance is Progressing (health is looked at across passes)."""
    from reconciler.model.status import Phase

    for count in range(1, limit + 1):
        outcome = daemon.run_pass()
        report = outcome.report
        if report is None:
            sys.exit(f"bench: pass failed: {outcome.error}")
        if all(s.phase is not Phase.PROGRESSING for s in report.statuses):
            failed = [s for s in report.statuses if s.phase is not Phase.READY]
            if failed:
                sys.exit(f"bench: {failed[0].instance} is {failed[0].phase}: {failed[0].message}")
            return count
        time.sleep(0.2)
    sys.exit(f"bench: still progressing after {limit} passes")


def write_manifests(plans: Sequence[InstancePlan], path: Path) -> int:
    """The rendered objects of a pass's plans, placed in their namespaces, namespaces
    first, written to ``path`` as a stream of JSON objects, one per line (``kubectl
    apply -f`` reads such a stream); returns how many objects were written.

    Written as the plans are walked, not collected first: the list of every object
    would be the bench's to hold, not the daemon's, yet it would count in max RSS.
    """
    namespaces = sorted({plan.instance.namespace for plan in plans})
    count = 0
    with path.open("wb") as out:
        for name in namespaces:
            out.write(
                orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            )
            out.write(SEPARATOR)
        for plan in plans:
            for obj in plan.objects:
                placed = dict(obj)
                placed["metadata"] = {
                    "namespace": plan.instance.namespace,
                    **dict(obj.get("metadata") or {}),
                }
                out.write(orjson.dumps(placed))
                out.write(SEPARATOR)
                count += 1
    return count


SEPARATOR = b"\n"


def read_manifests(path: Path) -> list[dict[str, Any]]:
    """What :func:`write_manifests` wrote, back as objects."""
    return [orjson.loads(doc) for doc in path.read_bytes().split(SEPARATOR) if doc.strip()]


def sandbox_options(latency: float) -> tuple[str, ...]:
    """The sandbox's options: a real API server answers in 5-10 ms (``--request-latency``)."""
    return (*SANDBOX, "--request-latency", str(latency)) if latency else SANDBOX


def baseline(work: Path, path: Path, use_kubectl: bool, latency: float = 0.0) -> dict[str, Any]:
    """First apply and re-apply of the manifests in ``path`` on a fresh sandbox, by
    kubectl or naively."""
    from reconciler.kube import KubeClient

    kubectl = shutil.which("kubectl") if use_kubectl else None
    docs = [] if kubectl else read_manifests(path)
    out: dict[str, Any] = {"tool": "kubectl apply --server-side" if kubectl else "naive SSA"}
    with sandbox_process(work / "baseline", *sandbox_options(latency)) as (url, kubeconfig):
        for step in ("first", "again"):
            requests_by_verb(url)
            wall = time.perf_counter()
            if kubectl:
                before = _children_cpu()
                argv = [kubectl, "--kubeconfig", str(kubeconfig), "apply", "--server-side"]
                done = subprocess.run(
                    [*argv, "--validate=false", "-f", str(path)], capture_output=True, text=True
                )
                if done.returncode != 0:
                    sys.exit(f"bench: kubectl failed: {done.stderr.strip()[:500]}")
                cpu = _children_cpu() - before
            else:
                with KubeClient.connect(str(kubeconfig)) as client:
                    before = time.process_time()
                    for doc in docs:
                        client.apply(doc)
                    cpu = time.process_time() - before
            wall = time.perf_counter() - wall
            verbs = requests_by_verb(url)
            measured = Step(wall, cpu, requests(verbs), writes(verbs))
            progress(f"{out['tool']} ({step})", measured)
            out[step] = asdict(measured)
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_size(
    n: int,
    use_kubectl: bool,
    latency: float = 0.0,
    in_flight: int = 8,
    busy_count: int = 0,
    layout: str = "perInstance",
) -> dict[str, Any]:
    """Every step at ``n`` instances; printed, and returned for the summary.

    ``busy_count`` CPU-bound processes run beside the daemon's steps and beside the
    baseline (not beside generating the catalog).
    """
    from reconciler.daemon.loop import Daemon, DaemonSettings
    from reconciler.kube import KubeClient
    from reconciler.source.scaffold import IDENTITY, commit_file, create_catalog_repo

    for key, value in IDENTITY.items():
        os.environ.setdefault(key, value)
    result: dict[str, Any] = {"instances": n, "layout": layout}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate(work / "template", n, layout)
        repo = create_catalog_repo(work / "template", work / "repos")
        rss0 = rss_now()
        with (
            busy(busy_count),
            sandbox_process(work / "sandbox", *sandbox_options(latency)) as (url, kubeconfig),
            KubeClient.connect(str(kubeconfig), max_requests_in_flight=in_flight) as client,
        ):
            settings = DaemonSettings(
                repo=repo.url,
                cluster="bench",
                health_timeout=600.0,
                cache_dir=work / "cache",
                jitter=0.0,
                drift_interval=3600.0,
            )
            daemon = Daemon(settings, client)
            daemon.start_watching()  # as ``reconciler run`` does (kube.watchcache)
            try:
                first_outcome, first = timed_pass(daemon, url, f"{n:,}: first pass (install)")
                load_at_install = os.getloadavg()[0]
                # the manifests kubectl applies (``baseline``) go to a file now: the
                # report is not the daemon's to hold, so it must not count in max RSS
                path = work / "manifests.yaml"
                objects = write_manifests(
                    first_outcome.report.plans if first_outcome.report else (), path
                )
                del first_outcome
                settled = settle(daemon)
                noop_outcome, noop = timed_pass(daemon, url, f"{n:,}: no-op pass")
                assert noop_outcome.report is not None
                reused = len(noop_outcome.report.reused)
                commit_file(repo, "README.md", "# bench catalog\n\nEdited.\n", "README only")
                _, readme = timed_pass(daemon, url, f"{n:,}: README-only commit")
                commit_file(repo, "apps/web/channels.yaml", CHANNELS.format(fast="1.1.0"), "fast")
                move_outcome, move = timed_pass(daemon, url, f"{n:,}: channel move")
                assert move_outcome.report is not None
                moved = {e.instance for e in move_outcome.report.changes.entries if e.changed}
                settle(daemon)
            finally:
                daemon.stop_watching()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result.update(
            first=asdict(first),
            settle_passes=settled,
            noop=asdict(noop),
            noop_reused=reused,
            readme=asdict(readme),
            move=asdict(move),
            moved=len(moved),
            objects=objects,
            kib_per_instance=(peak - rss0) / n,
            peak_mib=peak / 1024,
        )
        with busy(busy_count):
            result["baseline"] = baseline(work, path, use_kubectl, latency)
        result["latency"] = latency
        result["busy"] = busy_count
        result["load"] = (load_at_install, os.getloadavg()[0])
    return result


def print_size(r: dict[str, Any]) -> None:
    n = r["instances"]
    first, noop, readme, move = (Step(**r[k]) for k in ("first", "noop", "readme", "move"))
    base = r["baseline"]
    b_first, b_again = Step(**base["first"]), Step(**base["again"])
    tool = base["tool"]
    print(f"\n== {n:,} instances ({r['objects']:,} objects incl. namespaces) ==")
    print(
        f"  {'step':<22} {'wall s':>8} {'CPU s':>8} {'CPU ms/i':>7} {'requests':>8} "
        f"{'writes':>7} {'commits':>7}   goal [baseline, same run]"
    )
    print(
        first.row(
            "first pass (install)",
            n,
            f"faster than {tool} -f [{b_first.wall:.2f} s wall, {b_first.requests} requests]: "
            f"{first.wall / b_first.wall:.2f}x",
        )
    )
    print(
        noop.row(
            "no-op pass",
            n,
            f"<= 5 s wall at 10,000 and <= 0.1x {tool} again "
            f"[{b_again.wall:.2f} s wall, {b_again.writes} writes]: "
            f"{noop.wall / b_again.wall:.2f}x",
        )
    )
    print(
        readme.row(
            "README-only commit",
            n,
            f"0 writes, 0 commits, cost of the no-op pass [{noop.wall:.2f} s]: "
            f"{readme.wall / noop.wall:.2f}x",
        )
    )
    share = noop.wall + first.wall * r["moved"] / n
    print(
        move.row(
            f"channel move ({r['moved']} inst.)",
            n,
            f"no-op + changed instances' share of the first pass [{share:.2f} s]: "
            f"{move.wall / share:.2f}x",
        )
    )
    print(
        f"  memory: {r['kib_per_instance']:.1f} KiB per instance (max RSS {r['peak_mib']:.0f} MiB)"
        f"   goal <= 15 KiB per instance at 10,000"
    )
    print(f"  (first pass then {r['settle_passes']} passes until every instance was Ready)")
    if "noop_reused" in r:
        print(
            f"  (no-op pass: {r['noop_reused']:,} of {n:,} instances kept their last verdict, "
            "neither rendered nor compared)"
        )
    latency = f", each answered after {r['latency'] * 1000:g} ms" if r.get("latency") else ""
    print(f"  (first pass: at most {first.in_flight} requests in flight at once{latency})")
    print(
        f"  requests per installed instance: {first.requests / n:.2f} (inventory "
        f"{r.get('layout', 'perInstance')}; goal <= 3.5 with perNamespace; {tool}: "
        f"{b_first.requests / n:.2f}); Events apart: {first.events:,} requests "
        f"({first.events / n:.2f} per instance), sent in the background"
    )
    if "load" in r:
        at_install, at_baseline = r["load"]
        print(
            f"  load average (1 min): {at_install:.2f} after the install, {at_baseline:.2f} "
            f"after {tool}; {r['busy']} CPU-bound processes beside both (--busy)"
        )


def print_figures(r: dict[str, Any]) -> None:
    """The size's figures as ``make bench`` collects them (benchkit.figure), each beside
    its goal and the baseline of the same run."""
    n = r["instances"]
    first, noop = Step(**r["first"]), Step(**r["noop"])
    base = r["baseline"]
    b_first, b_again = Step(**base["first"]), Step(**base["again"])
    tool = base["tool"]
    busy = r.get("busy", 0)
    layout = r.get("layout", "perInstance")
    # the inventory layout in every figure's name: the two are different rows
    inventories = "" if layout == "perInstance" else f", inventory {layout}"
    beside = f", {busy} CPU-bound beside both" if busy else ""
    ratio = first.wall / b_first.wall
    figure(
        f"first install, {n:,} instances{inventories}{beside}",
        f"{first.wall:.2f} s = {ratio:.2f}x",
        "<= 0.6x",
        f"{tool} -f {b_first.wall:.2f} s",
        ratio <= 0.6,
    )
    per, base_per = first.requests / n, b_first.requests / n
    # perInstance: 3 objects and the instance's own inventory ConfigMap, 4 at least;
    # the goal is the perNamespace layout's, which writes one inventory per namespace
    shared = layout == "perNamespace"
    figure(
        f"requests per installed instance, {n:,} instances, inventory {layout}",
        f"{per:.2f} (Events apart: {first.events / n:.2f})",
        "<= 3.5" if shared else "- (3 objects + own inventory)",
        f"{tool} {base_per:.2f}",
        per <= 3.5 if shared else None,
    )
    at_10k = f"{noop.wall * 10_000 / n:.2f} s extrapolated to 10,000" if n < 10_000 else ""
    figure(
        f"no-op pass, {n:,} instances{inventories}",
        f"{noop.wall:.2f} s wall, {noop.cpu:.2f} s CPU, {noop.requests} requests"
        + (f" ({at_10k})" if at_10k else ""),
        "< 0.5 s at 10,000",
        f"{tool} again {b_again.wall:.2f} s",
        noop.wall < 0.5 if n >= 10_000 else None,
    )
    kib = r["kib_per_instance"]
    figure(
        f"memory per instance, {n:,} instances{inventories}",
        f"{kib:.1f} KiB",
        "<= 15 KiB at 10,000",
        "-",
        kib <= 15 if n >= 10_000 else None,
    )


def print_summary(results: list[dict[str, Any]]) -> None:
    print("\ncost per instance (CPU ms; goal: flat from 1,000 to 10,000, no step super-linear)")
    print(f"  {'instances':>9} {'first':>8} {'no-op':>8} {'README':>8} {'move':>8} {'KiB':>6}")
    for r in results:
        n = r["instances"]
        per = [r[k]["cpu"] / n * 1000 for k in ("first", "noop", "readme", "move")]
        cells = " ".join(f"{p:8.3f}" for p in per)
        print(f"  {n:9,} {cells} {r['kib_per_instance']:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="300", help="comma-separated instance counts")
    parser.add_argument("--no-kubectl", action="store_true", help="naive SSA as the baseline")
    parser.add_argument(
        "--request-latency",
        type=float,
        default=0.005,
        metavar="SECONDS",
        help="the sandboxes answer each request this late (default 0.005, as a real API "
        "server: 0.005-0.01; 0: at once)",
    )
    parser.add_argument(
        "--max-requests-in-flight",
        type=int,
        default=8,
        metavar="N",
        help="the daemon's request budget (default 8, as `reconciler run`; 1: serial)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run N CPU-bound processes beside both the daemon and the baseline "
        "(default 0), as on a machine that other work keeps busy",
    )
    parser.add_argument(
        "--inventory",
        choices=("perInstance", "perNamespace"),
        default="perInstance",
        help="the bench cluster's inventory layout (cluster.yaml inventory; default "
        "perInstance, a ConfigMap per instance; perNamespace: one per namespace)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child run: one size
    args = parser.parse_args()
    if args.busy < 0:
        parser.error("--busy must be 0 or more")
    if args.one:
        budget = args.max_requests_in_flight
        use_kubectl = not args.no_kubectl
        result = one_size(
            args.one, use_kubectl, args.request_latency, budget, args.busy, args.inventory
        )
        print(json.dumps(result))
        return
    print(
        f"scale: sizes {args.sizes}, {args.request_latency * 1000:g} ms per request, "
        f"{args.max_requests_in_flight} requests in flight, {args.busy} CPU-bound processes "
        f"beside both sides (--busy), inventory {args.inventory}, load average "
        f"{os.getloadavg()[0]:.2f} at the start"
    )
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        argv = [sys.executable, __file__, "--one", str(n)]
        argv += ["--request-latency", str(args.request_latency)]
        argv += ["--max-requests-in-flight", str(args.max_requests_in_flight)]
        argv += ["--busy", str(args.busy), "--inventory", args.inventory]
        done = run_child([*argv, *(["--no-kubectl"] if args.no_kubectl else [])])
        results.append(json.loads(done.splitlines()[-1]))
        print_size(results[-1])
        print_figures(results[-1])
    print_summary(results)


def run_child(argv: list[str], show: Callable[[str], None] = print) -> str:
    """Run one size in a child process, in a process group of its own, and return what
    it printed.

    The child starts a sandbox and the ``--busy`` processes. When this process is told
    to stop (``timeout`` sends SIGTERM) or fails, the whole group is killed: killing the
    child alone left a CPU-bound process and a sandbox running after a timed-out run.
    """
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        out, _ = child.communicate()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    if child.returncode != 0:
        show(out)
        sys.exit(f"bench: {' '.join(argv[1:])} failed")
    return out


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()
