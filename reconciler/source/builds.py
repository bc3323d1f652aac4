"""Commit ``apps/<app>/builds.yaml`` changes: one commit per app (SPEC section 8).

``reconciler.registry.scan_catalog`` decides what the files should say; this
module writes them with a ruamel.yaml round-trip (comments and order of an
existing file survive; a new file gets a short header) and commits each app's
file with the message the scan made (trailers ``Reconciler-App``,
``Reconciler-Image``, ``Reconciler-From``, ``Reconciler-To``, ``Reconciler-Digest``).

On the current branch the working tree is updated and committed like
``channel set`` does. With ``branch`` the commits are built with Git plumbing
(a temporary index, ``commit-tree``, ``update-ref``) on a new branch from HEAD,
so the checkout, its index and its current branch are left exactly as they were:
that branch is for a pull request.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from reconciler.model.builds import BuildsFileChange, ImageBuilds
from reconciler.model.errors import SourceError, UsageError
from reconciler.source.channels import _open_worktree, _push
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess
from reconciler.source.runner import GitFailed, run, run_remote

HEADER = """\
# Image builds of this app's versions: which rebuild (long tag) of each image runs,
# pinned by digest. Written by `reconciler images scan`: edit by hand only to undo a pin.
"""
_ZERO = "0" * 40


@dataclass(frozen=True)
class BuildsCommit:
    app: str
    file: str
    commit: str
    subject: str

    def to_dict(self) -> dict[str, str]:
        return {"app": self.app, "file": self.file, "commit": self.commit, "subject": self.subject}


@dataclass(frozen=True)
class BuildsCommits:
    """What ``commit_builds`` did: the commits, on which branch, and where they were pushed."""

    commits: tuple[BuildsCommit, ...] = ()
    branch: str | None = None
    pushed_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "commits": [c.to_dict() for c in self.commits],
            "branch": self.branch,
            "pushed": self.pushed_to is not None,
            "pushedTo": self.pushed_to,
        }


def render_builds(builds: ImageBuilds, previous: str | None = None) -> str:
    """The file's text: ``previous`` updated in place when given, else a new file."""
    yaml = _yaml()
    new = builds.to_dict()
    if previous is None or not previous.strip():
        out = io.StringIO()
        yaml.dump(new, out)
        return HEADER + out.getvalue()
    try:
        data = yaml.load(previous)
    except YAMLError as e:
        raise SourceError(f"{builds.file or 'builds.yaml'}: invalid YAML: {e}") from e
    if not isinstance(data, CommentedMap):
        raise SourceError(f"{builds.file or 'builds.yaml'}: not a mapping")
    _merge(data, new)
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _merge(old: CommentedMap, new: Mapping[str, Any]) -> None:
    """Set ``new``'s values into ``old`` keeping old keys' comments; new keys go in order."""
    for position, (key, value) in enumerate(new.items()):
        current = old.get(key)
        if isinstance(current, CommentedMap) and isinstance(value, Mapping):
            _merge(current, value)
        elif key in old:
            if current != value:
                old[key] = value
        else:
            old.insert(min(position, len(old)), key, value)


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def commit_builds(
    catalog: str | Path,
    changes: Sequence[BuildsFileChange],
    *,
    branch: str | None = None,
    push: bool = False,
    credentials: Credentials | None = None,
    policy: NetworkPolicy | None = None,
) -> BuildsCommits:
    """Write and commit each change (one commit per app); nothing when ``changes`` is empty."""
    root = Path(catalog).resolve()
    repo = _open_worktree(root)
    if not changes:
        return BuildsCommits((), branch)
    for change in changes:
        _check_clean(repo, root, change.path)
    if branch is not None:
        commits = _commit_on_branch(repo, root, changes, branch)
        pushed = _push_branch(repo, branch, credentials, policy) if push else None
        return BuildsCommits(commits, branch, pushed)
    made: list[BuildsCommit] = []
    for change in changes:
        path = root / change.path
        previous = path.read_text(encoding="utf-8") if path.exists() else None
        path.write_text(render_builds(change.builds, previous), encoding="utf-8")
        try:
            run(repo, ["add", "--", str(path)])
            run(repo, ["commit", "--quiet", "-m", change.message, "--", str(path)])
        except GitFailed as e:
            raise SourceError(f"{change.path}: commit failed: {e.detail.strip()}") from e
        made.append(_done(change, run(repo, ["rev-parse", "HEAD"])))
    pushed = _push(repo, credentials, policy) if push else None
    return BuildsCommits(tuple(made), None, pushed)


