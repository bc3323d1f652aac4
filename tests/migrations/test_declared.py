"""Python migrations the catalog's own package declares: read from its pyproject.toml.

``validate --allow-uninstalled-migrations`` (the pre-commit hook's command) accepts
them with a warning where the package is not installed; a name nobody declares is an
error either way, and without the flag nothing changes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.migrations import declared_migrations
from reconciler.migrations.declared import MAX_PYPROJECT_BYTES
from tests.conftest import TEMPLATE

ENTRY_POINTS = '[project.entry-points."reconciler.migrations"]\n'


def _pyproject(path: Path, *names: str, distribution: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    project = f'[project]\nname = "{distribution}"\n' if distribution else ""
    path.write_text(project + ENTRY_POINTS + "".join(f'{n} = "m:X"\n' for n in names))


def test_names_come_from_the_root_and_one_directory_down(tmp_path: Path) -> None:
    _pyproject(tmp_path / "pyproject.toml", "at-root")
    _pyproject(tmp_path / "migrations" / "pyproject.toml", "one-down", distribution="shop-mig")
    _pyproject(tmp_path / "a" / "b" / "pyproject.toml", "too-deep")
    assert declared_migrations(tmp_path) == {
        "at-root": "pyproject.toml",
        "one-down": "migrations/pyproject.toml (shop-mig)",
    }


def test_unreadable_files_declare_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "pyproject.toml").write_text("[project\nname = ")
    huge = tmp_path / "huge" / "pyproject.toml"
    _pyproject(huge, "big")
    with huge.open("a") as f:
        f.write("#" * MAX_PYPROJECT_BYTES + "\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "binary").mkdir()
    (tmp_path / "binary" / "pyproject.toml").write_bytes(b"\xff\xfe")
    assert declared_migrations(tmp_path) == {}


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """The template whose migration is renamed to one no installed package registers."""
    root = tmp_path / "catalog"
    shutil.copytree(TEMPLATE, root)
    for rel in ("apps/ledger/versions/2.1.0/version.yaml", "migrations-example/pyproject.toml"):
        path = root / rel
        path.write_text(path.read_text().replace("ledger-backfill-order-totals", "orders-recount"))
    return root


def _validate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["validate", *argv])
    return code, capsys.readouterr().out


def test_a_declared_but_uninstalled_name_is_a_warning_with_the_flag(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _validate(capsys, str(catalog), "--allow-uninstalled-migrations")
    assert code == 0, out
    assert (
        'python migration "orders-recount" is declared by migrations-example/pyproject.toml '
        "(ledger-migrations) but not installed in this environment" in out
    )
    assert "catalog is valid: 1 warning(s)" in out
    code, out = _validate(capsys, str(catalog))  # without the flag: as before
    assert code == 1
    assert 'python migration "orders-recount" is not registered' in out


def test_a_name_nobody_declares_stays_an_error_with_the_flag(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    version = catalog / "apps/ledger/versions/2.1.0/version.yaml"
    version.write_text(version.read_text().replace("orders-recount", "orders-recuont"))
    code, out = _validate(capsys, str(catalog), "--allow-uninstalled-migrations")
    assert code == 1
    assert 'python migration "orders-recuont" is not registered' in out
