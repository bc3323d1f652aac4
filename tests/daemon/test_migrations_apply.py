"""``reconciler apply`` runs migration hooks as the daemon does, and refuses to guess.

The same ``ledger`` catalog as ``test_migrations``, on disk, applied once per call
against the sandbox: fast enough to walk through the bad inputs one by one. Each
runs in the ``real_cluster`` lane too (tests/lanes.py), in namespaces of its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from tests.daemon.test_migrations import NS, JobLog, instance, job, ledger_files, version_yaml
from tests.factories import write_catalog
from tests.lanes import (
    LANES,
    delete_namespaces,
    namespaces_ending,
    new_suffix,
    real_kubeconfig,
    skip_cluster_holds,
    suffix_namespaces,
    suffix_path,
)


@dataclass
class Target:
    """The cluster of one test: a sandbox, or a real one where namespaces end in ``suffix``."""

    kubeconfig: Path
    client: KubeClient
    stack: ExitStack
    suffix: str = ""

    def ns(self, base: str = NS) -> str:
        return f"{base}{self.suffix}"

    def catalog(self, root: Path, files: dict[str, str | bytes | None]) -> Path:
        return write_catalog(root, files, suffix=self.suffix)

    @property
    def cluster(self) -> str:
        """The catalog's cluster ``prod`` as this test names it (``--cluster``)."""
        return f"prod{self.suffix}"

    def write(self, path: Path, rel: str, text: str) -> None:
        """Write catalog file ``rel`` under ``path`` with this test's names."""
        (path / suffix_path(rel, self.suffix)).write_text(suffix_namespaces(rel, text, self.suffix))

    def jobs(self) -> JobLog:
        log = JobLog(self.client, self.kubeconfig, self.ns())
        self.stack.callback(log.watched.stop)
        return log


@pytest.fixture(params=LANES)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    with ExitStack() as stack:
        if request.param == "sandbox":
            kubeconfig, suffix = request.getfixturevalue("sandbox").kubeconfig, ""
        else:
            kubeconfig, suffix = real_kubeconfig(), new_suffix()
        client = stack.enter_context(KubeClient.connect(str(kubeconfig)))
        if suffix:
            stack.callback(lambda: delete_namespaces(client, namespaces_ending(client, suffix)))
        yield Target(kubeconfig, client, stack, suffix)


class Apply:
    """A catalog on disk and ``reconciler apply`` against the test's cluster."""

    def __init__(self, root: Path, target: Target, capsys: pytest.CaptureFixture[str]) -> None:
        self.root, self.target, self.capsys = root, target, capsys
        self.jobs = target.jobs()

    def write(self, rel: str, text: str) -> None:
        self.target.write(self.root, rel, text)

    def __call__(self) -> tuple[int, str, str]:
        self.capsys.readouterr()
        kubeconfig = str(self.target.kubeconfig)
        code = main(
            ["apply", str(self.root), "--cluster", self.target.cluster, "--kubeconfig", kubeconfig]
        )
        out, err = self.capsys.readouterr()
        return code, out, err

    def config(self, name: str = "books") -> str | None:
        cm = self.target.client.get(
            ObjectRef("v1", "ConfigMap", self.target.ns(), f"{name}-config")
        )
        return None if cm is None else str(cm["data"]["version"])


