"""Migration hooks driven by the daemon, end to end (SPEC section 5).

A real catalog repository, the sandbox (whose Jobs run real pods to completion)
and the daemon: migrations run once in the life of an instance, decided by the
cluster's state; a failed ``pre`` applies nothing of the new version; removing an
instance undoes every migration from the version that applied it. Each run is a
record in the cluster's ledger ConfigMap, in the ``InstanceStatus`` and its own
status commit.

The scenarios run on the sandbox and, in the ``real_cluster`` lane, on a real
cluster (tests/lanes.py): Jobs are seen through a watch, and a failing Job fails in
both (its command exits 1; the sandbox, which runs no commands, is told so by its
annotation).
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.daemon.loop import Daemon, DaemonSettings, PassOutcome
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.kube import KubeClient
from reconciler.migrations import GROUP, Registry, job_span, ledger_from_configmap
from reconciler.model.changeset import ObjectRef
from reconciler.model.migrations import MigrationRecord
from reconciler.model.status import Phase
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from reconciler.source.scaffold import CatalogRepo
from tests.factories import catalog_repo, commit_file, remove_file, write_catalog
from tests.lanes import (
    LANES,
    Event,
    Watched,
    delete_namespaces,
    namespaces_ending,
    new_suffix,
    real_kubeconfig,
    suffix_namespaces,
    suffix_path,
)
from tests.migrations import samples

REGISTRY = Registry.from_entry_points(
    [EntryPoint("counting", "tests.migrations.samples:CountingMarker", GROUP)]
)
FAST = Timing(
    pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.02, job_duration=0.05
)
# A pass gives migration Jobs the health grace; these tests see each run end in the pass
# that started it (a loaded machine may take seconds): a grace is an upper bound only.
GRACE = 30.0
NS = "team-fin"

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: ${{instance.name}}-{name}
{annotations}spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        sandbox.reconciler.dev/log: "{name} of ${{app.name}} ${{app.version}}"{fail}
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: busybox:1.36
          command: ["sh", "-c", "echo {name} of ${{app.name}} ${{app.version}}{exit}"]
"""


def job(name: str, *, fail: bool = False) -> str:
    """A migration Job; a failing one exits 1 on a real node and in the sandbox."""
    mark = '\n        sandbox.reconciler.dev/fail: "true"' if fail else ""
    return JOB.format(name=name, annotations="", fail=mark, exit="; exit 1" if fail else "")


def state_check(name: str) -> str:
    """Needed while ``<instance>-<name>`` is missing: what each migration would create."""
    return (
        "    check:\n      objectMissing: {apiVersion: v1, kind: ConfigMap, "
        f'name: "${{instance.name}}-{name}"}}\n'
    )


def version_yaml(key: str, migrations: str) -> str:
    upgrade = "" if key == "1.4.0" else 'upgradeFrom: ">=1.4.0"\n'
    return (
        f"apiVersion: reconciler/v1\nkind: AppVersion\napp: ledger\nversion: {key}\n{upgrade}"
        "parameters:\n  greeting: {default: hello}\n"
        + (f"migrations:\n{migrations}" if migrations else "")
    )


def entry(name: str, phase: str, body: str, *, undo: bool = True) -> str:
    """A Job migration (with its state check and an undo Job) or a ``python:`` one."""
    text = f"  - name: {name}\n    phase: {phase}\n"
    if phase != "uninstall":
        text += state_check(name)
    if body == "python":
        return text + "    python: counting\n    timeoutSeconds: 30\n"
    text += f"    job: migrations/{name}.yaml\n"
    if undo:
        text += f"    undo: migrations/undo-{name}.yaml\n"
    return text + "    timeoutSeconds: 30\n"


ADD_INDEX = entry("add-index", "pre", "job")
SPLIT_TOTALS = entry("split-totals", "pre", "python")
BACKFILL = entry("backfill", "post", "job")
DROP_LEGACY = entry("drop-legacy", "pre", "job")
RELEASE = entry("release", "uninstall", "job", undo=False)
# 1.5.0 ships add-index; 2.0.0 and 2.0.1 ship it again, unchanged (same checksum).
SHIPPED = {
    "1.4.0": "",
    "1.5.0": ADD_INDEX,
    "2.0.0": ADD_INDEX + SPLIT_TOTALS + BACKFILL,
    "2.0.1": ADD_INDEX + SPLIT_TOTALS + BACKFILL + DROP_LEGACY + RELEASE,
}


def ledger_files(**fail: bool) -> dict[str, str | bytes | None]:
    files: dict[str, str | bytes | None] = {
        "apps/ledger/app.yaml": "apiVersion: reconciler/v1\nkind: App\nname: ledger\n",
        "clusters/prod/instances/books.yaml": instance("1.4.0"),
        # a bystander (removing books alone must not be "every instance" to the prune
        # guard); the podinfo Deployments would only make each pass wait for pods
        "clusters/prod/instances/cards.yaml": instance("1.4.0").replace("books", "cards"),
        "clusters/prod/instances/web.yaml": None,
        "clusters/prod/instances/api.yaml": None,
    }
    for key, migrations in SHIPPED.items():
        root = f"apps/ledger/versions/{key}"
        files[f"{root}/version.yaml"] = version_yaml(key, migrations)
        files[f"{root}/manifests/config.yaml"] = textwrap.dedent(
            """\
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: ${instance.name}-config
            data:
              version: ${app.version}
            """
        )
        for name in ("add-index", "backfill", "drop-legacy", "release"):
            if f"name: {name}\n" in migrations:
                files[f"{root}/migrations/{name}.yaml"] = job(name, fail=fail.get(name, False))
                files[f"{root}/migrations/undo-{name}.yaml"] = job(f"undo-{name}-{key}")
    return files


