"""A working clone of the catalog branch that the daemon itself commits to.

``run --scan-images`` turns a registry's new image build into a commit on the
catalog (SPEC section 8), as a person running ``reconciler images scan --push``
would. The daemon's own catalog clone (``checkout.py``) is a detached,
verified checkout that must never carry local commits, so the scan gets a
separate clone under the cache directory: before each scan it is reset to the
remote branch's head (anything left by a failed attempt is discarded), then
``commit_builds`` commits in it and pushes. A push that loses a race with
someone else's commit is refused by Git (never forced); the next scan starts
again from the new head, so no commit is lost or made twice.
"""

from __future__ import annotations

from pathlib import Path

import git

from reconciler.model.errors import SourceError
from reconciler.source.checkout import clone_into
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess, cache_root
from reconciler.source.runner import (
    QUIET_HOUSEKEEPING,
    GitFailed,
    configure,
    current_branch,
    housekeep,
    locked,
    run,
    run_remote,
)


class CatalogWorkClone:
    """``repo``'s ``branch`` (default: the remote's default branch) in a clone to commit in."""

    def __init__(
        self,
        repo: str,
        *,
        branch: str | None = None,
        cache_dir: Path | None = None,
        credentials: Credentials | None = None,
        policy: NetworkPolicy | None = None,
    ) -> None:
        self.access = RemoteAccess.parse(repo, credentials, policy)
        self.credentials = credentials
        self.policy = policy
        self._branch = branch
        self.path = (cache_dir or cache_root()) / "work" / self.access.cache_key

    @property
    def display(self) -> str:
        return self.access.display

    def refresh(self) -> Path:
        """The clone at the remote branch's head, clean; raises ``SourceError`` if unreachable."""
        with locked(self.path.with_name(self.path.name + ".lock")):
            if not (self.path / ".git").is_dir():
                self._clone()
            repo = git.Repo(str(self.path))
            settings = {
                # the daemon's own identity, as on its status commits; GIT_AUTHOR_* and
                # GIT_COMMITTER_* in the environment still win, as they do for every commit
                "user.name": "reconciler",
                "user.email": "reconciler@localhost",
                **QUIET_HOUSEKEEPING,  # gc when due, by ``housekeep`` below
            }
            configure(repo, settings)
            branch = self._branch or current_branch(repo)
            run_remote(
                repo,
                [
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "origin",
                    f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
                ],
                self.access,
                what=f"fetch {branch} from {self.access.display}",
            )
            try:
                run(repo, ["checkout", "--quiet", "--force", "-B", branch, f"origin/{branch}"])
                run(repo, ["branch", "--quiet", f"--set-upstream-to=origin/{branch}", branch])
                run(repo, ["clean", "-ffdxq"])
            except GitFailed as e:
                raise SourceError(
                    f"{self.path}: cannot reset to origin/{branch}: {e.detail}"
                ) from e
            housekeep(repo)
        return self.path

    def _clone(self) -> None:
        args = ["--depth=1", "--no-tags"]
        if self._branch:
            args += ["--branch", self._branch]
        clone_into(self.path, self.access, args)
