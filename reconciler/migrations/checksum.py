"""Checksums of migration definitions: how the ledger tells "the same migration" apart.

The ledger keys on a migration's name; the checksum says whether a later version
ships the *same* definition under that name. Validation warns when it differs
(the migration will not run again, so changed logic needs a new name), and each
ledger record keeps the checksum it ran with for audits.

A Job migration's checksum covers its entry in ``version.yaml`` and its Job (and
undo Job) as parsed data, so comments and formatting do not count as a change. A
Python migration's covers the entry plus the distribution name and version that
registered the code: upgrading the package is what changes its logic.
``deprecated`` is left out: marking a migration deprecated must not look like
changed logic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from reconciler.model.catalog import AppVersion, Migration

PREFIX = "sha256:"


def _digest(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return PREFIX + hashlib.sha256(text.encode()).hexdigest()


def _entry(migration: Migration) -> dict[str, Any]:
    entry = migration.to_dict()
    entry.pop("deprecated", None)
    return entry


def job_checksum(
    migration: Migration,
    job: Mapping[str, Any] | None,
    undo: Mapping[str, Any] | None = None,
) -> str:
    """Checksum of a Job migration: its entry, its Job and its undo Job."""
    return _digest({"entry": _entry(migration), "job": job, "undo": undo})


def python_checksum(migration: Migration, distribution: str, dist_version: str) -> str:
    """Checksum of a Python migration: its entry and the distribution that registers it."""
    return _digest(
        {"entry": _entry(migration), "distribution": distribution, "version": dist_version}
    )


def migration_checksum(
    version: AppVersion,
    migration: Migration,
    distributions: Mapping[str, tuple[str, str]] | None = None,
) -> str:
    """The checksum of ``migration`` as ``version`` ships it.

    ``distributions`` maps registered Python migration names to their
    ``(distribution, version)``; an unregistered one checksums as unknown
    (validation reports it as an error anyway).
    """
    if migration.python is not None:
        dist, dist_version = (distributions or {}).get(migration.python, ("", ""))
        return python_checksum(migration, dist, dist_version)
    job = version.migration_jobs.get(migration.name)
    undo = version.undo_jobs.get(migration.name)
    return job_checksum(
        migration,
        None if job is None else job.data,
        None if undo is None else undo.data,
    )


__all__ = ["job_checksum", "migration_checksum", "python_checksum"]
