"""Load and validate a catalog checkout into ``reconciler.model`` objects.

``load_catalog`` reads every file once (libyaml, line numbers on demand) and
collects problems; ``validate_catalog`` returns them. Checks that need version
resolution or rendering (unknown channels, instance parameters) are composed in
``reconciler.daemon.plan.check_catalog``, which the ``validate`` command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.lazy import lazy_exports

if TYPE_CHECKING:
    from reconciler.catalog.loader import load_catalog
    from reconciler.catalog.schema import check_document, load_schema
    from reconciler.catalog.yamlread import MAX_FILE_BYTES, YamlReadError, load_bounded
    from reconciler.model.catalog import Catalog
    from reconciler.model.problems import Problem

# imported on first use: the bounded YAML reader (which the status records use)
# without the loader's JSON-schema stack
__getattr__ = lazy_exports(
    __name__,
    {
        "reconciler.catalog.loader": ("load_catalog",),
        "reconciler.catalog.schema": ("check_document", "load_schema"),
        "reconciler.catalog.yamlread": ("MAX_FILE_BYTES", "YamlReadError", "load_bounded"),
    },
)


def validate_catalog(catalog: Catalog) -> list[Problem]:
    """Problems found while loading (schema, names, channels, manifests, placeholders)."""
    return list(catalog.problems)


__all__ = [
    "MAX_FILE_BYTES",
    "YamlReadError",
    "check_document",
    "load_bounded",
    "load_catalog",
    "load_schema",
    "validate_catalog",
]
