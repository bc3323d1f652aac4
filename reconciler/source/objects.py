"""Git objects for the status ledger: read trees and blobs, write chains of commits.

``StatusLedger`` reads the records at a branch head with ``read_tree``/``read_blob``
(gitpython's persistent ``cat-file`` process) and writes one pass's commits with
``write_chain``: a single ``git fast-import`` process that builds every blob,
tree and commit of the pass into one pack. One process per pass instead of four
per commit, and packed objects keep ``history`` fast over long branches. No ref
the user can see moves here; the store publishes the result.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import git
from git.objects.fun import tree_entries_from_data
from git.objects.util import parse_date

from reconciler.source.runner import GitFailed, run

TREE_MODE = 0o040000

# name -> (binary sha, mode)
Entries = dict[str, tuple[bytes, int]]


@dataclass(frozen=True)
class Change:
    """One commit to write: ``path`` gets ``data``; ``message`` is the full message."""

    path: str
    data: bytes
    message: str


def read_tree(repo: git.Repo, binsha: bytes | None) -> Entries:
    if binsha is None:
        return {}
    data = repo.odb.stream(binsha).read()
    return {name: (bytes(sha), int(mode)) for sha, mode, name in tree_entries_from_data(data)}


def read_blob(repo: git.Repo, binsha: bytes) -> bytes:
    return bytes(repo.odb.stream(binsha).read())


def root_tree_of(repo: git.Repo, commit: str | None) -> bytes | None:
    if commit is None:
        return None
    return bytes(git.Commit(repo, bytes.fromhex(commit)).tree.binsha)


def write_chain(repo: git.Repo, base: str | None, changes: Sequence[Change]) -> list[str]:
    """Write ``changes`` as a chain of commits on ``base`` (None: a new root); return shas.

    fast-import needs a ref to build on; a unique scratch ref under
    ``refs/reconciler/`` is used and deleted afterwards, so concurrent writers
    in one repository never see each other's unfinished work.
    """
    if not changes:
        return []
    scratch = f"refs/reconciler/pending/{os.getpid()}-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="reconciler-import-") as tmp:
        stream_path = Path(tmp) / "stream"
        marks = Path(tmp) / "marks"
        stream_path.write_bytes(_stream(scratch, base, changes))
        with open(stream_path, "rb") as stream:
            status, _out, err = repo.git.execute(
                ["git", "fast-import", "--quiet", "--done", f"--export-marks={marks}"],
                istream=stream,
                with_extended_output=True,
                with_exceptions=False,
            )
        try:
            if status != 0:
                raise GitFailed(f"git fast-import: {str(err).strip()[-500:]}", str(err))
            shas = dict(line.split() for line in marks.read_text().splitlines())
        finally:
            run(repo, ["update-ref", "-d", scratch])
    return [shas[f":{i}"] for i in range(1, len(changes) + 1)]


def _stream(ref: str, base: str | None, changes: Sequence[Change]) -> bytes:
    ident = _identity()
    author = f"{ident} {git_date('GIT_AUTHOR_DATE')}"
    committer = f"{ident} {git_date('GIT_COMMITTER_DATE')}"
    parts = [f"reset {ref}\n".encode()]
    if base:
        parts.append(f"from {base}\n\n".encode())
    for mark, change in enumerate(changes, 1):
        message = change.message.encode("utf-8")
        parts += [
            f"commit {ref}\nmark :{mark}\nauthor {author}\ncommitter {committer}\n".encode(),
            f"data {len(message)}\n".encode(),
            message,
            f"\nM 100644 inline {change.path}\ndata {len(change.data)}\n".encode(),
            change.data,
            b"\n",
        ]
    parts.append(b"done\n")
    return b"".join(parts)


def git_date(variable: str) -> str:
    """``<epoch> +0000`` from Git's date variable (any form Git takes, ISO 8601 with ``Z``
    included, which gitpython cannot parse), or now."""
    value = os.environ.get(variable, "")
    if value:
        try:
            return f"{parse_date(value)[0]} +0000"
        except ValueError:
            pass
        try:
            return f"{int(datetime.fromisoformat(value).timestamp())} +0000"
        except ValueError:
            pass
    return f"{int(time.time())} +0000"


def _identity() -> str:
    """Who status commits are from: Git's usual variables, else ``reconciler``."""
    name = os.environ.get("GIT_COMMITTER_NAME", "reconciler").replace("<", "").replace(">", "")
    email = os.environ.get("GIT_COMMITTER_EMAIL", "reconciler@localhost")
    return f"{name} <{email.replace('<', '').replace('>', '')}>"
