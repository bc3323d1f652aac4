"""The catalog source: a cached shallow clone of the catalog branch, kept up to date.

The daemon owns one ``CatalogSource`` per catalog and calls ``sync()`` on every
poll (or webhook); it reads the catalog from ``SyncResult.path`` and reconciles
when ``SyncResult.changed``. The clone lives under the cache directory
(``$RECONCILER_CACHE_DIR``), is shallow and single-branch, and follows the
remote branch wherever it goes, force pushes included. With a
``SignaturePolicy`` only signed heads are checked out; a refused head leaves the
last verified commit in place and says why in ``SyncResult.refused``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.model.errors import SourceError
from reconciler.source.localrefs import local_heads
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess, cache_root
from reconciler.source.runner import (
    NO_TEMPLATE,
    QUIET_HOUSEKEEPING,
    GitFailed,
    MissingRemoteBranch,
    configure,
    current_branch,
    housekeep,
    locked,
    parse_listing,
    read_ref,
    run,
    run_remote,
)
from reconciler.source.verify import SignaturePolicy, SignatureRefused, SignatureVerifier

log = logging.getLogger("reconciler.source")

_VERIFIED_REF = "refs/reconciler/verified"


@dataclass(frozen=True)
class SyncResult:
    """What one ``sync()`` found.

    ``commit`` is checked out at ``path`` (the last verified one when the head
    was refused); ``remote_commit`` is the branch head on the remote;
    ``changed`` is True when ``commit`` differs from this source's previous
    sync (and on the first sync of a process); ``refused`` says why the remote
    head was not taken, or is None.
    """

    commit: str
    changed: bool
    path: Path
    branch: str
    url: str
    remote_commit: str
    previous: str | None = None
    refused: str | None = None
    signer: str = ""
    # the refs the sync's ``git ls-remote`` listed (its branch and ``sync(also=...)``'s
    # patterns) -> their commits; None when it listed nothing (a clone, a first fetch)
    listed: Mapping[str, str] | None = None


class CatalogSource:
    """A catalog repository (local path or Git URL) followed through a cached clone."""

    def __init__(
        self,
        repo: str,
        *,
        branch: str | None = None,
        cache_dir: Path | None = None,
        credentials: Credentials | None = None,
        policy: NetworkPolicy | None = None,
        verify: SignaturePolicy | None = None,
    ) -> None:
        self.access = RemoteAccess.parse(repo, credentials, policy)
        self._branch = branch
        root = (cache_dir or cache_root()) / "catalog"
        self._slot = root / f"{self.access.cache_key}-{_slug(branch or 'HEAD')}"
        self._verifier = SignatureVerifier(verify) if verify else None
        # per policy: a commit verified against other keys must not count as verified
        self._verified_ref = f"{_VERIFIED_REF}/{verify.fingerprint}" if verify else ""
        self._last: str | None = None
        self._configured = False  # QUIET_HOUSEKEEPING checked in the clone by this process
        self._tracked: str | None = None  # the branch the clone follows, once read here

    @property
    def path(self) -> Path:
        """The working tree of the cached clone (valid after the first ``sync``)."""
        return self._slot

    def sync(self, *, also: Sequence[str] = ()) -> SyncResult:
        """Fetch the branch, verify its head if asked, check it out; one bounded network step.

        ``also``: more ``git ls-remote`` patterns (the daemon's ``refs/heads/status/*``
        for the wave gate), listed by the same process that asks whether the branch
        moved, in ``SyncResult.listed``. Raises ``SourceError`` when the remote cannot
        be read (after retries), and ``SignatureRefused`` when verification is on and
        no commit of this branch has ever been verified.
        """
        with locked(self._slot.with_name(self._slot.name + ".lock")):
            cloned = not (self._slot / ".git").is_dir()
            repo, listed = self._fetch(also)
            branch = self._current_branch(repo)
            fetched = f"refs/remotes/origin/{branch}"
            # read in process; a missing ref is Git's error, as it always was
            head = read_ref(repo, fetched) or run(repo, ["rev-parse", "--verify", fetched])
            commit, refused, signer = self._choose(repo, head)
            self._checkout(repo, commit, cloned=cloned)
            housekeep(repo)  # what each fetch's own ``git maintenance`` used to do
        previous, self._last = self._last, commit
        if refused:
            log.warning("%s: %s; staying at %s", self.access.display, refused, commit[:12])
        return SyncResult(
            commit=commit,
            changed=previous != commit,
            path=self._slot,
            branch=branch,
            url=self.access.display,
            remote_commit=head,
            previous=previous,
            refused=refused,
            signer=signer,
            listed=listed,
        )

    def _fetch(self, also: Sequence[str]) -> tuple[git.Repo, dict[str, str] | None]:
        """The clone brought to the remote branch, and what the remote listed on the way
        (None: nothing was listed, a clone or a clone's first fetch)."""
        if (self._slot / ".git").is_dir():
            repo = git.Repo(str(self._slot))
            if not self._configured:  # a clone made before these settings existed
                configure(repo, QUIET_HOUSEKEEPING)
                self._configured = True
            branch = self._current_branch(repo)
            what = f"fetch {branch} from {self.access.display}"
            unmoved, listed = self._unmoved(repo, branch, what, also)
            if unmoved:
                return repo, listed
            refspec = f"+refs/heads/{branch}:refs/remotes/origin/{branch}"
            run_remote(
                repo,
                ["fetch", "--quiet", "--depth=1", "--no-tags", "origin", refspec],
                self.access,
                what=what,
            )
            return repo, listed
        return self._clone(), None

    def _unmoved(
        self, repo: git.Repo, branch: str, what: str, also: Sequence[str]
    ) -> tuple[bool, dict[str, str] | None]:
        """Whether the remote branch is still the commit fetched last time, and the
        remote's listing of it and of ``also`` (None when nothing was fetched before).

        Most polls find the branch where it was. One ``git ls-remote`` (the remote's
        ref advertisement) tells; a shallow ``git fetch`` of an unchanged branch
        still has the remote pack an empty answer and the clone unpack and check it,
        five processes here and a pack on the server. A branch the remote does not
        list is left to the fetch, whose error says so. A remote on this machine is
        listed in process when its refs are plain files (``local_heads``), with no
        process at all.
        """
        fetched = read_ref(repo, f"refs/remotes/origin/{branch}")
        if fetched is None:
            return False, None
        patterns = [f"refs/heads/{branch}", *also]
        listed = local_heads(self.access, patterns)
        if listed is None:
            output = run_remote(
                repo, ["ls-remote", "--heads", "origin", *patterns], self.access, what=what
            )
            listed = parse_listing(output)
        return listed.get(f"refs/heads/{branch}") == fetched, listed

    def _clone(self) -> git.Repo:
        """The clone; it checks out the branch head itself unless signatures are checked
        (then nothing is written before the head is verified: ``--no-checkout``)."""
        # the cache's settings written by the clone itself, not by a config writer after it
        quiet = [f"--config={name}={value}" for name, value in QUIET_HOUSEKEEPING.items()]
        args = ["--depth=1", "--single-branch", "--no-tags", *quiet]
        if self._verifier is not None:
            args.append("--no-checkout")
        if self._branch:
            args += ["--branch", self._branch]
        try:
            clone_into(self._slot, self.access, args)
        except GitFailed as e:
            if "remote branch" in e.detail and "not found" in e.detail:
                raise MissingRemoteBranch(
                    f"clone {self.access.display}: no branch {self._branch!r}"
                ) from e
            raise
        repo = git.Repo(str(self._slot))
        self._configured = True
        # a new clone: the remote's default branch may be another; its HEAD names it
        self._tracked = None if self._branch else self._remember_branch(repo)
        return repo

    def _current_branch(self, repo: git.Repo) -> str:
        if self._branch:
            return self._branch
        if self._tracked is not None:  # read from this clone's config by this process
            return self._tracked
        # a clone without --branch tracks the remote's default branch; remember it in config
        # (the clone's own: this process wrote it there, and reads no other file for it)
        try:
            stored = repo.config_reader("repository").get_value("reconciler", "branch", "")
        except Exception:  # gitpython raises several config error types; all mean "unset"
            stored = ""
        if stored:
            self._tracked = str(stored)
            return self._tracked
        self._tracked = self._remember_branch(repo)
        return self._tracked

    @staticmethod
    def _remember_branch(repo: git.Repo) -> str:
        """The branch the clone's ``HEAD`` names, written to its config (``reconciler.branch``)."""
        name = current_branch(repo)
        with repo.config_writer() as cfg:
            cfg.set_value("reconciler", "branch", name)
        return name

    def _choose(self, repo: git.Repo, head: str) -> tuple[str, str | None, str]:
        """The commit to check out: the head, or the last verified one when it is refused."""
        if self._verifier is None:
            return head, None, ""
        verdict = self._verifier.verify(repo, head)
        if verdict.ok:
            run(repo, ["update-ref", self._verified_ref, head])
            return head, None, verdict.signer
        last = read_ref(repo, self._verified_ref)
        if last is None:
            raise SignatureRefused(
                f"{self.access.display}: {verdict.reason}; no verified commit to fall back to"
            )
        return last, verdict.reason, ""

    def _checkout(self, repo: git.Repo, commit: str, *, cloned: bool = False) -> None:
        """``commit`` checked out, and nothing else in the working tree.

        ``cloned``: the clone was made just now. Without signature checks it checked out
        its head, which is ``commit`` when ``HEAD`` names it; with them (``--no-checkout``)
        its working tree is empty, so there is nothing for ``git clean`` to remove.
        """
        current = read_ref(repo, "HEAD")
        if current == commit and self._last == commit:
            return  # checked out by this process already; a new process re-checks once
        if cloned and self._verifier is None and current == commit:
            return  # the clone's own checkout of its head
        try:
            run(repo, ["checkout", "--quiet", "--force", "--detach", commit])
            if not cloned:
                run(repo, ["clean", "-ffdxq"])
        except GitFailed as e:
            raise SourceError(f"{self._slot}: cannot check out {commit[:12]}: {e.detail}") from e


def clone_into(slot: Path, access: RemoteAccess, options: list[str]) -> None:
    """Clone ``access``'s repository as ``slot``: into a temp dir next to it, then renamed,
    so a crash never leaves a half clone where a later run would trust it. A clone of the
    cache, without Git's template files (``NO_TEMPLATE``)."""
    slot.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=slot.parent))
    try:
        run_remote(
            tmp.parent,
            ["clone", "--quiet", NO_TEMPLATE, *options, access.url, str(tmp)],
            access,
            what=f"clone {access.display}",
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(slot, ignore_errors=True)
    tmp.rename(slot)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)