def test_apply_runs_migrations_once_and_an_unregistered_one_fails_alone(
    tmp_path: Path, target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    """``reconciler apply`` runs the hooks too, and prints each run under its instance."""
    files = {**ledger_files(), "clusters/prod/instances/books.yaml": instance("1.5.0")}
    catalog = target.catalog(tmp_path / "catalog", files)
    argv = ["apply", str(catalog), "--cluster", target.cluster]
    argv += ["--kubeconfig", str(target.kubeconfig)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "books:\n  migration add-index (pre, 1.5.0) succeeded in " in out
    assert main(argv) == 0
    assert "migration" not in capsys.readouterr().out  # once only
    # split-totals names a Python migration not installed
    target.write(catalog, "clusters/prod/instances/books.yaml", instance("2.0.0"))
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "books: failed (MigrationFailed)" in out
    assert (
        'migration split-totals (pre, 2.0.0) failed after 0ms: python migration "counting"' in out
    )
    assert "is not registered" in err and "nothing of ledger 2.0.0 was applied" in err
    config = target.client.get(ObjectRef("v1", "ConfigMap", target.ns(), "books-config"))
    assert config is not None and config["data"]["version"] == "1.5.0"
    assert "cards:" in out  # the other instance was applied


WEB = """\
apiVersion: reconciler/v1
kind: Instance
name: web
app: podinfo
version: 6.6.0
namespace: web
parameters: {replicas: 1}
"""
GLOBAL = (
    "  - name: register-schemas\n    phase: pre\n    scope: global\n"
    "    job: migrations/register-schemas.yaml\n    timeoutSeconds: 30\n"
)


def test_a_failed_global_migration_stops_every_upgrade_while_the_rest_is_kept_in_sync(
    tmp_path: Path,
    target: Target,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    if target.suffix:  # `reconciler apply` keeps the global ledger in reconciler-system
        own = ObjectRef("v1", "Namespace", "", "reconciler-system")
        if target.client.get(own) is not None:
            reason = "reconciler-system exists: it may hold a real reconciler's ledger"
            skip_cluster_holds(request.node, reason)
        target.stack.callback(lambda: delete_namespaces(target.client, [own.name]))
    apply = Apply(target.catalog(tmp_path / "catalog", ledger_files()), target, capsys)
    apply.write("clusters/prod/instances/web.yaml", WEB)  # an instance with no migrations
    assert apply()[0] == 0
    apply.write("apps/ledger/versions/1.5.0/version.yaml", version_yaml("1.5.0", GLOBAL))
    (apply.root / "apps/ledger/versions/1.5.0/migrations").mkdir(exist_ok=True)
    apply.write(
        "apps/ledger/versions/1.5.0/migrations/register-schemas.yaml",
        job("register-schemas", fail=True),
    )
    for name in ("books", "cards"):
        apply.write(
            f"clusters/prod/instances/{name}.yaml", instance("1.5.0").replace("books", name)
        )
    # drift on an unchanged instance
    target.client.delete(ObjectRef("v1", "ConfigMap", target.ns("web"), "web-config"))
    code, out, err = apply()
    assert code == 1
    assert "books: failed (MigrationFailed)" in out and "cards: failed (MigrationFailed)" in out
    assert err.count("global migration register-schemas (pre, 1.5.0) failed after ") == 2
    assert "no upgrade runs in this pass" in err
    assert apply.jobs.names() == ["books-register-schemas"]  # tried once, for the first one
    assert apply.config("books") == apply.config("cards") == "1.4.0"
    assert target.client.get(ObjectRef("v1", "ConfigMap", target.ns("web"), "web-config"))


def test_an_unreadable_ledger_stops_the_change_instead_of_guessing(
    tmp_path: Path, target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    apply = Apply(target.catalog(tmp_path / "catalog", ledger_files()), target, capsys)
    assert apply()[0] == 0
    meta = {
        "name": "reconciler-migrations-books",
        "namespace": target.ns(),
        "labels": {"app.kubernetes.io/managed-by": "reconciler"},
    }
    target.client.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"ledger.json": "{"}}
    )
    apply.write("clusters/prod/instances/books.yaml", instance("1.5.0"))
    code, _, err = apply()
    assert code == 1
    assert (
        f"the migration ledger cannot be read: ConfigMap/{target.ns()}/reconciler-migrations-books: "
        "ledger.json is not JSON"
    ) in err
    assert apply.jobs.names() == [] and apply.config() == "1.4.0"


def test_a_migration_job_outside_the_allowed_namespaces_fails_alone(
    tmp_path: Path, target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = job("add-index").replace("metadata:\n", "metadata:\n  namespace: kube-system\n", 1)
    files = {
        **ledger_files(),
        "clusters/prod/instances/books.yaml": instance("1.5.0"),
        "apps/ledger/versions/1.5.0/migrations/add-index.yaml": elsewhere,
    }
    apply = Apply(target.catalog(tmp_path / "catalog", files), target, capsys)
    code, out, err = apply()
    assert code == 1 and "books: failed (MigrationFailed)" in out
    assert 'Job/kube-system/books-add-index: namespace "kube-system" is not allowed' in err
    assert apply.jobs.names() == [] and apply.config() is None


def test_an_uninstall_needs_every_version_its_ledger_names(
    tmp_path: Path, target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {**ledger_files(), "clusters/prod/instances/books.yaml": instance("1.5.0")}
    apply = Apply(target.catalog(tmp_path / "catalog", files), target, capsys)
    assert apply()[0] == 0  # add-index ran: the ledger says 1.5.0 applied it
    (apply.root / suffix_path("clusters/prod/instances/books.yaml", target.suffix)).unlink()
    shutil.rmtree(apply.root / "apps/ledger/versions/1.5.0")
    code, out, err = apply()
    assert code == 1 and "books: failed (MigrationFailed)" in out
    assert (
        'version 1.5.0 is not in the catalog, but the undo of migration "add-index" it '
        "applied needs it"
    ) in err
    assert apply.config() == "1.5.0"  # nothing was pruned
