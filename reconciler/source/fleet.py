"""Every cluster's status branch, read for the wave gate (SPEC section 4b), at what changed.

``FleetStatus`` brings ``status/*`` up to date once per pass (``refresh``: one ``git
ls-remote``, and a fetch of the heads that moved, if any) and gives each other cluster's
records with the time since which each says what it says (``SeenRecord``). A branch is
read again only when its head moved, and then only the commits since the head read
before (``git log OLD..NEW``): 200 clusters of 50 instances cost one listing of the
remote's heads and one of the mirror's per pass, not 200 tree reads. ``ReleaseHistory``
answers the other question the gate asks: does a record's ``sourceCommit`` contain the
catalog commit that made the version desired (so a Ready from an older release never
opens a gate)?
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import git

from reconciler.catalog import YamlReadError, load_bounded
from reconciler.model.errors import SourceError
from reconciler.model.status import InstanceStatus
from reconciler.model.waves import SeenRecord
from reconciler.source import objects, runner
from reconciler.source.remote import RemoteAccess
from reconciler.source.runner import (
    GitFailed,
    configure,
    locked,
    parse_listing,
    read_ref,
    run,
    run_remote,
)
from reconciler.status import (
    INSTANCES_DIR,
    TRAILER_INSTANCE,
    TRAILER_PHASE,
    TRAILER_VERSION,
    StatusFileError,
    parse_trailers,
)

log = logging.getLogger("reconciler.source")

_LOG_FORMAT = "%H%x1f%P%x1f%cI%x1f%(trailers:only,unfold)%x1e"
_CHANNEL_COMMITS = 50  # commits of a channels.yaml looked at to find where a release began
_LOCAL_PREFIX = "refs/heads/status/"
_REMOTE_PREFIX = "refs/remotes/origin/status/"
FLEET_PATTERN = f"{_LOCAL_PREFIX}*"  # the remote's refs ``refresh`` lists
_WALK = 16  # commits of a moved branch walked in process before ``git log`` is asked
_TRAILER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*: \S[^\r]*")  # ``Key: value``, unfolded
_COMMITTER = re.compile(rb" (\d+) ([+-])(\d\d)(\d\d)$")  # ``... 1700000000 +0100``
_NAMED_REFS = 64  # moved heads fetched by name; more (a first fetch): ``status/*`` whole
_LOOSE_REFS = 32  # loose status refs in the mirror that make ``refresh`` pack them
_CATALOG_REF = "refs/reconciler/catalog"  # the catalog's history, for ``ReleaseHistory``
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
    files: dict[str, bytes] = field(default_factory=dict)  # instance -> its record's blob
    seen: dict[str, SeenRecord] = field(default_factory=dict)  # what ``records`` hands out


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
        self._gathered: tuple[str, dict[tuple[str, str], SeenRecord]] | None = None  # skip, out
        self.reads = 0  # branches read (again) since this reader began: what the cache saves
        # each pass's fetch brings a few commits to a mirror of every cluster's history:
        # Git's walk of the local refs ("what do I have?") parses all of it again unless
        # a commit-graph answers; fetch keeps one up to date (a small split file each).
        # Set before this reader's first fetch, not when it is made: every daemon makes
        # one, and only a catalog with waves ever fetches (a config read and write each)
        self._graph_configured = not remote

    @property
    def repo(self) -> git.Repo:
        return self._repo

    def refresh(
        self, catalog_branch: str | None = None, listed: Mapping[str, str] | None = None
    ) -> None:
        """Bring the mirror to every ``status/*`` head (and, for a URL, the catalog's history).

        The catalog's own clone is shallow; freshness needs its history, which a URL's
        mirror gets here (a local repository has it already). One ``git ls-remote`` (the
        remote's ref advertisement: one round trip, no pack) says which heads moved
        since the mirror last fetched them. Nothing moved: nothing more runs. Else one
        ``git fetch`` of just the moved refs, negotiating from their old heads
        (``--negotiation-tip``): a fetch of the whole ``status/*`` offers the commits of
        all 200 branches as common ground, rounds of them, to bring 5. A branch gone
        from the remote is pruned by a fetch of the whole ``status/*`` (rare), which also
        brings more than ``_NAMED_REFS`` moved heads (a new mirror) in one refspec. A head
        that moves again between the listing and the fetch comes at its newest; one
        deleted between them fails the fetch, as any fetch failure fails the refresh.
        ``listed``: that listing, made a moment ago by the same remote's ``git
        ls-remote`` of ``FLEET_PATTERN`` and ``catalog_branch`` (the catalog's sync).
        """
        if not self._remote:
            return
        with locked(self._lock):
            advertised, catalog = self._advertised(catalog_branch, listed)
            local = objects.list_refs(self._repo, _REMOTE_PREFIX)
            moved = {ref: sha for ref, sha in advertised.items() if local.get(ref) != sha}
            refspecs = [
                f"+{_LOCAL_PREFIX}{ref.removeprefix(_REMOTE_PREFIX)}:{ref}" for ref in moved
            ]
            tips = [local[ref] for ref in moved if ref in local]
            if catalog_branch is not None:
                known = read_ref(self._repo, _CATALOG_REF)
                if catalog is None or catalog != known:  # not advertised: the fetch says why
                    refspecs.append(f"+{catalog_branch}:{_CATALOG_REF}")
                    tips += [known] if known else []
            options = [f"--negotiation-tip={tip}" for tip in tips]
            deleted = any(ref not in advertised for ref in local)
            if deleted or len(moved) > _NAMED_REFS:  # prune with everything; or a first fetch
                refspecs = [f"+{FLEET_PATTERN}:{_REMOTE_PREFIX}*", *refspecs[len(moved) :]]
                options = ["--prune"]
            if not refspecs:
                return
            if not self._graph_configured:
                configure(self._repo, {"fetch.writeCommitGraph": "true"})
                self._graph_configured = True
            run_remote(
                self._repo,
                ["fetch", "--quiet", "--no-tags", *options, "origin", *refspecs],
                self._access,
                what=f"fetch the status branches of {self._access.display}",
            )
            self._tidy()

    def _tidy(self) -> None:
        """After a fetch: gc when due, and the moved refs packed once enough pile up.

        Each fetch leaves a pack (``fetch.unpackLimit=1``) and a loose ref file per
        moved branch; a pass that writes no record of its own never reaches the
        ledger's housekeeping, so the mirror would gather a pack per pass. And every
        Git process that lists refs (the fetch twice, its connectivity check) opens
        each loose ref file: 200 of them cost a fetch about a fifth of its time, one
        ``packed-refs`` file next to nothing.
        """
        runner.housekeep(self._repo)
        if objects.loose_refs(self._repo, _REMOTE_PREFIX) > _LOOSE_REFS:
            with contextlib.suppress(GitFailed):  # refs stay right loose: left for next time
                run(self._repo, ["pack-refs", "--all"], what="pack the status refs")

    def _advertised(
        self, catalog_branch: str | None, listed: Mapping[str, str] | None
    ) -> tuple[dict[str, str], str | None]:
        """The remote's ``status/*`` heads (by the mirror's ref names) and the catalog
        branch's head (None: not advertised), from ``listed`` or one ``git ls-remote``."""
        if listed is None:
            patterns = [FLEET_PATTERN, *([catalog_branch] if catalog_branch else [])]
            output = run_remote(
                self._repo,
                ["ls-remote", "origin", *patterns],
                self._access,
                what=f"list the status branches of {self._access.display}",
            )
            listed = parse_listing(output)
        heads = {
            _REMOTE_PREFIX + ref.removeprefix(_LOCAL_PREFIX): sha
            for ref, sha in listed.items()
            if ref.startswith(_LOCAL_PREFIX)  # patterns match tails: names decide
        }
        return heads, listed.get(catalog_branch) if catalog_branch else None

    def records(self, skip: str = "") -> dict[tuple[str, str], SeenRecord]:
        """Every cluster's records (but ``skip``'s), by (cluster, instance).

        The branches whose head moved are read again: their trees (in process) and
        their new commits, for all of them in one ``git log``. The answer is kept and
        only the moved (or deleted) branches' entries change in it: gathering 10,000
        entries again would be most of a call. Callers get a copy.
        """
        with locked(self._lock):
            heads = self._heads()
            kept = self._gathered[1] if self._gathered and self._gathered[0] == skip else None
            for cluster in [c for c in self._views if c not in heads]:
                _forget(kept, cluster, self._views.pop(cluster))
            moved = {
                cluster: head
                for cluster, head in heads.items()
                if cluster != skip
                and (cluster not in self._views or self._views[cluster].head != head)
            }
            if moved:
                chains = self._new_commits(moved)
                for cluster, head in moved.items():
                    before = self._views.get(cluster)
                    view = self._read(cluster, head, before, chains[cluster])
                    self._views[cluster] = view
                    if kept is not None:
                        _forget(kept, cluster, before)
                        kept.update(((cluster, name), each) for name, each in view.seen.items())
            if kept is None:
                kept = {}
                for cluster in heads:
                    if cluster != skip:
                        seen = self._views[cluster].seen
                        kept.update(((cluster, name), each) for name, each in seen.items())
                self._gathered = (skip, kept)
            return dict(kept)

    def _heads(self) -> dict[str, str]:
        heads = {}
        for ref, sha in objects.list_refs(self._repo, self._prefix).items():
            name = ref.removeprefix(self._prefix)
            if name and "/" not in name:
                heads[name] = sha
        return heads

    def _new_commits(self, moved: Mapping[str, str]) -> dict[str, list[list[str]] | None]:
        """Each moved branch's commits since the head read before (all: a new branch),
        oldest first; None for a branch whose new head does not descend from the old one
        (rewritten: read whole again).

        A branch a few commits ahead (a pass's moves, nearly always) is walked in
        process through the persistent ``cat-file``; the others come from one ``git
        log`` of them all. Status branches share no history, so ``^old`` of one never
        hides another's commits; if one did (a branch made by hand from another), its
        line would not reach its old head and it would be read whole.
        """
        chains: dict[str, list[list[str]] | None] = {}
        spans: dict[str, tuple[str, str | None]] = {}
        for cluster, head in moved.items():
            before = self._views.get(cluster)
            old = before.head if before is not None else None
            if old is not None and not objects.has_object(self._repo, old):
                chains[cluster] = None  # no longer in the mirror (pruned after a rewrite)
                continue
            sure, walked = self._walk(head, old) if old is not None else (False, None)
            if sure:
                chains[cluster] = walked
            else:
                spans[cluster] = (head, old)
        if spans:
            args = ["log", f"--format={_LOG_FORMAT}"]
            for head, old in spans.values():
                args += [head, f"^{old}"] if old else [head]
            output = run(self._repo, args, what="read the history of the status branches")
            commits = {}
            for chunk in output.split("\x1e"):
                fields = chunk.strip("\n").split("\x1f")
                if len(fields) == 4:
                    commits[fields[0]] = fields
            for cluster, (head, old) in spans.items():
                chains[cluster] = _chain(commits, head, old)
        return chains

    def _walk(self, head: str, old: str) -> tuple[bool, list[list[str]] | None]:
        """The first-parent line from ``head`` back to ``old`` (excluded), oldest first,
        in ``git log``'s fields, read in process (None: it ends without reaching
        ``old``); not sure (False) past ``_WALK`` commits or at a commit whose trailers
        only Git's own parser can be trusted with (``_commit_fields``)."""
        chain = []
        sha = head
        for _ in range(_WALK):
            fields = _commit_fields(self._repo, sha)
            if fields is None:
                return False, None
            chain.append(fields)
            parents = fields[1].split()
            if not parents:
                return True, None
            if parents[0] == old:
                chain.reverse()
                return True, chain
            sha = parents[0]
        return False, None

    def _read(
        self,
        cluster: str,
        head: str,
        before: _BranchView | None,
        chain: list[list[str]] | None,
    ) -> _BranchView:
        self.reads += 1
        view = _BranchView(head)
        kept = {sha: name for name, sha in before.files.items()} if before is not None else {}
        root = objects.read_tree(self._repo, objects.root_tree_of(self._repo, head))
        sub = root.get(INSTANCES_DIR)
        if sub is not None and sub[1] == objects.TREE_MODE:
            for name, (sha, _mode) in objects.read_tree(self._repo, sub[0]).items():
                if not name.endswith(".yaml"):
                    continue
                same = kept.get(sha)
                if same is not None and before is not None:  # the blob did not change
                    view.records[same] = before.records[same]
                    view.files[same] = sha
                    continue
                try:
                    status = self._parse(sha, f"{INSTANCES_DIR}/{name}")
                except StatusFileError as e:
                    log.warning("status branch of %s: %s (left out of the wave gate)", cluster, e)
                    continue
                view.records[status.instance] = status
                view.files[status.instance] = sha
        if chain is None:  # rewritten: its runs start again from its whole history
            chain = self._history(head)
        elif before is not None:  # the commits since ``before``: its runs go on
            view.runs = dict(before.runs)
            view.head_time = before.head_time
        _advance(view, chain)
        view.seen = {
            name: SeenRecord(status, _since(view, name, status))
            for name, status in view.records.items()
        }
        return view

    def _history(self, head: str) -> list[list[str]]:
        """The whole history of a branch, oldest first."""
        output = run(
            self._repo,
            ["log", "--reverse", f"--format={_LOG_FORMAT}", head],
            what="read the history of a status branch",
        )
        chunks = [c.strip("\n").split("\x1f") for c in output.split("\x1e")]
        return [fields for fields in chunks if len(fields) == 4]


def _commit_fields(repo: git.Repo, sha: str) -> list[str] | None:
    """``sha``'s fields as ``_LOG_FORMAT`` gives them (id, parents, committer date,
    trailers), from the commit object; None when Git might read its trailers otherwise.

    Git's trailer block is the last paragraph of the message, after the title, with
    rules for comments, ``---`` dividers, continuation lines and mixed paragraphs. The
    ledger's messages end in a paragraph of plain ``Key: value`` lines, which every one
    of those rules reads the same way; any other message (or an ``encoding`` header)
    is left to ``git log``.
    """
    stream = repo.odb.stream(bytes.fromhex(sha))
    if stream.type != b"commit":
        return None
    header, _, body = bytes(stream.read()).partition(b"\n\n")
    parents, committer = [], b""
    for line in header.split(b"\n"):
        if line.startswith(b"parent "):
            parents.append(line[7:].decode("ascii"))
        elif line.startswith(b"committer "):
            committer = line
        elif line.startswith(b"encoding "):
            return None
    stamp = _COMMITTER.search(committer)
    try:
        message = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    trailers = _plain_trailers(message)
    if stamp is None or trailers is None:
        return None
    seconds, sign, hours, minutes = stamp.groups()
    offset = timedelta(hours=int(hours), minutes=int(minutes)) * (-1 if sign == b"-" else 1)
    when = datetime.fromtimestamp(int(seconds), timezone(offset))
    return [sha, " ".join(parents), when.isoformat(), trailers]


def _plain_trailers(message: str) -> str | None:
    """The last paragraph when it is plain ``Key: value`` lines after a title, else None."""
    lines = message.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return None
    if any(line.startswith(("#", "---")) for line in lines):
        return None
    blank = max((i for i, line in enumerate(lines) if not line.strip()), default=-1)
    block = lines[blank + 1 :]
    if blank < 1 or not all(_TRAILER.fullmatch(line) for line in block):
        return None
    return "\n".join(block) + "\n"


def _forget(
    gathered: dict[tuple[str, str], SeenRecord] | None, cluster: str, view: _BranchView | None
) -> None:
    """Take ``view``'s entries (a branch read before) out of ``records``' kept answer."""
    if gathered is not None and view is not None:
        for name in view.seen:
            gathered.pop((cluster, name), None)


def _chain(commits: Mapping[str, list[str]], head: str, old: str | None) -> list[list[str]] | None:
    """The commits from ``old`` (excluded; None: the root) to ``head``, oldest first, along
    first parents; None when that line does not reach ``old``."""
    chain = []
    sha = head
    while sha != old:
        fields = commits.get(sha)
        if fields is None:
            return None
        chain.append(fields)
        parents = fields[1].split()
        if not parents:
            if old is not None:
                return None
            break
        sha = parents[0]
    chain.reverse()
    return chain


def _advance(view: _BranchView, chain: list[list[str]]) -> None:
    """Each instance's run over ``chain`` (oldest first), continuing ``view.runs``."""
    for fields in chain:
        when = datetime.fromisoformat(fields[2])
        view.head_time = when
        trailers = parse_trailers(fields[3])
        instance = trailers.get(TRAILER_INSTANCE)
        if not instance:
            continue
        phase, version = trailers.get(TRAILER_PHASE, ""), trailers.get(TRAILER_VERSION, "")
        run_now = view.runs.get(instance)
        if run_now is None or (run_now.phase, run_now.version) != (phase, version):
            view.runs[instance] = _Run(phase, version, when)


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
    """The version ``channel`` names in ``path`` at ``commit`` (read in process: one
    ``git show`` per commit looked at was a process each)."""
    content = objects.file_at(repo, commit, path)
    if content is None:
        return None  # deleted there: no channel
    try:
        data = load_bounded(content.decode("utf-8", "replace"))  # every catalog read's bounds
    except YamlReadError:
        return None
    channels = data.get("channels") if isinstance(data, Mapping) else None
    value = channels.get(channel) if isinstance(channels, Mapping) else None
    return str(value) if value is not None else None
