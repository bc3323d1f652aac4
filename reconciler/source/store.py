"""Where the status ledger keeps its branch: the repository itself, or a mirror and a push.

``StatusLedger`` needs three things from a branch: its current head (``tip``),
a way to catch up with other writers (``refresh``) and an atomic
compare-and-swap publish (``publish(new, expected)``). A plain local path is
updated in place with ``git update-ref NEW OLD`` (no working tree is touched);
any URL is written through a bare mirror in the cache directory and a plain
fast-forward push, which the remote refuses when another writer got there first.
Commits are built by ``reconciler.source.objects`` with plumbing, which is fast
and never disturbs a checkout.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Protocol

import git

from reconciler.model.errors import SourceError, UsageError
from reconciler.source import runner
from reconciler.source.redact import redact_url
from reconciler.source.remote import RemoteAccess
from reconciler.source.runner import (
    QUIET_HOUSEKEEPING,
    GitFailed,
    MissingRemoteBranch,
    configure,
    init_bare,
    open_repo,
    read_ref,
    run,
    run_remote,
)

ZERO = "0" * 40

_CONFLICT_MARKERS = ("[rejected]", "[remote rejected]", "cannot lock ref", "failed to update ref")


class BranchStore(Protocol):
    """A branch the ledger can read and move atomically."""

    repo: git.Repo
    ref: str  # the local ref that holds the branch head as last seen
    display: str

    def refresh(self) -> None: ...

    def publish(self, new: str, expected: str | None) -> bool: ...


def tip(store: BranchStore) -> str | None:
    """The branch head as last fetched (or as it is, for a local path); None: no branch."""
    return read_ref(store.repo, store.ref)


class LocalStore:
    """The status branch inside a local repository, moved with a compare-and-swap.

    With ``remote_fallback`` (the read commands) a checkout that has no local
    branch reads the remote-tracking one instead: after ``git clone`` and
    ``git fetch`` only ``origin/status/<cluster>`` exists, and that is what a
    person asking ``reconciler status --repo .`` means. Such a store is
    read-only: the daemon writes its own branch, never a remote-tracking ref.
    """

    def __init__(self, path: Path, branch: str, *, remote_fallback: bool = False) -> None:
        try:
            self.repo = open_repo(path)
        except SourceError as e:
            # the user's --repo is wrong, not the network: an environment error (exit 2)
            raise UsageError(f"--repo {e}") from e
        self.branch = branch
        self.own = f"refs/heads/{branch}"
        self.ref = self.own
        self.display = str(path)
        self._fallback = remote_fallback
        self.refresh()

    def refresh(self) -> None:
        """Nothing to fetch: the repository is the source of truth (or its remote-tracking ref)."""
        if self._fallback:
            self.ref = readable_ref(self.repo, self.branch)

    def publish(self, new: str, expected: str | None) -> bool:
        if self.ref != self.own:
            raise SourceError(f"{self.display}: {self.ref} is a remote-tracking branch (read-only)")
        try:
            run(self.repo, ["update-ref", self.ref, new, expected or ZERO])
        except GitFailed as e:
            if "cannot lock ref" in e.detail or "but expected" in e.detail:
                return False
            raise
        return True


class RemoteStore:
    """The status branch of a remote, through a bare mirror under the cache directory."""

    def __init__(self, access: RemoteAccess, branch: str, mirror: Path) -> None:
        self.access = access
        self.branch = branch
        self.ref = f"refs/remotes/origin/{branch}"
        self.display = access.display
        settings = {
            "remote.origin.url": access.url,
            # keep fetched objects packed (not exploded into loose files): history stays fast
            "fetch.unpackLimit": "1",
            **QUIET_HOUSEKEEPING,  # gc when due, by ``housekeep`` after a publish
        }
        if (mirror / "HEAD").is_file():
            self.repo = open_repo(mirror)
            configure(self.repo, settings)
        else:  # a new mirror, made with its settings
            self.repo = init_bare(mirror, settings)

    def refresh(self) -> None:
        """Fetch the branch; a branch that no longer exists on the remote is forgotten."""
        try:
            run_remote(
                self.repo,
                [
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "origin",
                    f"+refs/heads/{self.branch}:{self.ref}",
                ],
                self.access,
                what=f"fetch {self.branch} from {self.display}",
            )
        except MissingRemoteBranch:
            if tip(self) is not None:  # read in process: usually there was none before either
                run(self.repo, ["update-ref", "-d", self.ref])

    def publish(self, new: str, expected: str | None) -> bool:
        """Fast-forward push (never forced); False when the remote moved meanwhile.

        The push moves ``ref`` too, as Git moves the remote-tracking branch of what it
        pushed once a fetch refspec maps it (given for this one command): no second
        process to record the new head. A ref the push left behind is set after it.
        """
        tracking = f"remote.origin.fetch=+refs/heads/{self.branch}:{self.ref}"
        try:
            run_remote(
                self.repo,
                ["-c", tracking, "push", "--quiet", "origin", f"{new}:refs/heads/{self.branch}"],
                self.access,
                what=f"push {self.branch} to {self.display}",
            )
        except GitFailed as e:
            if any(marker in e.detail for marker in _CONFLICT_MARKERS):
                return False
            raise
        if tip(self) != new:
            run(self.repo, ["update-ref", self.ref, new])
        return True


def readable_ref(repo: git.Repo, branch: str) -> str:
    """``refs/heads/<branch>`` if it exists, else a remote's copy of it (``origin`` first).

    ``branch`` may also name the remote-tracking branch itself (``origin/status/prod``).
    No copy anywhere: the local name, which reads as "no branch yet".
    """
    own = f"refs/heads/{branch}"
    if read_ref(repo, own) is not None:
        return own
    if read_ref(repo, f"refs/remotes/{branch}") is not None:
        return f"refs/remotes/{branch}"
    found = run(repo, ["for-each-ref", "--format=%(refname)", "refs/remotes/"]).split()
    copies = sorted(
        r for r in found if r.endswith(f"/{branch}") and r.count("/") == 3 + branch.count("/")
    )
    copies.sort(key=lambda r: r != f"refs/remotes/origin/{branch}")
    return copies[0] if copies else own


def housekeep(store: BranchStore) -> None:
    """Let Git consolidate the small packs each pass leaves (no process until gc is due).

    The mirror of a ``RemoteStore`` is the cache's; a ``LocalStore`` is the person's
    own repository, whose gc settings are kept.
    """
    runner.housekeep(store.repo, own=isinstance(store, RemoteStore))


def open_store(
    access: RemoteAccess, branch: str, cache_dir: Path, *, remote_fallback: bool = False
) -> BranchStore:
    """A ``LocalStore`` for a plain path, a ``RemoteStore`` for any URL."""
    if access.local_path is not None:
        return LocalStore(access.local_path, branch, remote_fallback=remote_fallback)
    return RemoteStore(access, branch, cache_dir / "status" / f"{access.cache_key}.git")


def check_branch_name(branch: str) -> str:
    """Refuse a status branch name Git would refuse, with a plain message."""
    try:
        _git_accepts(f"refs/heads/{branch}")
    except GitFailed as e:
        raise UsageError(
            f"--status-branch: {redact_url(branch)!r} is not a valid branch name"
        ) from e
    return branch


@functools.lru_cache(maxsize=256)
def _git_accepts(ref: str) -> None:
    """``git check-ref-format REF``, once per name a process accepted.

    Whether Git accepts a name depends on the name alone, and every daemon and every
    command that reads the records opens a ledger, each asking Git about the same few
    names (662 of the test suite's Git processes). A refusal raises, which the cache
    does not keep: it is asked again (and refused again) each time.
    """
    run(Path.cwd(), ["check-ref-format", ref])