def global_migration_files() -> dict[str, str | bytes | None]:
    """``ledger_files`` with books at 1.5.0, whose global pre migration registers schemas."""
    files = ledger_files()
    files["apps/ledger/versions/1.5.0/version.yaml"] = version_yaml(
        "1.5.0",
        "  - name: register-schemas\n    phase: pre\n    scope: global\n"
        "    job: migrations/register-schemas.yaml\n    timeoutSeconds: 30\n",
    )
    files["apps/ledger/versions/1.5.0/migrations/register-schemas.yaml"] = job("register-schemas")
    files["clusters/prod/instances/books.yaml"] = instance("1.5.0")
    return files


def instance(version: str) -> str:
    return (
        "apiVersion: reconciler/v1\nkind: Instance\nname: books\napp: ledger\n"
        f'version: "{version}"\nnamespace: {NS}\n'
    )


MARK = "zz-watch-mark-"


class JobLog:
    """Every Job created in ``namespace``, in creation order, from a Kubernetes watch.

    A succeeded migration Job is deleted in the pass that ran it, so a list after
    the pass cannot show it: the watch saw it created. Before each read, a mark is
    created and deleted (a suspended Job, which starts no pod on a real cluster,
    https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job,
    nor in the sandbox), and the read waits until the watch delivers its deletion:
    events come in order, so every Job created before the mark has been seen.
    """

    def __init__(self, client: KubeClient, kubeconfig: Path, namespace: str) -> None:
        self.created: list[dict[str, Any]] = []
        self.latest: dict[str, dict[str, Any]] = {}  # name -> its last state, even once deleted
        self.client, self.namespace = client, namespace
        self._marks: list[str] = []
        self.watched = Watched(kubeconfig, "Job", namespace, self._seen)

    def _seen(self, event: Event, jobs: Any) -> None:
        if event.name.startswith(MARK):
            self._marks.append(f"{event.type} {event.name}")
        elif event.type == "ADDED":
            self.created.append(event.obj)
        if event.type in ("ADDED", "MODIFIED"):
            self.latest[str(event.obj["metadata"]["name"])] = event.obj

    def _sync(self) -> None:
        ns = ObjectRef("v1", "Namespace", "", self.namespace)
        if self.client.get(ns) is None:  # nothing can be created in it: a list is enough
            self.watched.caught_up()
            return
        name = f"{MARK}{len(self._marks)}"
        ref = ObjectRef("batch/v1", "Job", self.namespace, name)
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "mark", "image": "busybox:1.36"}],
                    }
                },
            },
        }
        path = self.client.object_path(ref).rsplit("/", 1)[0]
        self.client.request("POST", path, subject=str(ref), verb="create", body=body)
        self.client.delete(ref)
        deadline = time.monotonic() + 60
        while f"DELETED {name}" not in self._marks:
            assert self.watched.error is None, self.watched.error
            assert time.monotonic() < deadline, f"the Job watch never delivered {name}"
            time.sleep(0.01)

    def names(self) -> list[str]:
        self._sync()
        return [str(j["metadata"]["name"]) for j in self.created]


@dataclass
class Cluster:
    """A catalog repository, a cluster and a daemon with the test's Python migrations.

    ``sandbox`` is None on a real cluster, where every namespace ends in ``suffix``.
    """

    repo: CatalogRepo
    sandbox: SandboxHandle | None
    client: KubeClient
    daemon: Daemon
    jobs: JobLog
    suffix: str = ""

    @property
    def ns(self) -> str:
        """The instances' namespace (``NS`` of the catalog) in this test's cluster."""
        return f"{NS}{self.suffix}"

    @property
    def name(self) -> str:
        """The catalog's cluster ``prod`` as this test names it (the daemon's ``--cluster``)."""
        return f"prod{self.suffix}"

    def path(self, rel: str) -> str:
        """Where catalog file ``rel`` (``clusters/prod/...``) is in this test's catalog."""
        return suffix_path(rel, self.suffix)

    def commit(self, rel: str, text: str, message: str) -> None:
        text = suffix_namespaces(rel, text, self.suffix)
        commit_file(self.repo, self.path(rel), text, message)

    def upgrade(self, version: str) -> PassOutcome:
        self.commit("clusters/prod/instances/books.yaml", instance(version), version)
        return self.daemon.run_pass()

    def jobs_created(self) -> list[str]:
        return self.jobs.names()

    def ledger(self) -> list[tuple[str, str, str, str]]:
        return [(r.name, r.phase, r.version, r.outcome) for r in self.records()]

    def records(self) -> tuple[MigrationRecord, ...]:
        cm = self.client.get(ObjectRef("v1", "ConfigMap", self.ns, "reconciler-migrations-books"))
        return () if cm is None else ledger_from_configmap(cm).records

    def shape(self, *names: str) -> None:
        """Put the cluster in the shape the named migrations would leave it in."""
        self.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})
        for name in names:
            meta = {"name": f"books-{name}", "namespace": self.ns}
            self.client.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})


