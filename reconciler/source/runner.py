"""Run Git through gitpython: the one place Git failures become ``SourceError``.

Every Git process of ``reconciler.source`` goes through ``run`` (local, no retry)
or ``run_remote`` (bounded in time, retried with backoff on transient failures).
Git's stderr is redacted before it reaches an exception or a log record, and
gitpython's own exceptions (which quote the whole command line) never escape.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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


def read_ref(repo: git.Repo, ref: str) -> str | None:
    """The commit ``ref`` (``HEAD``, ``refs/...``) names, or None when there is none.

    Read in process, from the ref's file or ``packed-refs`` (what ``git rev-parse``
    would read, without its process: the daemon looks at a few refs on every pass).
    A ``refs/...`` name found in neither, in a repository whose refs are those files,
    is no ref: None without a process (a status branch not written yet, the cache's
    first sync). Anything else is asked of ``git rev-parse``, so None is always Git's
    own answer, also for a ref store gitpython cannot read (reftable). The refs read so
    are the daemon's own (fetched branches, a checkout's HEAD), which name commits.
    """
    try:
        return read_files_ref(repo, ref)
    except ValueError:
        if ref.startswith("refs/") and files_backend(repo):
            return None
    except OSError:
        pass
    try:
        return run(repo, ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
    except GitFailed:
        return None


# symbolic refs followed at most (Git's own limit, SYMREF_MAXDEPTH, is 5)
SYMREF_DEPTH = 5
_HEXSHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def read_files_ref(repo: git.Repo, ref: str) -> str:
    """The object ``ref`` (``HEAD``, ``refs/...``) names, read from its file or
    ``packed-refs`` as Git's files backend keeps them, following ``ref:`` links.

    ValueError: no such ref there (or a file that names none); OSError: a file that
    cannot be read. What gitpython's ``SymbolicReference.dereference_recursive`` reads,
    without its check of each path (``os.path.realpath``, a ``stat`` per directory of
    the path, on every read: most of the daemon's in-process ref reads' cost), which
    guards names that come from outside; the names read here are checked below, and
    any other is left to gitpython, as is a linked worktree (whose refs are in two places).
    """
    if repo.git_dir != repo.common_dir:
        return str(git.SymbolicReference.dereference_recursive(repo, ref))
    for _ in range(SYMREF_DEPTH):
        parts = ref.split("/")
        if ref != "HEAD" and (
            parts[0] != "refs" or any(not p or p.startswith(".") or "\\" in p for p in parts)
        ):
            return str(git.SymbolicReference.dereference_recursive(repo, ref))
        base = repo.git_dir if ref == "HEAD" else repo.common_dir
        try:
            with open(os.path.join(base, ref), encoding="utf-8") as handle:
                tokens = handle.read().split()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return _packed_ref(repo, ref)
        if len(tokens) == 2 and tokens[0] == "ref:":
            ref = tokens[1]
            continue
        if tokens and _HEXSHA.fullmatch(tokens[0]):
            return tokens[0]
        raise ValueError(f"{ref}: not a reference Git would read")
    raise ValueError(f"{ref}: more than {SYMREF_DEPTH} symbolic references deep")


def packed_refs(git_dir: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """``(object, ref)`` for each ref ``packed-refs`` in ``git_dir`` lists, as written
    (none when there is no such file). The header and peeled tags' lines are skipped;
    a file that is not UTF-8 raises ``UnicodeDecodeError`` (a ``ValueError``)."""
    path = os.path.join(git_dir, "packed-refs")
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as handle:
        for line in handle:
            if line[:1] in ("#", "^"):  # the header; a peeled tag's object
                continue
            sha, _, name = line.rstrip("\n").partition(" ")
            yield sha, name


def _packed_ref(repo: git.Repo, ref: str) -> str:
    """``ref``'s object as ``packed-refs`` lists it; ValueError when it does not."""
    for sha, name in packed_refs(repo.common_dir):
        if name == ref:
            return sha
    raise ValueError(f"{ref}: no such reference")


def files_backend(repo: git.Repo) -> bool:
    """Whether ``repo`` keeps its refs as loose files and ``packed-refs`` (not reftable,
    whose repositories have a ``reftable/`` directory), as gitpython reads them."""
    return not os.path.isdir(os.path.join(repo.common_dir, "reftable"))


