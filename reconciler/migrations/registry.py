"""The registry of Python migrations: code installed next to the reconciler.

A catalog never names code to import: it names a migration by the name a
package registered under the entry-point group ``reconciler.migrations``, e.g.

    [project.entry-points."reconciler.migrations"]
    ledger-backfill-order-totals = "ledger_migrations.totals:BackfillOrderTotals"

Only those entry points are ever loaded, and only when a migration runs, so a
catalog author cannot make the reconciler import arbitrary modules. The loaded
object (an instance, or a class that is instantiated without arguments) has
``needed(ctx) -> bool``, ``run(ctx)`` and optionally ``undo(ctx)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

GROUP = "reconciler.migrations"


class MigrationLoadError(Exception):
    """A registered migration could not be loaded or is not a migration object."""


@runtime_checkable
class PythonMigration(Protocol):
    """What a registered migration provides (``undo`` is optional)."""

    def needed(self, ctx: Any) -> bool: ...

    def run(self, ctx: Any) -> None: ...


@dataclass(frozen=True)
class RegisteredMigration:
    """One entry point of the group: its name, target and the distribution shipping it."""

    name: str
    target: str  # "module:attribute", as the entry point says
    distribution: str
    dist_version: str
    entry_point: EntryPoint

    def load(self) -> PythonMigration:
        """Import the target and return the migration object (a class is instantiated)."""
        try:
            obj = self.entry_point.load()
        except Exception as e:  # any import-time error of third-party code
            raise MigrationLoadError(
                f'python migration "{self.name}" ({self.target}) cannot be loaded: {e}'
            ) from e
        if isinstance(obj, type):
            try:
                obj = obj()
            except Exception as e:
                raise MigrationLoadError(
                    f'python migration "{self.name}": {self.target}() failed: {e}'
                ) from e
        if not isinstance(obj, PythonMigration):
            raise MigrationLoadError(
                f'python migration "{self.name}": {self.target} has no needed(ctx) and run(ctx)'
            )
        return obj


class Registry:
    """Registered Python migrations by name."""

    def __init__(self, migrations: Iterable[RegisteredMigration] = ()) -> None:
        self._by_name = {m.name: m for m in migrations}

    @classmethod
    def installed(cls) -> Registry:
        """Every migration registered by an installed distribution."""
        return cls.from_entry_points(entry_points(group=GROUP))

    @classmethod
    def from_entry_points(cls, eps: Iterable[EntryPoint]) -> Registry:
        out = []
        for ep in eps:
            dist = ep.dist
            out.append(
                RegisteredMigration(
                    name=ep.name,
                    target=ep.value,
                    distribution="" if dist is None else str(dist.metadata["Name"]),
                    dist_version="" if dist is None else str(dist.version),
                    entry_point=ep,
                )
            )
        return cls(out)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def get(self, name: str) -> RegisteredMigration | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def distributions(self) -> Mapping[str, tuple[str, str]]:
        """Registered name -> (distribution, version), for checksums."""
        return {n: (m.distribution, m.dist_version) for n, m in self._by_name.items()}

    def load(self, name: str) -> PythonMigration:
        found = self._by_name.get(name)
        if found is None:
            raise MigrationLoadError(self.unknown_message(name))
        return found.load()

    def unknown_message(self, name: str) -> str:
        known = ", ".join(self.names()) or "none installed"
        return f'python migration "{name}" is not registered (registered: {known})'


__all__ = [
    "GROUP",
    "MigrationLoadError",
    "PythonMigration",
    "RegisteredMigration",
    "Registry",
]