# Scenarios only the sandbox can play (tests/lanes.py): the [real] variant is skipped
SIMULATED_DURATION = "needs the sandbox's simulated Job duration"
simulated_duration = pytest.mark.sandbox_lane_only(SIMULATED_DURATION)
MADE_UP_DIGEST = "the pinned digest is made up: a real node could not pull it"


@pytest.fixture(params=LANES)
def make_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``make_cluster(name, files, **fail)``: a fresh cluster; ``fail`` names Jobs whose
    pods fail, ``files`` replaces the catalog's (``ledger_files(**fail)``).

    On the sandbox lane each call starts a sandbox; on the real lane every call
    shares the cluster, with this test's namespace suffix (the reconciler's own
    namespace too: it holds the global ledger), all deleted afterwards.
    """
    samples.RUNS.clear()
    real = request.param == "real"
    kubeconfig = real_kubeconfig() if real else None
    suffix = new_suffix() if real else ""
    with ExitStack() as stack:

        def make(
            name: str = "a",
            files: dict[str, str | bytes | None] | None = None,
            *,
            timing: Timing = FAST,
            grace: float = GRACE,
            **fail: bool,
        ) -> Cluster:
            catalog = ledger_files(**fail) if files is None else files
            source = write_catalog(tmp_path / name / "template", catalog, suffix=suffix)
            repo = catalog_repo(source, tmp_path / name / "repos")
            if real and timing != FAST:
                # how long a Job runs is the sandbox's to simulate; a real node runs the
                # image as it is, so these scenarios belong to the sandbox lane
                # (the mark skips them first; an unmarked one fails here, in the lane)
                pytest.skip(SIMULATED_DURATION)
            sandbox = None if real else stack.enter_context(running_sandbox(timing=timing))
            config = kubeconfig or sandbox.kubeconfig  # type: ignore[union-attr]
            client = stack.enter_context(KubeClient.connect(str(config)))
            settings = DaemonSettings(
                repo=repo.url,
                cluster=f"prod{suffix}",
                health_timeout=10.0,
                health_grace=grace,
                cache_dir=tmp_path / name / "cache",
                backoff_base=600.0,
                leader_namespace=f"reconciler-system{suffix}",
            )
            daemon = Daemon(settings, client, metrics=DaemonMetrics(), registry=REGISTRY)
            jobs = JobLog(client, Path(config), f"{NS}{suffix}")
            stack.callback(jobs.watched.stop)
            return Cluster(repo, sandbox, client, daemon, jobs, suffix)

        if real:
            assert kubeconfig is not None
            cleaner = stack.enter_context(KubeClient.connect(kubeconfig))
            stack.callback(lambda: delete_namespaces(cleaner, namespaces_ending(cleaner, suffix)))
        yield make


def subjects(outcome: PassOutcome, instance: str = "books") -> list[str]:
    return [c.subject for c in outcome.commits if c.instance == instance]


@pytest.mark.slow
def test_an_upgrade_through_four_versions_runs_each_migration_exactly_once(
    make_cluster: Any,
) -> None:
    cluster: Cluster = make_cluster()
    first = cluster.daemon.run_pass()
    assert first.ok, first
    assert subjects(first) == [f"{cluster.name}/books: ledger 1.4.0 (Ready)"]  # 1.4.0 ships none

    step = cluster.upgrade("1.5.0")
    assert step.ok, step
    assert subjects(step) == [
        f"{cluster.name}/books: migration add-index (pre, 1.5.0) succeeded in "
        + _took(step, "add-index"),
        f"{cluster.name}/books: upgraded ledger 1.4.0 -> 1.5.0 (Ready)",
    ]
    step = cluster.upgrade("2.0.0")
    assert step.ok, step
    assert [s.split(" in ")[0] for s in subjects(step)] == [
        f"{cluster.name}/books: migration split-totals (pre, 2.0.0) succeeded",
        f"{cluster.name}/books: upgraded ledger 1.5.0 -> 2.0.0 (Ready)",
        f"{cluster.name}/books: migration backfill (post, 2.0.0) succeeded",
    ]
    step = cluster.upgrade("2.0.1")
    assert step.ok, step
    assert cluster.jobs_created() == ["books-add-index", "books-backfill", "books-drop-legacy"]
    assert samples.RUNS == [("run", "books", "split-totals", "2.0.0")]
    assert cluster.ledger() == [
        ("add-index", "pre", "1.5.0", "succeeded"),
        ("split-totals", "pre", "2.0.0", "succeeded"),
        ("backfill", "post", "2.0.0", "succeeded"),
        ("drop-legacy", "pre", "2.0.1", "succeeded"),
    ]
    # the succeeded Jobs are gone; the instance runs 2.0.1 and its status holds the ledger
    assert cluster.client.list("batch/v1", "Job", namespace=cluster.ns) == []
    status = cluster.daemon.ledger.read()["books"]
    assert (status.version, status.phase) == ("2.0.1", Phase.READY)
    assert [m["name"] for m in status.migrations or ()] == [
        "add-index",
        "split-totals",
        "backfill",
        "drop-legacy",
    ]
    assert status.migrations is not None and status.migrations[-1]["fromVersion"] == "2.0.0"
    metrics = cluster.daemon.metrics.render().decode()
    assert (
        'reconciler_migration_duration_seconds_count{migration="drop-legacy",'
        'outcome="succeeded",phase="pre"} 1.0' in metrics
    )

    # a pass with nothing new runs nothing, writes nothing and commits nothing
    if cluster.sandbox is not None:
        cluster.daemon.flush_events()  # the last pass's Events are not this pass's writes
        cluster.sandbox.reset_request_log()
    again = cluster.daemon.run_pass()
    assert again.ok and again.commits == []
    if cluster.sandbox is not None:  # the request log is the sandbox's
        assert not [e for e in cluster.sandbox.request_log() if e.verb not in ("get", "list")]


def _took(outcome: PassOutcome, name: str) -> str:
    assert outcome.report is not None
    run = next(e for e in outcome.report.migrations if e.record.name == name)
    seconds = run.record.duration
    return f"{seconds:.1f}s" if seconds >= 0.1 else f"{seconds * 1000:.0f}ms"


def test_a_cluster_already_in_shape_runs_nothing_and_records_why(
    make_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster: Cluster = make_cluster()
    cluster.shape("add-index", "split-totals", "backfill", "drop-legacy")
    assert cluster.daemon.run_pass().ok
    for version in ("1.5.0", "2.0.0", "2.0.1"):
        assert cluster.upgrade(version).ok
    assert cluster.jobs_created() == [] and samples.RUNS == []
    assert [(name, outcome) for name, _, _, outcome in cluster.ledger()] == [
        ("add-index", "notNeeded"),
        ("split-totals", "notNeeded"),
        ("backfill", "notNeeded"),
        ("drop-legacy", "notNeeded"),
    ]
    log = [c for c in cluster.daemon.ledger.history("books") if "migration" in c.summary]
    assert log[-1].summary == (
        f"migration add-index (pre, 1.5.0) not needed: ConfigMap/{cluster.ns}/books-add-index exists"
    )
    # ``reconciler migrations`` lists the ledger from Git
    capsys.readouterr()
    argv = ["migrations", "--repo", cluster.repo.url, "--cluster", cluster.name, "books"]
    assert main([*argv, "--output", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["instance"], r["name"], r["version"], r["outcome"]) for r in rows] == [
        ("books", "add-index", "1.5.0", "notNeeded"),
        ("books", "split-totals", "2.0.0", "notNeeded"),
        ("books", "backfill", "2.0.0", "notNeeded"),
        ("books", "drop-legacy", "2.0.1", "notNeeded"),
    ]


def test_a_failed_pre_migration_applies_nothing_and_backs_off_until_a_fix(
    make_cluster: Any,
) -> None:
    cluster: Cluster = make_cluster(**{"add-index": True})
    assert cluster.daemon.run_pass().ok
    step = cluster.upgrade("1.5.0")
    status = cluster.daemon.ledger.read()["books"]
    assert (status.phase, status.reason, status.version) == (
        Phase.STALLED,  # SPEC section 5: Stalled, MigrationFailed, retried with backoff
        "MigrationFailed",
        "1.4.0",
    )
    assert (
        status.message.startswith("migration add-index (pre, 1.5.0) failed after ")
        and "nothing of ledger 1.5.0 was applied" in status.message
    )
    assert f"Job/{cluster.ns}/books-add-index failed (BackoffLimitExceeded" in status.message
    assert "add-index of ledger 1.5.0" in status.message  # the tail of the pod's log
    config = cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config"))
    assert config is not None and config["data"]["version"] == "1.4.0"  # nothing of 1.5.0
    assert (
        cluster.client.get(ObjectRef("batch/v1", "Job", cluster.ns, "books-add-index")) is not None
    )
    assert subjects(step)[0].startswith(
        f"{cluster.name}/books: migration add-index (pre, 1.5.0) failed"
    )
    assert len(subjects(step)) == 1  # the failure is the run's commit; nothing else changed
    trailers = cluster.daemon.ledger.history("books")[0]
    assert trailers.phase == "Stalled"
    assert cluster.daemon.ledger.read()["cards"].phase is Phase.READY  # the others go on

    # backing off: the next pass leaves it alone (no new Job, no commit)
    held = cluster.daemon.run_pass()
    assert subjects(held) == [] and cluster.jobs_created() == ["books-add-index"]

    # a fixed Job is a new input: retried at once, then the upgrade goes through
    commit_file(
        cluster.repo,
        "apps/ledger/versions/1.5.0/migrations/add-index.yaml",
        job("add-index"),
        "fix",
    )
    fixed = cluster.daemon.run_pass()
    assert fixed.ok, fixed
    assert cluster.jobs_created() == ["books-add-index", "books-add-index"]
    assert [r[3] for r in cluster.ledger()] == ["failed", "succeeded"]
    assert cluster.daemon.ledger.read()["books"].version == "1.5.0"


@pytest.mark.slow
def test_removing_an_instance_undoes_each_migration_from_the_version_that_applied_it(
    make_cluster: Any,
) -> None:
    cluster: Cluster = make_cluster()
    assert cluster.daemon.run_pass().ok
    for version in ("1.5.0", "2.0.0", "2.0.1"):
        assert cluster.upgrade(version).ok
    before = len(cluster.jobs_created())
    remove_file(cluster.repo, cluster.path("clusters/prod/instances/books.yaml"), "remove books")
    gone = cluster.daemon.run_pass()
    assert gone.ok, gone
    # uninstall migrations first, then the undo of each applied one, newest first,
    # each rendered from its own version (the undo Job's name carries it)
    assert cluster.jobs_created()[before:] == [
        "books-release",
        "books-undo-drop-legacy-2.0.1",
        "books-undo-backfill-2.0.0",
        "books-undo-add-index-1.5.0",
    ]
    assert samples.RUNS[-1] == ("undo", "books", "split-totals", "None")  # python, 2.0.0's
    status = cluster.daemon.ledger.read().get("books")
    assert status is None or status.phase is Phase.REMOVED
    removed = [c.subject for c in gone.commits if c.instance == "books"]
    assert removed[0].startswith(
        f"{cluster.name}/books: migration release (uninstall, 2.0.1) succeeded"
    )
    assert [s.split(" succeeded")[0] for s in removed[1:5]] == [
        f"{cluster.name}/books: migration drop-legacy (undo, 2.0.1)",
        f"{cluster.name}/books: migration backfill (undo, 2.0.0)",
        f"{cluster.name}/books: migration split-totals (undo, 2.0.0)",
        f"{cluster.name}/books: migration add-index (undo, 1.5.0)",
    ]
    assert removed[-1].startswith(f"{cluster.name}/books: removed (")
    # pruned, and the ledger went with it: a new install starts afresh
    assert cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config")) is None
    ledger = ObjectRef("v1", "ConfigMap", cluster.ns, "reconciler-migrations-books")
    assert cluster.client.get(ledger) is None


@pytest.mark.slow
def test_a_failed_uninstall_migration_keeps_the_instance_for_a_retry(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(release=True)
    cluster.shape("add-index", "split-totals", "backfill", "drop-legacy")
    assert cluster.upgrade("2.0.1").ok  # a fresh install of 2.0.1, already in shape
    remove_file(cluster.repo, cluster.path("clusters/prod/instances/books.yaml"), "remove books")
    stuck = cluster.daemon.run_pass()
    status = next(s for s in stuck.report.statuses if s.instance == "books")  # type: ignore[union-attr]
    assert (status.phase, status.reason) == (Phase.FAILED, "MigrationFailed")
    assert status.message.startswith("migration release (uninstall, 2.0.1) failed")
    assert cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config")) is not None
    # backing off: the next pass leaves it alone (no new Job, no commit)
    held = cluster.daemon.run_pass()
    assert subjects(held) == [] and cluster.jobs_created() == ["books-release"]
    assert cluster.daemon.next_retry_in() is not None
    # a new commit may hold the fix: the uninstall is tried again at once; nothing was
    # applied by any migration, so nothing is undone
    commit_file(cluster.repo, "README.md", "a new catalog commit\n", "touch")
    cluster.daemon.run_pass()
    assert cluster.jobs_created() == ["books-release", "books-release"]


def test_global_pre_migrations_run_once_for_all_instances_that_change(
    make_cluster: Any,
) -> None:
    """Two instances move to a version with a global pre migration in one pass."""
    files = global_migration_files()
    files["clusters/prod/instances/cards.yaml"] = instance("1.5.0").replace("books", "cards")
    cluster: Cluster = make_cluster(files=files)
    outcome = cluster.daemon.run_pass()
    assert outcome.ok, outcome
    assert cluster.jobs_created() == ["books-register-schemas"]  # for the first to change
    env = cluster.jobs.created[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    values = {e["name"]: e["value"] for e in env}
    assert values["RECONCILER_INSTANCE"] == "" and values["RECONCILER_PHASE"] == "pre"
    components = json.loads(values["RECONCILER_COMPONENTS"])  # every instance this pass installs
    assert {c["instance"] for c in components} == {"books", "cards"}
    assert {"instance": "cards", "app": "ledger", "from": None, "to": "1.5.0"} in components
    selector = "reconciler.dev/migrations=global"
    found = cluster.client.list("v1", "ConfigMap", label_selector=selector)
    cm = [c for c in found if c["metadata"]["namespace"].endswith(cluster.suffix)]  # this test's
    assert [c["metadata"]["name"] for c in cm] == ["reconciler-migrations--global"]
    assert cm[0]["metadata"]["namespace"] == f"reconciler-system{cluster.suffix}"
    assert [r.name for r in ledger_from_configmap(cm[0]).records] == ["register-schemas"]
    statuses = cluster.daemon.ledger.read()
    assert [m["scope"] for m in statuses["books"].migrations or ()] == ["global"]
    assert statuses["cards"].migrations is None


@pytest.mark.slow
def test_a_failed_post_migration_leaves_the_new_version_running_and_stalled(
    make_cluster: Any,
) -> None:
    cluster: Cluster = make_cluster(backfill=True)
    cluster.shape("split-totals")
    assert cluster.upgrade("1.5.0").ok
    step = cluster.upgrade("2.0.0")
    status = cluster.daemon.ledger.read()["books"]
    assert (status.phase, status.reason, status.version) == (
        Phase.STALLED,
        "MigrationFailed",
        "2.0.0",
    )
    assert status.message.startswith("migration backfill (post, 2.0.0) failed after ")
    assert status.message.endswith("; 2.0.0 keeps running")
    config = cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config"))
    assert config is not None and config["data"]["version"] == "2.0.0"
    assert [s.split(": ")[1].split(" (")[0] for s in subjects(step)] == [
        "migration split-totals",  # not needed: the cluster is in shape for it
        "upgraded ledger 1.5.0 -> 2.0.0",
        "migration backfill",
    ]
    # backing off like a failure; a fixed Job is a new input and is retried at once
    assert subjects(cluster.daemon.run_pass()) == []
    fixed_job = job("backfill")
    commit_file(
        cluster.repo, "apps/ledger/versions/2.0.0/migrations/backfill.yaml", fixed_job, "fix"
    )
    fixed = cluster.daemon.run_pass()
    assert fixed.ok, fixed
    assert cluster.jobs_created().count("books-backfill") == 2
    assert [r[3] for r in cluster.ledger() if r[0] == "backfill"] == ["failed", "succeeded"]
    assert cluster.daemon.ledger.read()["books"].phase is Phase.READY


def test_post_migrations_a_version_gained_later_run_once_the_instance_is_healthy_there(
    make_cluster: Any,
) -> None:
    """Post migrations are due while unsettled, not only in the pass that changed the
    version: an instance that was not healthy in time, or that predates the hook."""
    cluster: Cluster = make_cluster()
    without = version_yaml("2.0.0", ADD_INDEX + SPLIT_TOTALS)
    commit_file(cluster.repo, "apps/ledger/versions/2.0.0/version.yaml", without, "no backfill")
    assert cluster.upgrade("2.0.0").ok
    assert "books-backfill" not in cluster.jobs_created()
    full = version_yaml("2.0.0", SHIPPED["2.0.0"])
    commit_file(cluster.repo, "apps/ledger/versions/2.0.0/version.yaml", full, "backfill")
    later = cluster.daemon.run_pass()
    assert later.ok, later
    assert subjects(later)[0].startswith(
        f"{cluster.name}/books: migration backfill (post, 2.0.0) succeeded"
    )
    assert cluster.jobs_created().count("books-backfill") == 1
    assert subjects(cluster.daemon.run_pass()) == []  # settled: never again


# A migration Job that runs for 1.5 s; a pass gives Jobs 0.2 s (its health grace).
# 1.5 s where the test checks the recorded duration (whole seconds) is at least one.
SLOW = Timing(
    pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.02, job_duration=1.5
)
# A Job that outlives the 0.2 s grace five times over, for the tests that need it only
# to be still running after the pass that starts it (every later pass waits for its end)
RUNNING = Timing(
    pod_grace_scale=TEST_GRACE_SCALE, controller_delay=0.01, pod_start=0.02, job_duration=1.0
)


# The longest pause between two looks at a running Job, as ``reconciler run --max-look
# 0.2`` would make it: the daemon asks for its next look a second later (MIGRATION_LOOK),
# which left up to a second between the Job's end and the pass that sees it.
MAX_LOOK = 0.2


def look_again(cluster: Cluster, last: PassOutcome) -> PassOutcome:
    """The daemon's next pass, after the pause the last one asked for (its ``next_look``)
    or ``MAX_LOOK`` when that is shorter, as the service schedules it."""
    assert last.report is not None and last.report.next_look is not None
    time.sleep(min(last.report.next_look, MAX_LOOK))
    return cluster.daemon.run_pass()


def statuses_of(outcome: PassOutcome) -> dict[str, Any]:
    assert outcome.report is not None
    return {s.instance: s for s in outcome.report.statuses}


@simulated_duration
def test_a_slow_pre_migration_job_holds_only_its_own_instance_across_passes(
    make_cluster: Any,
) -> None:
    """Nothing waits in line: books's pre migration Job outlives the pass's grace, cards
    moves in that same pass; later passes observe the Job (never a second one, never its
    check again) and books is upgraded when it ends, recorded with the Job's own duration."""
    cluster: Cluster = make_cluster(timing=SLOW, grace=0.2)
    assert cluster.daemon.run_pass().ok
    for path, text in {
        "apps/ledger/versions/1.4.1/version.yaml": version_yaml("1.4.1", ""),
        "apps/ledger/versions/1.4.1/manifests/config.yaml": ledger_files()[
            "apps/ledger/versions/1.4.0/manifests/config.yaml"
        ],
        "clusters/prod/instances/cards.yaml": instance("1.4.1").replace("books", "cards"),
    }.items():
        assert isinstance(text, str)
        commit_file(cluster.repo, path, text, f"add {path}")

    first = cluster.upgrade("1.5.0")
    books, cards = statuses_of(first)["books"], statuses_of(first)["cards"]
    assert (cards.phase, cards.version) == (Phase.READY, "1.4.1")  # not held by books's Job
    assert subjects(first, "cards") == [
        f"{cluster.name}/cards: upgraded ledger 1.4.0 -> 1.4.1 (Ready)"
    ]
    assert (books.phase, books.reason, books.version) == (Phase.PROGRESSING, "Migrating", "1.4.0")
    assert books.message.startswith(
        f"migration add-index (pre, 1.5.0) is running: Job/{cluster.ns}/books-add-index"
    )
    assert subjects(first) == [
        f"{cluster.name}/books: moving ledger 1.4.0 -> 1.5.0 (Progressing: Migrating)"
    ]
    assert cluster.records() == ()  # nothing recorded for a run that has not ended
    config = cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config"))
    assert config is not None and config["data"]["version"] == "1.4.0"  # nothing of 1.5.0
    # the Job does its work: the state its check reads now says "done". A later pass must
    # not run the check again (it would record "not needed"): it waits for the Job.
    cluster.shape("add-index")

    last = first
    for _ in range(30):
        last = look_again(cluster, last)
        if statuses_of(last)["books"].phase is not Phase.PROGRESSING:
            break
        assert cluster.records() == () and subjects(last) == []  # the same record: no commit
    assert cluster.jobs_created() == ["books-add-index"]  # taken over, never started twice
    books = statuses_of(last)["books"]
    assert (books.phase, books.version) == (Phase.READY, "1.5.0")
    assert subjects(last) == [
        f"{cluster.name}/books: migration add-index (pre, 1.5.0) succeeded in "
        + _took(last, "add-index"),
        f"{cluster.name}/books: upgraded ledger 1.4.0 -> 1.5.0 (Ready)",
    ]
    (record,) = cluster.records()
    assert (record.name, record.outcome, record.check_duration) == ("add-index", "succeeded", 0.0)
    # its duration is the Job's own (status.startTime to completionTime), not a pass's wait
    span = job_span(cluster.jobs.latest["books-add-index"])
    assert span is not None and (record.started_at, record.duration) == span
    assert record.duration >= 1.0
    assert cluster.client.get(ObjectRef("batch/v1", "Job", cluster.ns, "books-add-index")) is None


