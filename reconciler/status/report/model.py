"""What the status page is drawn from: one value per cluster, read from its status branch.

The page is rendered from values, like every other view of the status branch:
``reconciler report`` and the daemon's ``/ui`` read the branch with the ledger
(``StatusLedger.snapshot`` and ``history``) and hand the result here as a
``ClusterReport``; ``reconciler.status.report.html`` lays it out. Nothing in this
package touches Git, so the pages can be tested from hand-made records.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.model.status import InstanceStatus
from reconciler.status.views import HistoryEntry

INDEX = "index.html"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass(frozen=True)
class ClusterReport:
    """A cluster's status branch as read at ``commit`` (None: the branch does not exist yet).

    ``history`` is newest first and covers at most the last ``history_limit``
    status commits (0: all of them), so a long-lived branch costs one bounded
    ``git log``; ``problems`` names the status files that could not be read.
    """

    cluster: str
    branch: str
    commit: str | None
    statuses: Mapping[str, InstanceStatus] = field(default_factory=dict)
    history: tuple[HistoryEntry, ...] = ()
    problems: tuple[str, ...] = ()
    history_limit: int = 0

    @property
    def truncated(self) -> bool:
        """Whether older status commits exist than the history read (as far as known)."""
        return self.history_limit > 0 and len(self.history) >= self.history_limit

    def entries_of(self, instance: str) -> list[HistoryEntry]:
        """The instance's status changes within the history read, newest first."""
        return [e for e in self.history if e.instance == instance]


def slug(name: str) -> str:
    """A file name for ``name`` that is safe on disk and in a URL path.

    Cluster and instance names come from Git (branch names, file names on the
    status branch) and are not guaranteed to be DNS labels; anything else than a
    plain name is replaced and made unique with a short hash of the original.
    """
    if _SAFE.match(name):
        return name
    plain = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:40] or "_"
    return f"{plain}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:10]}"


def instance_page(cluster: str, instance: str) -> str:
    """The path of an instance's page, relative to the site's root."""
    return f"{slug(cluster)}/{slug(instance)}.html"


__all__ = ["INDEX", "ClusterReport", "instance_page", "slug"]
