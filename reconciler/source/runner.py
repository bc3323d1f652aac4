"""Run Git through gitpython: the one place Git failures become ``SourceError``.

Every Git process of ``reconciler.source`` goes through ``run`` (local, no retry)
or ``run_remote`` (bounded in time, retried with backoff on transient failures).
Git's stderr is redacted before it reaches an exception or a log record, and
gitpython's own exceptions (which quote the whole command line) never escape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import git

from reconciler.model.errors import SourceError
from reconciler.source.redact import redact_text
from reconciler.source.remote import RemoteAccess

log = logging.getLogger("reconciler.source")

# Failures that retrying cannot fix: answer at once instead of after the backoff.
_PERMANENT = (
    "couldn't find remote ref",
    "authentication failed",
    "could not read username",
    "could not read password",
    "permission denied",
    "repository not found",
    "does not appear to be a git repository",
    "not found",
    "host key verification failed",
    "error: 401",
    "error: 403",
    "the requested url returned error: 4",
    "not a valid object name",
    "invalid refspec",
    "no such remote",
    "[rejected]",
    "[remote rejected]",
)


class MissingRemoteBranch(SourceError):
    """The remote exists but has no such branch (the status branch before its first write)."""


class GitFailed(SourceError):
    """A Git command failed; ``detail`` holds Git's redacted stderr."""

    def __init__(self, message: str, detail: str = "", *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.detail = detail
        self.timed_out = timed_out


def run(
    repo: git.Repo | Path,
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    secrets: Sequence[str] = (),
    what: str = "",
) -> str:
    """Run ``git ARGS`` in ``repo``; raise ``GitFailed`` with redacted stderr on failure."""
    cmd = repo.git if isinstance(repo, git.Repo) else git.Git(str(repo))
    try:
        status, out, err = cmd.execute(
            ["git", *args],
            with_extended_output=True,
            with_exceptions=False,
            kill_after_timeout=timeout,
            env=env,
        )
    except git.GitCommandNotFound as e:
        raise SourceError("git is not installed (no `git` on PATH)") from e
    if status == 0:
        return _text(out)
    full = redact_text(_text(err), secrets)
    timed_out = full.startswith("Timeout:") or "timed out" in full.lower()
    summary = f"timed out after {timeout:g}s" if full.startswith("Timeout:") else _summarize(full)
    label = what or f"git {args[0]}"
    raise GitFailed(f"{label}: {summary}", full, timed_out=timed_out)


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def run_binary(repo: git.Repo, args: Sequence[str]) -> bytes:
    """Like ``run`` for local commands whose stdout is raw bytes (``cat-file``)."""
    try:
        status, out, err = repo.git.execute(
            ["git", *args],
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
        )
    except git.GitCommandNotFound as e:
        raise SourceError("git is not installed (no `git` on PATH)") from e
    if status != 0:
        text = redact_text(_text(err))
        raise GitFailed(f"git {args[0]}: {_summarize(text)}", text)
    return out if isinstance(out, bytes) else out.encode("utf-8")


def run_remote(
    repo: git.Repo | Path,
    args: Sequence[str],
    access: RemoteAccess,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Run a Git command that talks to ``access``'s remote, bounded and retried.

    ``what`` names the operation for messages (``fetch file:///x``); it must
    already be redacted. A missing remote branch raises ``MissingRemoteBranch``.
    """
    policy = access.policy
    attempts = max(1, policy.attempts)
    for attempt in range(1, attempts + 1):
        try:
            return run(
                repo,
                args,
                env=access.env(),
                timeout=policy.timeout,
                secrets=access.secrets(),
                what=what,
            )
        except GitFailed as e:
            lowered = e.detail.lower()
            if "couldn't find remote ref" in lowered:
                raise MissingRemoteBranch(f"{what}: no such branch on the remote") from e
            permanent = any(p in lowered for p in _PERMANENT) and not e.timed_out
            if permanent or attempt == attempts:
                suffix = "" if attempt == 1 else f" (gave up after {attempt} attempts)"
                raise GitFailed(f"{e}{suffix}", e.detail, timed_out=e.timed_out) from e
            delay = policy.delay(attempt)
            log.warning("%s (attempt %d/%d); retrying in %.1fs", e, attempt, attempts, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def open_repo(path: Path) -> git.Repo:
    """Open an existing repository, translating gitpython's errors."""
    try:
        return git.Repo(str(path))
    except git.NoSuchPathError as e:
        raise SourceError(f"{path}: no such directory") from e
    except git.InvalidGitRepositoryError as e:
        raise SourceError(f"{path}: not a Git repository") from e


def init_repo(path: Path, *, bare: bool) -> git.Repo:
    path.mkdir(parents=True, exist_ok=True)
    run(path, ["init", "--quiet", *(["--bare"] if bare else []), str(path)])
    return git.Repo(str(path))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a cache slot) across processes."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _summarize(stderr: str) -> str:
    """Git's stderr without progress noise, on one line."""
    lines = [
        line.strip()
        for line in stderr.replace("\r", "\n").splitlines()
        if line.strip() and not line.lstrip().startswith(("remote: Counting", "remote: Compress"))
    ]
    return "; ".join(lines[-4:]) or "failed"