@simulated_duration
def test_a_slow_uninstall_job_keeps_the_removal_pending_until_it_ends(make_cluster: Any) -> None:
    """An uninstall migration's Job outlives the pass: the instance is Progressing/
    Uninstalling with every object kept, not failed (no backoff), until a later pass
    sees the Job end; then the removal goes on."""
    cluster: Cluster = make_cluster(timing=RUNNING, grace=0.2)
    cluster.shape("add-index", "split-totals", "backfill", "drop-legacy")
    assert cluster.upgrade("2.0.1").ok  # installed in shape: no Job runs, nothing to undo
    remove_file(cluster.repo, cluster.path("clusters/prod/instances/books.yaml"), "remove books")
    first = cluster.daemon.run_pass()
    books = statuses_of(first)["books"]
    assert (books.phase, books.reason, books.version) == (
        Phase.PROGRESSING,
        "Uninstalling",
        "2.0.1",
    )
    assert f"Job/{cluster.ns}/books-release" in books.message
    assert cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config")) is not None
    assert cluster.daemon.next_retry_in() is None  # not a failure: nothing backs off

    last = first
    for _ in range(30):
        last = look_again(cluster, last)
        if statuses_of(last)["books"].phase is not Phase.PROGRESSING:
            break
        assert subjects(last) == []  # the same record while it runs: no commit
    assert cluster.jobs_created() == ["books-release"]
    assert statuses_of(last)["books"].phase is Phase.REMOVED
    removed = subjects(last)
    assert removed[0].startswith(
        f"{cluster.name}/books: migration release (uninstall, 2.0.1) succeeded"
    )
    assert removed[-1].startswith(f"{cluster.name}/books: removed (")
    assert cluster.client.get(ObjectRef("v1", "ConfigMap", cluster.ns, "books-config")) is None