def current_branch(repo: git.Repo) -> str:
    """The branch ``HEAD`` names (``git symbolic-ref --short HEAD``).

    Read from the ``HEAD`` file where it is a plain ``ref: refs/heads/<name>`` (a clone
    or an init, whose branch need not exist yet); Git is asked otherwise (a reftable
    repository's placeholder, a detached ``HEAD``, which fails as Git fails).
    """
    try:
        with open(os.path.join(repo.git_dir, "HEAD"), encoding="utf-8") as handle:
            target = handle.read().strip()
    except OSError:
        target = ""
    name = target.removeprefix("ref: refs/heads/")
    if name != target and name and name != ".invalid" and files_backend(repo):
        return name
    return run(repo, ["symbolic-ref", "--short", "HEAD"])


def parse_listing(output: str) -> dict[str, str]:
    """``git ls-remote``'s lines (``<sha>\t<ref>``) -> {ref: sha}."""
    listed = {}
    for line in output.splitlines():
        sha, _, ref = line.partition("\t")
        if ref:
            listed[ref] = sha
    return listed


def open_repo(path: Path) -> git.Repo:
    """Open an existing repository, translating gitpython's errors."""
    try:
        return git.Repo(str(path))
    except git.NoSuchPathError as e:
        raise SourceError(f"{path}: no such directory") from e
    except git.InvalidGitRepositoryError as e:
        raise SourceError(f"{path}: not a Git repository") from e


# Git's own defaults for ``gc.auto`` (loose objects) and ``gc.autoPackLimit`` (packs): the
# thresholds ``housekeep`` applies to the repositories reconciler keeps in its cache.
GC_LOOSE_OBJECTS = 6700
GC_PACKS = 50

# In every repository the cache holds: Git would otherwise run ``git maintenance run
# --auto`` after each fetch and ``git gc --auto`` after each commit and push, two extra
# processes (each a fork and a look at the object store) on every poll of the daemon,
# only to find nothing to do nearly always. ``housekeep`` does the same check in
# process and runs gc only when it is due.
QUIET_HOUSEKEEPING = {"maintenance.auto": "false", "gc.auto": "0"}


def configure(repo: git.Repo, values: Mapping[str, str]) -> None:
    """Set each ``section[.subsection].key`` in ``repo``'s own config, where it differs.

    In process, through gitpython's reader and writer (which takes Git's
    ``config.lock``): no Git process, and no write at all when everything is set
    already, the usual case on every start after the first.
    """
    reader = repo.config_reader("repository")
    missing = {}
    for name, value in values.items():
        section, key = _config_section(name)
        current = reader.get(section, key) if reader.has_option(section, key) else None
        if current != value:
            missing[section, key] = value
    if not missing:
        return
    with repo.config_writer("repository") as writer:
        for (section, key), value in missing.items():
            writer.set_value(section, key, value)


def _config_section(name: str) -> tuple[str, str]:
    """``remote.origin.url`` -> ``('remote "origin"', 'url')``, as gitpython names them."""
    head, _, key = name.rpartition(".")
    section, dot, subsection = head.partition(".")
    return (f'{section} "{subsection}"' if dot else section), key


def housekeep(repo: git.Repo, *, own: bool = True) -> None:
    """Let Git consolidate loose objects and packs, once its ``gc --auto`` thresholds are met.

    The test is Git's own (``too_many_loose_objects``, ``too_many_packs``), done in
    process: no process at all until gc is due, then one ``git gc --auto``, which
    detaches as Git's automatic gc does. ``own``: a repository of the cache, whose
    config turns automatic gc off (``QUIET_HOUSEKEEPING``), gets Git's default
    thresholds on the command line; a person's repository (``own=False``) keeps
    whatever its config says. A gc that fails is left for the next call.
    """
    if not gc_due(Path(repo.git_dir)):
        return
    limits = ["-c", f"gc.auto={GC_LOOSE_OBJECTS}", "-c", f"gc.autoPackLimit={GC_PACKS}"]
    with contextlib.suppress(GitFailed):  # an unfinished gc must not fail what called it
        run(repo, [*(limits if own else []), "gc", "--auto", "--quiet"], timeout=600)


