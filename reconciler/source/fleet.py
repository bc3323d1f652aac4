"""Every cluster's status branch, read for the wave gate (SPEC section 4b), at what changed.

``FleetStatus`` fetches ``status/*`` once per pass (``refresh``) and gives each other
cluster's records with the time since which each says what it says (``SeenRecord``).
A branch is read again only when its head moved, and then only the commits since the
head read before (``git log OLD..NEW``): 200 clusters of 50 instances cost one fetch
and one ref listing per pass, not 200 tree reads. ``ReleaseHistory`` answers the other
question the gate asks: does a record's ``sourceCommit`` contain the catalog commit
that made the version desired (so a Ready from an older release never opens a gate)?
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import git

from reconciler.catalog import YamlReadError, load_bounded
from reconciler.model.errors import SourceError
from reconciler.model.status import InstanceStatus
from reconciler.model.waves import SeenRecord
from reconciler.source import objects
from reconciler.source.remote import RemoteAccess
from reconciler.source.runner import GitFailed, locked, run, run_remote
from reconciler.status import (
    INSTANCES_DIR,
    TRAILER_INSTANCE,
    TRAILER_PHASE,
    TRAILER_VERSION,
    StatusFileError,
    parse_trailers,
)

log = logging.getLogger("reconciler.source")

_LOG_FORMAT = "%H%x1f%cI%x1f%(trailers:only,unfold)%x1e"
_CHANNEL_COMMITS = 50  # commits of a channels.yaml looked at to find where a release began
_LOCAL_PREFIX = "refs/heads/status/"
_REMOTE_PREFIX = "refs/remotes/origin/status/"
_UNKNOWN = datetime.max.replace(tzinfo=UTC)  # a time not known: no soak has run yet


@dataclass
class _Run:
    """An instance's latest unbroken run of commits with one phase and version."""

    phase: str
    version: str
    since: datetime


@dataclass
class _BranchView:
    head: str
    records: dict[str, InstanceStatus] = field(default_factory=dict)
    runs: dict[str, _Run] = field(default_factory=dict)
    head_time: datetime = field(default_factory=lambda: _UNKNOWN)


class FleetStatus:
    """The status branches of every cluster in one repository (``StatusLedger.fleet()``)."""

    def __init__(
        self,
        repo: git.Repo,
        access: RemoteAccess,
        lock: Path,
        parse: Callable[[bytes, str], InstanceStatus],
        *,
        remote: bool,
    ) -> None:
        self._repo = repo
        self._access = access
        self._lock = lock
        self._parse = parse
        self._remote = remote
        self._prefix = _REMOTE_PREFIX if remote else _LOCAL_PREFIX
        self._views: dict[str, _BranchView] = {}
        self.reads = 0  # branches read (again) since this reader began: what the cache saves

    @property
    def repo(self) -> git.Repo:
        return self._repo

    def refresh(self, catalog_branch: str | None = None) -> None:
        """One fetch of every ``status/*`` branch (and, for a URL, the catalog's history).

        The catalog's own clone is shallow; freshness needs its history, which a URL's
        mirror gets here (a local repository has it already).
        """
        if not self._remote:
            return
        refspecs = [f"+refs/heads/status/*:{_REMOTE_PREFIX}*"]
        if catalog_branch is not None:
            refspecs.append(f"+{catalog_branch}:refs/reconciler/catalog")
        with locked(self._lock):
            run_remote(
                self._repo,
                ["fetch", "--quiet", "--no-tags", "--prune", "origin", *refspecs],
                self._access,
                what=f"fetch the status branches of {self._access.display}",
            )

    def records(self, skip: str = "") -> dict[tuple[str, str], SeenRecord]:
        """Every cluster's records (but ``skip``'s), by (cluster, instance)."""
        out: dict[tuple[str, str], SeenRecord] = {}
        with locked(self._lock):
            heads = self._heads()
            self._views = {c: v for c, v in self._views.items() if c in heads}
            for cluster, head in heads.items():
                if cluster == skip:
                    continue
                view = self._views.get(cluster)
                if view is None or view.head != head:
                    view = self._read(cluster, head, view)
                    self._views[cluster] = view
                for name, status in view.records.items():
                    out[(cluster, name)] = SeenRecord(status, _since(view, name, status))
        return out

    def _heads(self) -> dict[str, str]:
        output = run(
            self._repo,
            ["for-each-ref", "--format=%(refname) %(objectname)", self._prefix],
            what="list the status branches",
        )
        heads = {}
        for line in output.splitlines():
            ref, _, sha = line.partition(" ")
            name = ref.removeprefix(self._prefix)
            if name and "/" not in name:
                heads[name] = sha
        return heads

    def _read(self, cluster: str, head: str, before: _BranchView | None) -> _BranchView:
        self.reads += 1
        view = _BranchView(head)
        root = objects.read_tree(self._repo, objects.root_tree_of(self._repo, head))
        sub = root.get(INSTANCES_DIR)
        if sub is not None and sub[1] == objects.TREE_MODE:
            for name, (sha, _mode) in objects.read_tree(self._repo, sub[0]).items():
                if not name.endswith(".yaml"):
                    continue
                try:
                    status = self._parse(sha, f"{INSTANCES_DIR}/{name}")
                except StatusFileError as e:
                    log.warning("status branch of %s: %s (left out of the wave gate)", cluster, e)
                    continue
                view.records[status.instance] = status
        since = before.head if before is not None and self._ancestor(before.head, head) else None
        if since is not None and before is not None:
            view.runs = dict(before.runs)
        self._follow(view, since)
        return view

    def _follow(self, view: _BranchView, since: str | None) -> None:
        """Advance each instance's run over the commits after ``since`` (all: None)."""
        span = f"{since}..{view.head}" if since else view.head
        output = run(
            self._repo,
            ["log", "--reverse", f"--format={_LOG_FORMAT}", span],
            what="read the history of a status branch",
        )
        for chunk in output.split("\x1e"):
            fields = chunk.strip("\n").split("\x1f")
            if len(fields) != 3:
                continue
            when = datetime.fromisoformat(fields[1])
            view.head_time = when
            trailers = parse_trailers(fields[2])
            instance = trailers.get(TRAILER_INSTANCE)
            if not instance:
                continue
            phase, version = trailers.get(TRAILER_PHASE, ""), trailers.get(TRAILER_VERSION, "")
            run_now = view.runs.get(instance)
            if run_now is None or (run_now.phase, run_now.version) != (phase, version):
                view.runs[instance] = _Run(phase, version, when)

    def _ancestor(self, old: str, new: str) -> bool:
        return is_ancestor(self._repo, old, new)


