"""``reconciler apply`` runs migration hooks as the daemon does, and refuses to guess.

The same ``ledger`` catalog as ``test_migrations``, on disk, applied once per call
against the sandbox: fast enough to walk through the bad inputs one by one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import SandboxHandle
from tests.daemon.test_migrations import NS, JobLog, instance, job, ledger_files, version_yaml
from tests.factories import write_catalog


class Apply:
    """A catalog on disk and ``reconciler apply`` against the sandbox."""

    def __init__(
        self, root: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.root, self.sandbox, self.capsys = root, sandbox, capsys
        self.jobs = JobLog(sandbox)

    def write(self, rel: str, text: str) -> None:
        (self.root / rel).write_text(text)

    def __call__(self) -> tuple[int, str, str]:
        self.capsys.readouterr()
        kubeconfig = str(self.sandbox.kubeconfig)
        code = main(["apply", str(self.root), "--cluster", "prod", "--kubeconfig", kubeconfig])
        out, err = self.capsys.readouterr()
        return code, out, err

    def config(self, name: str = "books") -> str | None:
        with KubeClient.connect(str(self.sandbox.kubeconfig)) as client:
            cm = client.get(ObjectRef("v1", "ConfigMap", NS, f"{name}-config"))
        return None if cm is None else str(cm["data"]["version"])


def test_apply_runs_migrations_once_and_an_unregistered_one_fails_alone(
    tmp_path: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    """``reconciler apply`` runs the hooks too, and prints each run under its instance."""
    files = {**ledger_files(), "clusters/prod/instances/books.yaml": instance("1.5.0")}
    catalog = write_catalog(tmp_path / "catalog", files)
    argv = ["apply", str(catalog), "--cluster", "prod", "--kubeconfig", str(sandbox.kubeconfig)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "books:\n  migration add-index (pre, 1.5.0) succeeded in " in out
    assert main(argv) == 0
    assert "migration" not in capsys.readouterr().out  # once only
    version = catalog / "clusters/prod/instances/books.yaml"
    version.write_text(instance("2.0.0"))  # split-totals names a Python migration not installed
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "books: failed (MigrationFailed)" in out
    assert (
        'migration split-totals (pre, 2.0.0) failed after 0ms: python migration "counting"' in out
    )
    assert "is not registered" in err and "nothing of ledger 2.0.0 was applied" in err
    with KubeClient.connect(str(sandbox.kubeconfig)) as client:
        config = client.get(ObjectRef("v1", "ConfigMap", NS, "books-config"))
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
    tmp_path: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    apply = Apply(write_catalog(tmp_path / "catalog", ledger_files()), sandbox, capsys)
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
    with KubeClient.connect(str(sandbox.kubeconfig)) as client:  # drift on an unchanged instance
        client.delete(ObjectRef("v1", "ConfigMap", "web", "web-config"))
    code, out, err = apply()
    assert code == 1
    assert "books: failed (MigrationFailed)" in out and "cards: failed (MigrationFailed)" in out
    assert err.count("global migration register-schemas (pre, 1.5.0) failed after ") == 2
    assert "no upgrade runs in this pass" in err
    assert apply.jobs.names() == ["books-register-schemas"]  # tried once, for the first one
    assert apply.config("books") == apply.config("cards") == "1.4.0"
    with KubeClient.connect(str(sandbox.kubeconfig)) as client:
        assert client.get(ObjectRef("v1", "ConfigMap", "web", "web-config")) is not None


def test_an_unreadable_ledger_stops_the_change_instead_of_guessing(
    tmp_path: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    apply = Apply(write_catalog(tmp_path / "catalog", ledger_files()), sandbox, capsys)
    assert apply()[0] == 0
    with KubeClient.connect(str(sandbox.kubeconfig)) as client:
        meta = {
            "name": "reconciler-migrations-books",
            "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "reconciler"},
        }
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta,
                "data": {"ledger.json": "{"},
            }
        )
    apply.write("clusters/prod/instances/books.yaml", instance("1.5.0"))
    code, _, err = apply()
    assert code == 1
    assert (
        f"the migration ledger cannot be read: ConfigMap/{NS}/reconciler-migrations-books: "
        "ledger.json is not JSON"
    ) in err
    assert apply.jobs.names() == [] and apply.config() == "1.4.0"


def test_a_migration_job_outside_the_allowed_namespaces_fails_alone(
    tmp_path: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = job("add-index").replace("metadata:\n", "metadata:\n  namespace: kube-system\n", 1)
    files = {
        **ledger_files(),
        "clusters/prod/instances/books.yaml": instance("1.5.0"),
        "apps/ledger/versions/1.5.0/migrations/add-index.yaml": elsewhere,
    }
    apply = Apply(write_catalog(tmp_path / "catalog", files), sandbox, capsys)
    code, out, err = apply()
    assert code == 1 and "books: failed (MigrationFailed)" in out
    assert 'Job/kube-system/books-add-index: namespace "kube-system" is not allowed' in err
    assert apply.jobs.names() == [] and apply.config() is None


def test_an_uninstall_needs_every_version_its_ledger_names(
    tmp_path: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {**ledger_files(), "clusters/prod/instances/books.yaml": instance("1.5.0")}
    apply = Apply(write_catalog(tmp_path / "catalog", files), sandbox, capsys)
    assert apply()[0] == 0  # add-index ran: the ledger says 1.5.0 applied it
    (apply.root / "clusters/prod/instances/books.yaml").unlink()
    shutil.rmtree(apply.root / "apps/ledger/versions/1.5.0")
    code, out, err = apply()
    assert code == 1 and "books: failed (MigrationFailed)" in out
    assert (
        'version 1.5.0 is not in the catalog, but the undo of migration "add-index" it '
        "applied needs it"
    ) in err
    assert apply.config() == "1.5.0"  # nothing was pruned