@simulated_duration
def test_a_running_global_pre_migration_holds_only_the_instances_that_change(
    make_cluster: Any,
) -> None:
    """A global pre Job still running holds books's upgrade (as a failed one would, but
    Progressing); cards, unchanged, is still kept in sync in the same pass."""
    files = ledger_files()
    files["apps/ledger/versions/1.5.0/version.yaml"] = version_yaml(
        "1.5.0",
        ADD_INDEX + "  - name: register-schemas\n    phase: pre\n    scope: global\n"
        "    job: migrations/register-schemas.yaml\n    timeoutSeconds: 30\n",
    )
    files["apps/ledger/versions/1.5.0/migrations/register-schemas.yaml"] = job("register-schemas")
    cluster: Cluster = make_cluster(timing=RUNNING, grace=0.2, files=files)
    cluster.shape("add-index")  # books's own pre migration has nothing to do
    assert cluster.daemon.run_pass().ok
    drifted = {"name": "cards-config", "namespace": NS}
    cluster.client.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": drifted, "data": {"version": "x"}},
        force=True,
    )

    first = cluster.upgrade("1.5.0")
    books, cards = statuses_of(first)["books"], statuses_of(first)["cards"]
    assert (books.phase, books.reason, books.version) == (Phase.PROGRESSING, "Migrating", "1.4.0")
    assert books.message.startswith(
        f"global migration register-schemas (pre, 1.5.0) is running: Job/{NS}/books-register"
    )
    assert (cards.phase, cards.version) == (Phase.READY, "1.4.0")
    config = cluster.client.get(ObjectRef("v1", "ConfigMap", NS, "cards-config"))
    assert config is not None and config["data"]["version"] == "1.4.0"  # drift repaired
    assert cluster.records() == ()

    last = first
    for _ in range(30):
        last = look_again(cluster, last)
        if statuses_of(last)["books"].phase is not Phase.PROGRESSING:
            break
    assert cluster.jobs_created() == ["books-register-schemas"]
    assert (statuses_of(last)["books"].phase, statuses_of(last)["books"].version) == (
        Phase.READY,
        "1.5.0",
    )
    assert [(name, outcome) for name, _, _, outcome in cluster.ledger()] == [
        ("register-schemas", "succeeded"),
        ("add-index", "notNeeded"),
    ]
    assert subjects(last)[0].startswith(
        f"{cluster.name}/books: migration register-schemas (pre, 1.5.0) succeeded in "
    )
    assert subjects(last)[-1] == f"{cluster.name}/books: upgraded ledger 1.4.0 -> 1.5.0 (Ready)"