def _check_clean(repo: git.Repo, root: Path, rel: str) -> None:
    """The scan read the working tree's file: it must be what HEAD has, or the commit
    would carry someone's unfinished edit (or, on a branch, silently drop it)."""
    if run(repo, ["status", "--porcelain", "--", str(root / rel)]).strip():
        raise SourceError(
            f"{rel}: has uncommitted changes; commit or discard them first so each "
            "image build is a commit of its own"
        )


def _done(change: BuildsFileChange, commit: str) -> BuildsCommit:
    return BuildsCommit(change.app, change.path, commit, change.message.splitlines()[0])


def _commit_on_branch(
    repo: git.Repo, root: Path, changes: Sequence[BuildsFileChange], branch: str
) -> tuple[BuildsCommit, ...]:
    """Commits on a new ``branch`` from HEAD, made without touching the checkout."""
    try:
        run(repo, ["check-ref-format", "--branch", branch])
    except GitFailed as e:
        raise UsageError(f"--branch {branch!r} is not a valid branch name") from e
    ref = f"refs/heads/{branch}"
    try:
        run(repo, ["rev-parse", "--verify", "--quiet", ref])
    except GitFailed:
        pass
    else:
        raise UsageError(
            f"--branch {branch}: the branch exists already; delete it or choose another name "
            "(scan makes a new branch from HEAD for a pull request)"
        )
    parent = run(repo, ["rev-parse", "HEAD"])
    commits = []
    with tempfile.TemporaryDirectory(prefix="reconciler-builds-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        run(repo, ["read-tree", parent], env=env)
        for number, change in enumerate(changes):
            previous = _show(repo, parent, change.path)
            text = Path(tmp, f"builds-{number}.yaml")
            text.write_text(render_builds(change.builds, previous), encoding="utf-8")
            blob = run(repo, ["hash-object", "-w", str(text)])
            run(
                repo,
                ["update-index", "--add", "--cacheinfo", f"100644,{blob},{change.path}"],
                env=env,
            )
            tree = run(repo, ["write-tree"], env=env)
            try:
                parent = run(repo, ["commit-tree", tree, "-p", parent, "-m", change.message])
            except GitFailed as e:
                raise SourceError(f"{change.path}: commit failed: {e.detail.strip()}") from e
            commits.append(_done(change, parent))
    run(repo, ["update-ref", "-m", "reconciler images scan", ref, parent, _ZERO])
    return tuple(commits)


def _show(repo: git.Repo, commit: str, path: str) -> str | None:
    try:
        return run(repo, ["show", f"{commit}:{path}"]) + "\n"
    except GitFailed:
        return None


def _push_branch(
    repo: git.Repo, branch: str, credentials: Credentials | None, policy: NetworkPolicy | None
) -> str:
    """Push ``branch`` to the current branch's remote (else ``origin``), same name."""
    try:
        upstream = run(repo, ["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"])
        remote = upstream.partition("/")[0]
    except GitFailed:
        remote = "origin"
    try:
        url = run(repo, ["remote", "get-url", remote])
    except GitFailed as e:
        raise SourceError(
            f"committed on {branch}, but cannot push: no remote {remote!r} "
            "(add one with `git remote add origin URL`)"
        ) from e
    access = RemoteAccess.parse(url, credentials, policy)
    run_remote(
        repo,
        ["push", "--quiet", remote, f"refs/heads/{branch}:refs/heads/{branch}"],
        access,
        what=f"push to {access.display}",
    )
    return f"{remote}/{branch}"
