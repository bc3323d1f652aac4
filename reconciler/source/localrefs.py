"""The heads of a repository on this machine, listed in process: what ``git ls-remote
--heads`` answers, without its two processes.

A daemon whose catalog is a repository on the same machine (``--repo ./catalog``, a
``file://`` URL: the demo, the tests, a mirror on a shared volume) asks on every pass
whether its branch moved. ``git ls-remote`` answers by starting ``git-upload-pack`` in
that repository, which reads the refs and advertises them: two processes and about
5 ms of CPU a pass (a third of a settled pass's), for the content of a few files.

Here those files are read as Git's files backend keeps them
(https://git-scm.com/docs/gitrepository-layout): a loose ref is a file under
``refs/`` holding an object name, the others are lines of ``packed-refs``, and a
loose ref wins over a packed one of the same name. The loose files are listed before
``packed-refs`` is read, the order Git's own reader keeps, so a concurrent ``git
pack-refs`` (which writes ``packed-refs`` before it removes the loose files) or an
update (a ``.lock`` file renamed over the ref) is seen before or after, never lost.

Whatever this reading cannot be sure to see as ``git-upload-pack`` would gives None,
and the caller runs ``git ls-remote`` as before, so those answers and every error stay
Git's: a remote that is not a plain local repository (a URL with a host, a ``.git``
file of a linked worktree, a path Git would complete with ``.git``), a ref store that
is not files (reftable), a repository owned by another user (Git refuses it unless
``safe.directory`` says otherwise), hidden refs or config includes in any config
upload-pack reads, a namespace (``GIT_NAMESPACE``), a symbolic ref or a name Git would
not read among the heads, and a pattern with more than ``*`` and ``?`` in it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from urllib.parse import unquote, urlsplit

from reconciler.source.remote import RemoteAccess
from reconciler.source.runner import packed_refs

HEADS = "refs/heads/"
_OBJECT_NAME = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?\n?")
# a ref name component Git's check-ref-format accepts and that needs no further rule
# than the ones below (no control characters, space, ~^:?*[\ , no "..", "@{", no
# leading dot, no ".lock" ending): anything else is left to Git
_COMPONENT = re.compile(r"[A-Za-z0-9_+=,%@-][A-Za-z0-9_.+=,%@-]*")
# config that changes what upload-pack advertises, or pulls in more config to read
_ADVERTISING = ("hiderefs", "include")


def local_heads(
    access: RemoteAccess,
    patterns: Sequence[str],
    environ: Mapping[str, str] | None = None,
) -> dict[str, str] | None:
    """``{ref: object}`` for the heads of ``access``'s repository that ``patterns`` match,
    as ``git ls-remote --heads <url> <patterns>`` lists them; None when Git must answer.

    A pattern matches a ref as ``git ls-remote`` matches it: against the ref's end, at a
    ``/`` (``*/<pattern>`` against ``/<ref>``), ``*`` also across ``/``; no pattern
    matches every head.
    """
    env = os.environ if environ is None else environ
    if any(not p or any(c in p for c in "[\\") for p in patterns):
        return None
    if "GIT_NAMESPACE" in env or "GIT_CONFIG_PARAMETERS" in env or "GIT_CONFIG_COUNT" in env:
        return None
    git_dir = _git_dir(access)
    if git_dir is None or not _plain_config(git_dir, env):
        return None
    loose = _loose_heads(git_dir)
    if loose is None:
        return None
    packed = _packed_heads(git_dir)
    if packed is None:
        return None
    heads = {**packed, **loose}
    tails = ["*/" + p for p in patterns]
    return {
        ref: sha
        for ref, sha in sorted(heads.items())
        if not tails or any(fnmatchcase("/" + ref, tail) for tail in tails)
    }


def _git_dir(access: RemoteAccess) -> Path | None:
    """The repository ``access`` names when it is a plain one on this machine: a bare
    repository, or a working tree's ``.git`` directory, owned by this user."""
    if access.local_path is not None:
        path = access.local_path
    else:
        parts = urlsplit(access.url)
        if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
            return None
        path = Path(unquote(parts.path))
    dot_git = path / ".git"
    if os.path.lexists(dot_git):  # what upload-pack tries first
        if not dot_git.is_dir() or dot_git.is_symlink():
            return None  # a linked worktree's or a separated repository's .git file
        path = dot_git
    try:
        if os.stat(path).st_uid != os.getuid():
            return None
    except OSError:
        return None
    layout = (path / "HEAD").is_file() and (path / "objects").is_dir()
    if not layout or not (path / "refs").is_dir() or os.path.lexists(path / "reftable"):
        return None
    if os.path.lexists(path / "commondir"):  # a linked worktree's own git directory
        return None
    return path


def _plain_config(git_dir: Path, env: Mapping[str, str]) -> bool:
    """Whether no config upload-pack would read hides refs, includes more, or asks for
    another ref store (``extensions.refStorage``)."""
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = [str(git_dir / "config")]
    if "GIT_CONFIG_GLOBAL" in env:
        files.append(env["GIT_CONFIG_GLOBAL"])
    else:
        files += [os.path.join(xdg, "git", "config") if xdg else ""]
        files += [os.path.join(home, ".gitconfig") if home else ""]
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        files.append(env.get("GIT_CONFIG_SYSTEM", "/etc/gitconfig"))
    for name in files:
        if not name or name == os.devnull:
            continue
        try:
            with open(name, encoding="utf-8", errors="replace") as handle:
                text = handle.read().lower()
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if any(word in text for word in _ADVERTISING):
            return False
        if name == files[0] and "refstorage" in text:
            return False
    return True


def _loose_heads(git_dir: Path) -> dict[str, str] | None:
    """The loose refs under ``refs/heads``; None when one is not a plain object name
    under a name Git reads (a symbolic ref, a file Git would skip or complain of)."""
    found: dict[str, str] = {}
    folders = [(str(git_dir / "refs" / "heads"), HEADS)]
    while folders:
        folder, prefix = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        except OSError:
            return None
        for entry in entries:
            name = entry.name
            if name.endswith(".lock"):  # an update under way: the ref is the file beside it
                continue
            if not _COMPONENT.fullmatch(name) or ".." in name or name.endswith("."):
                return None
            if entry.is_symlink():
                return None
            if entry.is_dir():
                folders.append((entry.path, f"{prefix}{name}/"))
                continue
            try:
                with open(entry.path, encoding="ascii", errors="replace") as handle:
                    content = handle.read()
            except FileNotFoundError:  # packed or deleted meanwhile: packed-refs tells
                continue
            except OSError:
                return None
            if not _OBJECT_NAME.fullmatch(content):
                return None
            found[prefix + name] = content.rstrip("\n")
    return found


def _packed_heads(git_dir: Path) -> dict[str, str] | None:
    """The heads ``packed-refs`` lists; None when a line is not one Git writes."""
    found: dict[str, str] = {}
    try:
        for sha, ref in packed_refs(git_dir):
            if not _OBJECT_NAME.fullmatch(sha) or not ref.startswith("refs/"):
                return None
            if ref.startswith(HEADS):
                found[ref] = sha
    except (OSError, UnicodeDecodeError):
        return None
    return found
