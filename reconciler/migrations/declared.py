"""Python migrations a catalog checkout declares itself, installed here or not.

A catalog that ships its own Python migrations keeps them as a package in the
repository (the template's ``migrations-example/``), whose ``pyproject.toml``
registers each under the entry-point group ``reconciler.migrations``. Where that
package is installed, the registry (``registry.Registry.installed``) knows the
names and ``validate`` checks them fully. pre-commit runs the ``reconciler-validate``
hook in an environment of its own, built from the reconciler's repository, where
the catalog's package cannot be installed (its ``additional_dependencies`` resolve
against the hook's repository, not the catalog's): there every such name would
read as "not registered" and the hook failed on a catalog that is fine.

``validate --allow-uninstalled-migrations`` (what the hook runs) reads the names
declared here instead: a name the catalog's own package declares is a warning
saying its code was not checked in this environment; a name nobody declares (a
typo) is still an error. Only ``pyproject.toml`` at the root and one directory
down is read, each at most 256 KiB, with ``tomllib`` (data, never code).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from reconciler.migrations.registry import GROUP

MAX_PYPROJECT_BYTES = 256 * 1024


def declared_migrations(root: Path) -> dict[str, str]:
    """Migration name -> where it is declared (``migrations-example/pyproject.toml
    (ledger-migrations)``), from the checkout's own packages; unreadable files are skipped
    (they declare nothing, so their names stay errors)."""
    found: dict[str, str] = {}
    candidates = [root / "pyproject.toml", *sorted(root.glob("*/pyproject.toml"))]
    for path in candidates:
        data = _read(path)
        if data is None:
            continue
        project = data.get("project")
        if not isinstance(project, Mapping):
            continue
        groups = project.get("entry-points")
        names = groups.get(GROUP) if isinstance(groups, Mapping) else None
        if not isinstance(names, Mapping):
            continue
        where = path.relative_to(root).as_posix()
        distribution = project.get("name")
        if isinstance(distribution, str) and distribution:
            where += f" ({distribution})"
        for name in names:
            found.setdefault(str(name), where)
    return found


def _read(path: Path) -> Mapping[str, object] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_PYPROJECT_BYTES:
            return None
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