@simulated_duration
def test_a_slow_post_migration_job_is_observed_while_the_new_version_runs(
    make_cluster: Any,
) -> None:
    """A post Job outliving the pass leaves 2.0.0 running, Progressing/Migrating; a later
    pass records it (one commit: the run) and the instance is Ready."""
    cluster: Cluster = make_cluster(timing=RUNNING, grace=0.2)
    cluster.shape("add-index", "split-totals")
    assert cluster.upgrade("1.5.0").ok
    first = cluster.upgrade("2.0.0")
    books = statuses_of(first)["books"]
    assert (books.phase, books.reason, books.version) == (Phase.PROGRESSING, "Migrating", "2.0.0")
    assert books.message.startswith(
        f"migration backfill (post, 2.0.0) is running: Job/{cluster.ns}/books-backfill"
    )
    assert subjects(first)[-1] == (
        f"{cluster.name}/books: upgraded ledger 1.5.0 -> 2.0.0 (Progressing: Migrating)"
    )
    assert "backfill" not in [name for name, *_ in cluster.ledger()]

    last = first
    for _ in range(30):
        last = look_again(cluster, last)
        if statuses_of(last)["books"].phase is not Phase.PROGRESSING:
            break
    assert cluster.jobs_created() == ["books-backfill"]
    assert statuses_of(last)["books"].phase is Phase.READY
    assert [s.split(" in ")[0] for s in subjects(last)] == [
        f"{cluster.name}/books: migration backfill (post, 2.0.0) succeeded"
    ]
    assert cluster.ledger()[-1] == ("backfill", "post", "2.0.0", "succeeded")


