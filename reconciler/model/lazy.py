"""Package attributes imported on first use, for packages whose parts have heavy imports.

``reconciler status`` and ``history`` read the status branch: they need
``reconciler.source``'s ledger and ``reconciler.catalog``'s bounded YAML reader, not
the catalog loader with its JSON-schema stack, nor the catalog source, builds and
gates. A package ``__init__`` that imported all its modules made every command pay
for all of them (about 0.2 s of a 0.56 s ``status``). With
``__getattr__ = lazy_exports(__name__, {...})`` (PEP 562) ``from reconciler.source
import StatusLedger`` imports ``reconciler.source.ledger`` alone; the package keeps
its public names, and its ``TYPE_CHECKING`` imports give them their types.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``modules`` (module ->
    the names it exports) is imported from its module when first asked for, then kept
    in the package as if it had been imported there."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
