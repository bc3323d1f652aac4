"""``reconciler channel set``: move a channel pointer with a one-line commit.

Releasing is a commit, not an API call: this edits
``apps/<app>/channels.yaml`` in a catalog checkout with a ruamel.yaml
round-trip (comments, order and quoting survive), checks that the diff is
exactly one line, validates the move (the app and version exist, the version
is not yanked, the channel does not move backwards unless forced) and commits
only that file. ``push=True`` pushes the commit to the branch's upstream, bounded
and retried like every other network operation.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import ScalarString

from reconciler.model.errors import ReconcilerError, SourceError, UsageError
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess
from reconciler.source.runner import GitFailed, run, run_remote

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ChannelMoveRefused(ReconcilerError):
    """The move is not allowed (unknown app or version, yanked, backwards without --force)."""

    reason = "ChannelMoveRefused"


@dataclass(frozen=True)
class ChannelMove:
    """What ``set_channel`` did; ``commit`` is None when the channel already pointed there."""

    app: str
    channel: str
    previous: str | None
    version: str
    file: str
    commit: str | None = None
    pushed_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "channel": self.channel,
            "from": self.previous,
            "to": self.version,
            "file": self.file,
            "commit": self.commit,
            "pushed": self.pushed_to is not None,
            "pushedTo": self.pushed_to,
        }


def set_channel(
    catalog: str | Path,
    app: str,
    channel: str,
    version: str,
    *,
    force: bool = False,
    push: bool = False,
    credentials: Credentials | None = None,
    policy: NetworkPolicy | None = None,
) -> ChannelMove:
    """Point ``app``'s ``channel`` at ``version`` in the checkout ``catalog`` and commit it."""
    root = Path(catalog).resolve()
    repo = _open_worktree(root)
    for label, name in (("app", app), ("channel", channel)):
        if not _NAME.match(name):
            raise UsageError(f"{label} {name!r} is not a valid name (a DNS-1123 label)")
    _check_version(root, app, version)
    path = root / "apps" / app / "channels.yaml"
    rel = path.relative_to(root).as_posix()
    text = _read(path, rel)
    previous = _current(text, rel, channel)
    if previous == version:
        return ChannelMove(app, channel, previous, version, rel)
    _check_direction(app, channel, previous, version, force=force)
    _check_clean(repo, path)
    path.write_text(edit_channel(text, channel, version, rel), encoding="utf-8")
    commit = _commit(repo, path, _message(app, channel, previous, version))
    pushed = _push(repo, credentials, policy) if push else None
    return ChannelMove(app, channel, previous, version, rel, commit, pushed)


def edit_channel(text: str, channel: str, version: str, where: str = "channels.yaml") -> str:
    """``text`` with ``channels.<channel>`` set to ``version``, changing exactly one line.

    A ruamel.yaml round-trip is tried first; if it would reformat anything else
    (indentation, flow style, line width), the value is replaced in place at the
    position ruamel reports, which preserves every other byte.
    """
    yaml = _yaml()
    data = _load(yaml, text, where)
    channels = data["channels"]
    old = channels.get(channel)
    channels[channel] = type(old)(version) if isinstance(old, ScalarString) else version
    out = io.StringIO()
    yaml.dump(data, out)
    dumped = out.getvalue()
    if _changed_lines(text, dumped) == 1 or (old is None and _changed_lines(text, dumped) == 0):
        return dumped
    if old is None:
        raise ChannelMoveRefused(f"{where}: cannot add channel {channel!r} without reformatting")
    line, col = channels.lc.value(channel)
    return _splice(text, line, col, str(old), version)


def _splice(text: str, line: int, col: int, old: str, new: str) -> str:
    lines = text.splitlines(keepends=True)
    current = lines[line]
    quote = current[col] if current[col] in "'\"" else ""
    token = f"{quote}{old}{quote}"
    if not current.startswith(token, col):
        raise ChannelMoveRefused(f"cannot locate the value {old!r} on line {line + 1}")
    lines[line] = current[:col] + f"{quote}{new}{quote}" + current[col + len(token) :]
    return "".join(lines)


def _changed_lines(before: str, after: str) -> int:
    a, b = before.splitlines(), after.splitlines()
    if len(a) != len(b):
        return max(len(a), len(b))
    return sum(1 for x, y in zip(a, b, strict=True) if x != y)


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _load(yaml: YAML, text: str, where: str) -> CommentedMap:
    try:
        data = yaml.load(text)
    except YAMLError as e:
        raise ChannelMoveRefused(f"{where}: invalid YAML: {e}") from e
    if not isinstance(data, CommentedMap) or data.get("kind") != "Channels":
        raise ChannelMoveRefused(f"{where}: not a Channels file (kind: Channels)")
    if not isinstance(data.get("channels"), CommentedMap):
        raise ChannelMoveRefused(f"{where}: channels must be a mapping of channel: version")
    return data


