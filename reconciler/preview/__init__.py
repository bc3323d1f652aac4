"""``reconciler preview``: what a pull request would do, from two commits, offline (SPEC 7).

Sits beside the daemon and above the stages: it reads two commits through
``reconciler.source``, loads only what the change can affect through
``reconciler.catalog`` (``scope``), plans both sides with the daemon's own
planning and compares them (``build``), and prints the result (``report``).
"""

from reconciler.preview.build import build_preview, compare
from reconciler.preview.model import InstanceChange, Preview
from reconciler.preview.report import MARKER, format_markdown, format_text
from reconciler.preview.scope import Scope, load_scope

__all__ = [
    "MARKER",
    "InstanceChange",
    "Preview",
    "Scope",
    "build_preview",
    "compare",
    "format_markdown",
    "format_text",
    "load_scope",
]