@pytest.mark.sandbox_lane_only(MADE_UP_DIGEST)
def test_a_migration_job_runs_the_build_its_version_pins(make_cluster: Any) -> None:
    """SPEC section 8: a version's ``${images.NAME}`` is its pinned build everywhere it is
    rendered, its migration Jobs too; the intermediate tag would run whatever was pushed
    under it last."""
    files = ledger_files()
    digest = "sha256:" + "3" * 64
    files["apps/ledger/versions/1.5.0/version.yaml"] = str(
        files["apps/ledger/versions/1.5.0/version.yaml"]
    ).replace(
        "parameters:", "images:\n  tool: registry.example/ledger/tool:1.5.0-rev1\nparameters:"
    )
    files["apps/ledger/versions/1.5.0/migrations/add-index.yaml"] = job("add-index").replace(
        "image: busybox:1.36", "image: ${images.tool}"
    )
    files["apps/ledger/builds.yaml"] = (
        "apiVersion: reconciler/v1\nkind: ImageBuilds\napp: ledger\nbuilds:\n"
        f"  1.5.0:\n    tool: {{tag: 1.5.0-rev1-b3, digest: '{digest}'}}\n"
    )
    cluster: Cluster = make_cluster(files=files)
    if cluster.sandbox is None:
        pytest.skip(MADE_UP_DIGEST)
    assert cluster.daemon.run_pass().ok
    cluster.upgrade("1.5.0")
    (created,) = [j for j in cluster.jobs.created if j["metadata"]["name"] == "books-add-index"]
    image = created["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"registry.example/ledger/tool:1.5.0-rev1-b3@{digest}"


def test_a_cluster_read_per_namespace_finds_its_global_ledger_with_a_get(
    make_cluster: Any,
) -> None:
    """Plain ``allowedNamespaces``: the pass lists only ``team-fin``, and the global
    ledger in the reconciler's own namespace is read with one GET, not with a list
    across all namespaces (which a tenant's RBAC refuses): the migration runs once."""
    files = global_migration_files()
    files["clusters/prod/cluster.yaml"] = (
        f"apiVersion: reconciler/v1\nkind: Cluster\nname: prod\nallowedNamespaces: [{NS}]\n"
    )
    cluster: Cluster = make_cluster(files=files)
    assert cluster.daemon.run_pass().ok
    assert cluster.jobs_created() == ["books-register-schemas"]
    # through cluster.commit: on a real cluster the namespace carries the test's suffix
    cluster.commit(
        "clusters/prod/instances/cards.yaml",
        instance("1.5.0").replace("books", "cards"),
        "cards joins at 1.5.0",
    )
    outcome = cluster.daemon.run_pass()
    assert outcome.ok, outcome
    assert cluster.jobs_created() == ["books-register-schemas"]  # recorded: not run again
    if cluster.sandbox is not None:
        spanning = [
            e.path
            for e in cluster.sandbox.request_log()
            if e.verb in ("list", "watch")
            and e.path.endswith("/configmaps")
            and "/namespaces/" not in e.path
        ]
        assert spanning == []
