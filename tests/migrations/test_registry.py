"""The registry loads only registered entry points, and says what is registered."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from reconciler.migrations import GROUP, MigrationLoadError, Registry


def registry(**targets: str) -> Registry:
    return Registry.from_entry_points(
        EntryPoint(name, f"tests.migrations.samples:{target}", GROUP)
        for name, target in targets.items()
    )


def test_a_registered_class_is_instantiated_and_an_object_used_as_is() -> None:
    reg = registry(cls="CreatesMarker", obj="instance")
    assert reg.names() == ["cls", "obj"]
    assert type(reg.load("cls")).__name__ == "CreatesMarker"
    assert reg.load("obj") is reg.load("obj")


def test_unknown_names_list_the_registered_ones() -> None:
    reg = registry(b="NoUndo", a="Raises")
    assert "x" not in reg
    with pytest.raises(
        MigrationLoadError, match=r'python migration "x" is not registered \(registered: a, b\)'
    ):
        reg.load("x")
    assert Registry().unknown_message("x").endswith("(registered: none installed)")


def test_load_failures_are_migration_errors() -> None:
    reg = Registry.from_entry_points(
        [
            EntryPoint("gone", "tests.migrations.no_such_module:X", GROUP),
            EntryPoint("plain", "tests.migrations.samples:NotAMigration", GROUP),
            EntryPoint("init", "tests.migrations.samples:BrokenInit", GROUP),
        ]
    )
    with pytest.raises(
        MigrationLoadError, match=r'"gone" \(tests.migrations.no_such_module:X\) cannot be loaded'
    ):
        reg.load("gone")
    with pytest.raises(MigrationLoadError, match="has no needed\\(ctx\\) and run\\(ctx\\)"):
        reg.load("plain")
    with pytest.raises(MigrationLoadError, match=r"BrokenInit\(\) failed: missing settings"):
        reg.load("init")


def test_installed_registry_holds_the_template_example() -> None:
    reg = Registry.installed()
    assert "ledger-backfill-order-totals" in reg
    dist, version = reg.distributions()["ledger-backfill-order-totals"]
    assert (dist, version) == ("ledger-migrations", "0.1.0")
