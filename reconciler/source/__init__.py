"""Git, the whole user interface: the catalog source, the status ledger, channel moves.

The only package that imports ``git`` (GitPython). The daemon uses
``CatalogSource.sync()`` to follow the catalog and ``StatusLedger.record()`` to
write status; the ``status``/``history``/``channel set`` commands use
``StatusLedger.snapshot()``/``history()`` and ``set_channel``. Every message
that leaves this package is redacted (``redact_url``): no credential is ever
logged, raised or recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.lazy import lazy_exports

if TYPE_CHECKING:
    from reconciler.source.builds import BuildsCommit, BuildsCommits, commit_builds, render_builds
    from reconciler.source.changes import changed_between
    from reconciler.source.channels import ChannelMove, ChannelMoveRefused, set_channel
    from reconciler.source.checkout import CatalogSource, SyncResult
    from reconciler.source.fleet import FleetStatus, ReleaseHistory
    from reconciler.source.gates import GateChange, GateRefused, change_gate
    from reconciler.source.ledger import (
        CommitInfo,
        StatusLedger,
        StatusSnapshot,
        status_branch_clusters,
    )
    from reconciler.source.redact import redact_text, redact_url
    from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess, cache_root
    from reconciler.source.runner import GitFailed, MissingRemoteBranch
    from reconciler.source.snapshots import (
        export_paths,
        list_directory,
        resolve_commit,
        resolve_commits,
    )
    from reconciler.source.verify import SignaturePolicy, SignatureRefused, Verdict
    from reconciler.source.workclone import CatalogWorkClone

# imported on first use: ``status`` and ``history`` need the ledger, not the catalog
# source, builds, gates or channel moves (nor what those import)
__getattr__ = lazy_exports(
    __name__,
    {
        "reconciler.source.builds": (
            "BuildsCommit",
            "BuildsCommits",
            "commit_builds",
            "render_builds",
        ),
        "reconciler.source.changes": ("changed_between",),
        "reconciler.source.channels": ("ChannelMove", "ChannelMoveRefused", "set_channel"),
        "reconciler.source.checkout": ("CatalogSource", "SyncResult"),
        "reconciler.source.fleet": ("FleetStatus", "ReleaseHistory"),
        "reconciler.source.gates": ("GateChange", "GateRefused", "change_gate"),
        "reconciler.source.ledger": (
            "CommitInfo",
            "StatusLedger",
            "StatusSnapshot",
            "status_branch_clusters",
        ),
        "reconciler.source.redact": ("redact_text", "redact_url"),
        "reconciler.source.remote": ("Credentials", "NetworkPolicy", "RemoteAccess", "cache_root"),
        "reconciler.source.runner": ("GitFailed", "MissingRemoteBranch"),
        "reconciler.source.snapshots": (
            "export_paths",
            "list_directory",
            "resolve_commit",
            "resolve_commits",
        ),
        "reconciler.source.verify": ("SignaturePolicy", "SignatureRefused", "Verdict"),
        "reconciler.source.workclone": ("CatalogWorkClone",),
    },
)

__all__ = [
    "BuildsCommit",
    "BuildsCommits",
    "CatalogSource",
    "CatalogWorkClone",
    "ChannelMove",
    "ChannelMoveRefused",
    "CommitInfo",
    "Credentials",
    "FleetStatus",
    "GateChange",
    "GateRefused",
    "GitFailed",
    "MissingRemoteBranch",
    "NetworkPolicy",
    "ReleaseHistory",
    "RemoteAccess",
    "SignaturePolicy",
    "SignatureRefused",
    "StatusLedger",
    "StatusSnapshot",
    "SyncResult",
    "Verdict",
    "cache_root",
    "change_gate",
    "changed_between",
    "commit_builds",
    "export_paths",
    "list_directory",
    "redact_text",
    "redact_url",
    "render_builds",
    "resolve_commit",
    "resolve_commits",
    "set_channel",
    "status_branch_clusters",
]