def _read(path: Path, rel: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        app_dir = path.parent
        what = "has no channels.yaml" if app_dir.is_dir() else "does not exist"
        raise ChannelMoveRefused(f"{rel}: app {app_dir.name} {what}") from e
    except OSError as e:
        raise ChannelMoveRefused(f"{rel}: cannot read ({e.strerror})") from e


def _current(text: str, rel: str, channel: str) -> str | None:
    channels = _load(_yaml(), text, rel)["channels"]
    value = channels.get(channel)
    if value is None:
        known = ", ".join(sorted(channels)) or "none"
        raise ChannelMoveRefused(
            f"{rel}: no channel {channel!r} (channels: {known}); add it to the file by hand"
        )
    return str(value)


def _check_version(root: Path, app: str, version: str) -> None:
    try:
        parse_version(version)
    except VersionSyntaxError as e:
        raise UsageError(str(e)) from e
    app_dir = root / "apps" / app
    if not app_dir.is_dir():
        raise ChannelMoveRefused(f"apps/{app}: no such app in the catalog at {root}")
    rel = f"apps/{app}/versions/{version}/version.yaml"
    try:
        text = (root / rel).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ChannelMoveRefused(f"{rel}: app {app} has no version {version}") from e
    try:
        data = YAML(typ="safe").load(text)
    except YAMLError as e:
        raise ChannelMoveRefused(f"{rel}: invalid YAML: {e}") from e
    if isinstance(data, dict) and data.get("yanked") is True:
        raise ChannelMoveRefused(f"{rel}: {app} {version} is yanked; a channel cannot point to it")


def _check_direction(
    app: str, channel: str, previous: str | None, version: str, *, force: bool
) -> None:
    if previous is None or force:
        return
    try:
        backwards = parse_version(version) < parse_version(previous)
    except VersionSyntaxError:
        return  # the current pointer is broken; moving it anywhere valid is an improvement
    if backwards:
        raise ChannelMoveRefused(
            f"{app}: channel {channel} would move backwards ({previous} -> {version}); "
            "use --force to move it back"
        )


def _open_worktree(root: Path) -> git.Repo:
    try:
        repo = git.Repo(str(root), search_parent_directories=True)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError) as e:
        raise UsageError(f"--repo {root}: not a Git checkout") from e
    if repo.bare:
        raise UsageError(f"--repo {root}: a bare repository; channel set needs a checkout")
    return repo


def _check_clean(repo: git.Repo, path: Path) -> None:
    state = run(repo, ["status", "--porcelain", "--", str(path)])
    if state.strip():
        raise ChannelMoveRefused(
            f"{path.name}: has uncommitted changes; commit or discard them first "
            "so the channel move is a commit of its own"
        )


def _message(app: str, channel: str, previous: str | None, version: str) -> str:
    backwards = False
    with contextlib.suppress(VersionSyntaxError):
        backwards = previous is not None and parse_version(version) < parse_version(previous)
    verb = "move channel back" if backwards else "move channel"
    return (
        f"{app}: {verb} {channel} {previous} -> {version}\n\n"
        f"Channel {channel} of {app} now points to {version} (was {previous}).\n"
        "Made by `reconciler channel set`.\n\n"
        f"Reconciler-App: {app}\nReconciler-Channel: {channel}\n"
        f"Reconciler-From: {previous}\nReconciler-To: {version}\n"
    )


def _commit(repo: git.Repo, path: Path, message: str) -> str:
    try:
        run(repo, ["commit", "--quiet", "-m", message, "--", str(path)])
    except GitFailed as e:
        raise SourceError(f"{path.name}: commit failed: {e.detail.strip()}") from e
    return run(repo, ["rev-parse", "HEAD"])


def _push(repo: git.Repo, credentials: Credentials | None, policy: NetworkPolicy | None) -> str:
    try:
        upstream = run(repo, ["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"])
        branch = run(repo, ["symbolic-ref", "--short", "HEAD"])
    except GitFailed as e:
        raise SourceError(
            "committed, but cannot push: the current branch has no upstream "
            "(set one with `git push -u <remote> <branch>`)"
        ) from e
    remote, _, remote_branch = upstream.partition("/")
    url = run(repo, ["remote", "get-url", remote])
    access = RemoteAccess.parse(url, credentials, policy)
    try:
        run_remote(
            repo,
            ["push", "--quiet", remote, f"refs/heads/{branch}:refs/heads/{remote_branch}"],
            access,
            what=f"push to {access.display}",
        )
    except GitFailed as e:
        if "[rejected]" in e.detail or "[remote rejected]" in e.detail:
            raise SourceError(
                f"committed, but the push to {access.display} was rejected: the remote has "
                "new commits; run `git pull --rebase` and `git push`"
            ) from e
        raise
    return upstream
