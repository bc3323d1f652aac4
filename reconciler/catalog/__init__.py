"""Load and validate a catalog checkout into ``reconciler.model`` objects.

``load_catalog`` reads every file once (libyaml, line numbers on demand) and
collects problems; ``validate_catalog`` returns them. Checks that need version
resolution or rendering (unknown channels, instance parameters) are composed in
``reconciler.daemon.plan.check_catalog``, which the ``validate`` command runs.
"""

from reconciler.catalog.loader import load_catalog
from reconciler.catalog.schema import check_document, load_schema
from reconciler.catalog.yamlread import MAX_FILE_BYTES, YamlReadError, load_bounded
from reconciler.model.catalog import Catalog
from reconciler.model.problems import Problem


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
