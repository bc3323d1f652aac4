"""``resolve --explain`` lists the migrations an upgrade would consider, step by step."""

from __future__ import annotations

import json

import pytest

from reconciler.cli import main
from reconciler.migrations import upgrade_migrations
from reconciler.model.catalog import AppVersion, Migration
from reconciler.model.migrations import MigrationCheck
from reconciler.model.version import parse_version
from tests.conftest import TEMPLATE


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_text_and_json_name_each_step_and_the_version_filter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = (
        "resolve",
        str(TEMPLATE),
        "--cluster",
        "prod",
        "--explain",
        "--deployed",
        "ledger=1.4.2",
    )
    code, out = run(capsys, *args)
    assert code == 0
    tail = out.split("migrations to consider", 1)[1].splitlines()
    assert tail[1] == "  ledger: 1.4.2 -> 1.5.0 -> 2.0.0"
    assert tail[2].split() == [
        "2.0.0",
        "pre",
        "app",
        "add-orders-index",
        "objectMissing",
        "ConfigMap/${instance.name}-schema-v2;",
        "deployed",
        "1.5.0",
        "matches",
        "<2.0.0",
    ]
    assert len(tail) == 3  # uninstall migrations are not part of an upgrade
    code, out = run(capsys, *args, "--output", "json")
    ledger = next(d for d in json.loads(out) if d["instance"] == "ledger")
    assert ledger["migrations"] == [
        {
            "version": "2.0.0",
            "name": "add-orders-index",
            "phase": "pre",
            "scope": "app",
            "check": {
                "objectMissing": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "${instance.name}-schema-v2",
                },
                "deployedVersion": "<2.0.0",
            },
            "filter": "deployed 1.5.0 matches <2.0.0",
            "filteredOut": False,
        }
    ]
    web = next(d for d in json.loads(out) if d["instance"] == "web")
    assert web["migrations"] == []


def test_nothing_to_consider_prints_no_section(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(
        capsys,
        "resolve",
        str(TEMPLATE),
        "--cluster",
        "prod",
        "--explain",
        "--deployed",
        "ledger=2.0.0",
    )
    assert "migrations to consider" not in out


def test_a_first_install_and_a_filtered_out_migration() -> None:
    check = MigrationCheck.from_dict({"deployedVersion": "<2.0.0"})
    v2 = AppVersion(
        app="a",
        version=parse_version("2.0.0"),
        directory="apps/a/versions/2.0.0",
        migrations=(
            Migration("m", "post", check=check, python="x"),
            Migration("u", "uninstall", python="x"),
        ),
    )
    (first,) = upgrade_migrations([v2], None)
    assert first.filtered_out and first.filter_note.endswith(
        "nothing deployed yet (a first install)"
    )
    assert first.describe().endswith("(skipped)")
    (upgrade,) = upgrade_migrations([v2], "1.0.0")
    assert not upgrade.filtered_out and upgrade.deployed == "1.0.0"
    bad = AppVersion(
        app="a",
        version=parse_version("2.0.0"),
        directory="d",
        migrations=(
            Migration("m", "pre", check=MigrationCheck(deployed_version=">>1"), python="x"),
        ),
    )
    (broken,) = upgrade_migrations([bad], "1.0.0")
    assert broken.filter_note.startswith("deployedVersion >>1:")
    plain = AppVersion(
        app="a",
        version=parse_version("1.0.0"),
        directory="d",
        migrations=(Migration("p", "pre", python="x"),),
    )
    assert upgrade_migrations([plain], None)[0].describe().endswith("p  no check: runs once")
