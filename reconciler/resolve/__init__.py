"""resolve stage: choose the version each instance runs (SPEC section 2).

Ranges (``ranges``), selection rules and guards (``resolver``), upgrade paths
through ``upgradeFrom`` (``paths``) and the text of ``reconciler resolve``
(``explain``). Pure functions over ``reconciler.model`` values; the CLI and the
daemon import only the names below.
"""

from __future__ import annotations

from reconciler.resolve.explain import format_resolutions
from reconciler.resolve.paths import find_upgrade_path
from reconciler.resolve.ranges import Range, RangeSyntaxError, parse_range
from reconciler.resolve.resolver import resolve_cluster, resolve_instance, selector_source

__all__ = [
    "Range",
    "RangeSyntaxError",
    "find_upgrade_path",
    "format_resolutions",
    "parse_range",
    "resolve_cluster",
    "resolve_instance",
    "selector_source",
]