def _since(view: _BranchView, name: str, status: InstanceStatus) -> datetime:
    """When the record's phase and version began, by the branch's commits; the head's
    time when the history does not say (a hand-made commit): never earlier than known."""
    found = view.runs.get(name)
    if found is not None and (found.phase, found.version) == (
        str(status.phase),
        status.version or "",
    ):
        return found.since
    return view.head_time


def is_ancestor(repo: git.Repo, old: str, new: str) -> bool:
    """Is ``old`` an ancestor of (or equal to) ``new``? False when either is unknown."""
    try:
        run(repo, ["merge-base", "--is-ancestor", old, new], what="compare commits")
    except GitFailed:
        return False
    return True


class ReleaseHistory:
    """Where in the catalog's history a version became desired, and which commits follow.

    ``contains(app, version, channel, commit)``: does catalog ``commit`` descend from
    (or equal) the commit where ``version`` became desired? For a channel follower that
    is the oldest commit of the newest unbroken run of ``channels.yaml`` commits in which
    the channel named ``version`` (a move back and forth starts a new release); for a
    range, ``latest`` or an exact version, the newest commit that wrote the version's
    ``version.yaml``. Answers are cached per catalog head; unknown commits are False.
    """

    def __init__(self, repo: git.Repo, head: str) -> None:
        self._repo = repo
        self.head = head
        self._starts: dict[tuple[str, str, str | None], str | None] = {}
        self._answers: dict[tuple[str, str], bool] = {}

    def start(self, app: str, version: str, channel: str | None) -> str | None:
        """The catalog commit where ``version`` became desired (None: not found)."""
        key = (app, version, channel)
        if key not in self._starts:
            self._starts[key] = self._start(app, version, channel)
        return self._starts[key]

    def contains(self, app: str, version: str, channel: str | None, commit: str) -> bool:
        start = self.start(app, version, channel)
        if start is None or not commit:
            return False
        answer = self._answers.get((start, commit))
        if answer is None:
            answer = is_ancestor(self._repo, start, commit)
            self._answers[(start, commit)] = answer
        return answer

    def _start(self, app: str, version: str, channel: str | None) -> str | None:
        try:
            if channel is None:
                path = f"apps/{app}/versions/{version}/version.yaml"
                found = run(self._repo, ["log", "-1", "--format=%H", self.head, "--", path])
                return found.strip() or None
            return self._channel_start(app, version, channel)
        except SourceError as e:
            log.warning("cannot tell where %s %s began in the catalog: %s", app, version, e)
            return None

    def _channel_start(self, app: str, version: str, channel: str) -> str | None:
        path = f"apps/{app}/channels.yaml"
        listed = run(
            self._repo,
            ["log", f"-n{_CHANNEL_COMMITS}", "--format=%H", self.head, "--", path],
        ).split()
        if not listed:
            return None
        start = None
        for commit in listed:
            if _channel_at(self._repo, commit, path, channel) != version:
                break
            start = commit
        return start


def _channel_at(repo: git.Repo, commit: str, path: str, channel: str) -> str | None:
    try:
        text = run(repo, ["show", f"{commit}:{path}"])
    except GitFailed:
        return None  # deleted there: no channel
    try:
        data = load_bounded(text)  # the bounds of every catalog read
    except YamlReadError:
        return None
    channels = data.get("channels") if isinstance(data, Mapping) else None
    value = channels.get(channel) if isinstance(channels, Mapping) else None
    return str(value) if value is not None else None