def gc_due(git_dir: Path) -> bool:
    """Whether ``git gc --auto`` would find work with Git's default thresholds.

    Git estimates the loose objects from one of the 256 fan-out directories
    (``objects/17``) and counts the packs that have no ``.keep`` file.
    """
    objects = git_dir / "objects"
    limit = -(-GC_LOOSE_OBJECTS // 256)  # Git's DIV_ROUND_UP(gc.auto, 256)
    loose = 0
    with contextlib.suppress(FileNotFoundError), os.scandir(objects / "17") as entries:
        for entry in entries:
            if len(entry.name) == 38 and all(c in "0123456789abcdef" for c in entry.name):
                loose += 1
                if loose > limit:
                    return True
    try:
        names = set(os.listdir(objects / "pack"))
    except FileNotFoundError:
        return False
    packs = [n for n in names if n.endswith(".pack") and n[:-5] + ".keep" not in names]
    return len(packs) > GC_PACKS


# For ``git clone`` of the cache's own repositories: no template. Git's default one (or
# a person's ``init.templateDir``) is a dozen inert ``hooks/*.sample`` scripts,
# ``info/exclude`` and a ``description``: 18 of the 27 files and directories an init
# makes, none read by anything in the cache, each a file system inode to create and
# later remove (inode allocation was the largest share of the test suite's kernel time).
# Nor does a hook of a person's template run in the cache's clones.
NO_TEMPLATE = "--template="


def init_bare(path: Path, settings: Mapping[str, str] | None = None) -> git.Repo:
    """A new, empty bare repository of the cache at ``path``, written in process, with
    ``settings`` (``section[.subsection].key``: value) in its config.

    What ``git init --bare --template=`` writes (Git's repository layout): ``config``
    (format version 0, bare, and Git's probes of the file system for ``filemode`` and
    ``ignorecase``), ``objects/info``, ``objects/pack``, ``refs/heads``, ``refs/tags``
    and ``HEAD`` naming an unborn ``main``. ``HEAD`` comes last: the cache takes a
    directory with a ``HEAD`` file for a repository, so a crash before it leaves a
    directory the next start writes again. A daemon starting on an empty cache (a pod
    without a volume, each test) made one ``git init`` process for it. The settings are
    written with the rest of the file, as ``git config`` would write them, where their
    values need no quoting; any other goes through ``configure`` (a config reader and
    writer each, most of a new mirror's cost once the process was gone).
    """
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    config = path / "config"
    config.write_text("[core]\n\trepositoryformatversion = 0\n")
    mode = config.stat().st_mode
    config.chmod(mode ^ 0o100)  # Git's probe: does the file system keep the x bit?
    filemode = config.stat().st_mode != mode
    config.chmod(mode)
    text = f"\tfilemode = {str(filemode).lower()}\n\tbare = true\n"
    if (path / "CoNfIg").exists():  # Git's probe of a case-insensitive file system
        text += "\tignorecase = true\n"
    sections: dict[str, list[str]] = {}
    rest: dict[str, str] = {}
    for name, value in (settings or {}).items():
        section, key = _config_section(name)
        if _PLAIN_VALUE.fullmatch(value) and _PLAIN_NAME.fullmatch(name):
            sections.setdefault(section, []).append(f"\t{key} = {value}\n")
        else:
            rest[name] = value
    for section, lines in sections.items():
        text += f"[{section}]\n" + "".join(lines)
    with open(config, "a", encoding="utf-8") as handle:
        handle.write(text)
    head = path / "HEAD.new"
    head.write_text("ref: refs/heads/main\n")
    head.rename(path / "HEAD")
    repo = git.Repo(str(path))
    if rest:
        configure(repo, rest)
    return repo


# What ``init_bare`` writes into a config file as it is: a value Git reads back the same
# without quotes (no space, quote, backslash or comment character), under a plain name
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9._~:/?@!$&'()*+,=%-]+")
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*(\.[A-Za-z0-9._-]+)?\.[A-Za-z][A-Za-z0-9-]*")


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
