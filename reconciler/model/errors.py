"""The project's own error tree.

Third-party errors (YAML, Git, Kubernetes) are translated once, at the stage
boundary, into these classes with ``raise ... from e``; the CLI maps them to
exit codes in one place. Every error carries a ``reason`` that becomes the
kstatus condition reason (``CatalogInvalid``, ``ApplyFailed``, ...).
"""

from __future__ import annotations

# SPEC section 6: 0 success, 1 the command ran and found problems, 2 usage or environment.
EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


class ReconcilerError(Exception):
    """Base of every error the CLI knows how to report without a traceback."""

    reason = "ReconcileFailed"


class UsageError(ReconcilerError):
    """The command line or environment is wrong (exit code 2)."""

    reason = "UsageError"


class CatalogError(ReconcilerError):
    """The catalog cannot be read at all (missing root, not a directory)."""

    reason = "CatalogInvalid"


class ResolveError(ReconcilerError):
    """No version can be chosen for an instance."""

    reason = "ResolveFailed"


class DowngradeBlocked(ResolveError):
    """The chosen version is lower than the deployed one and downgrades are off."""

    reason = "DowngradeBlocked"


class NoUpgradePath(ResolveError):
    """The deployed version cannot reach the target through ``upgradeFrom``."""

    reason = "NoUpgradePath"


class RenderError(ReconcilerError):
    """A manifest cannot be rendered for an instance."""

    reason = "RenderFailed"


class SourceError(ReconcilerError):
    """Git could not be read or written (fetch, push, verify)."""

    reason = "SourceFailed"


class KubeError(ReconcilerError):
    """The Kubernetes API refused or failed a request."""

    reason = "ApplyFailed"
