"""The status ledger: ``InstanceStatus`` records as commits on ``status/<cluster>`` (SPEC 3).

The daemon calls ``StatusLedger.record(statuses)`` once per pass; ``status`` and
``history`` call ``snapshot()`` and ``history()``. Each changed instance becomes
one commit touching ``instances/<instance>.yaml``; an unchanged one none. When
another writer (a second replica, a cluster sharing the branch) moved the branch
first, the publish is refused and the records are re-applied on the new head,
where records that are already there are skipped: nothing is lost, nothing is
written twice. The branch starts as an orphan branch holding only ``instances/``.

A record of an instance that neither the catalog nor the cluster has (no instance
file, no inventory) describes nothing: a forged one, or a leftover. Given the
names it ``known``, ``record`` deletes such records in one commit after the
others, so 20,000 junk records pushed to the branch do not weigh on every reader
(the status page, ``status``, the wave gate) forever. A ``Removed`` record is the
tombstone of an uninstall and stays.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from reconciler.model.errors import SourceError, UsageError
from reconciler.model.problems import Problem, error
from reconciler.model.status import InstanceStatus, Phase
from reconciler.source import objects, store
from reconciler.source.clusters import STATUS_REFS, branch_clusters, known_clusters
from reconciler.source.fleet import FleetStatus
from reconciler.source.namespaces import instance_namespaces
from reconciler.source.record_yaml import dump_record
from reconciler.source.redact import redact_text
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess, cache_root
from reconciler.source.runner import locked, open_repo, run, run_remote
from reconciler.status import (
    INSTANCES_DIR,
    TRAILER_CLUSTER,
    TRAILER_INSTANCE,
    TRAILER_PHASE,
    TRAILER_SOURCE_COMMIT,
    TRAILER_VERSION,
    HistoryEntry,
    StatusFileError,
    commit_message,
    dropped_message,
    parse_status,
    parse_trailers,
    prepare_record,
    status_path,
    summary_of,
)

log = logging.getLogger("reconciler.source")

_PARSED_LIMIT = 20_000  # parsed records kept in memory (one per live instance suffices)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
STATUS_PREFIX = "refs/heads/status/"
_LOG_FORMAT = "%H%x1f%cI%x1f%s%x1f%(trailers:only,unfold)%x1e"


@dataclass(frozen=True)
class CommitInfo:
    """One status commit that ``record`` published."""

    commit: str
    instance: str
    subject: str


@dataclass(frozen=True)
class StatusSnapshot:
    """The records at the head of the status branch (``commit`` None: no branch yet)."""

    commit: str | None
    statuses: dict[str, InstanceStatus]
    problems: tuple[Problem, ...] = ()

    @property
    def exists(self) -> bool:
        return self.commit is not None


class StatusLedger:
    """Reads and writes one cluster's status branch in a repository (path or URL)."""

    def __init__(
        self,
        repo: str,
        cluster: str,
        *,
        branch: str | None = None,
        cache_dir: Path | None = None,
        credentials: Credentials | None = None,
        policy: NetworkPolicy | None = None,
        conflict_attempts: int = 20,
        sleep: Callable[[float], None] = time.sleep,
        remote_fallback: bool = False,
    ) -> None:
        self.cluster = cluster
        self.branch = store.check_branch_name(branch or f"status/{cluster}")
        self.access = RemoteAccess.parse(repo, credentials, policy)
        self._cache = cache_dir or cache_root()
        self._store = store.open_store(
            self.access, self.branch, self._cache, remote_fallback=remote_fallback
        )
        self._lock = self._cache / "status" / f"{self.access.cache_key}.lock"
        self._conflict_attempts = conflict_attempts
        self._sleep = sleep
        # records parsed from blobs (or written to them), by blob id, least recently
        # used first: a blob never changes, and a daemon compares every instance's
        # record on every pass
        self._parsed: dict[bytes, InstanceStatus] = {}
        # per instance, the status last given that left its record unchanged, and that
        # record: the same status against the same record is unchanged again, so a
        # no-op pass compares two values per instance instead of preparing a record
        self._settled: dict[str, tuple[InstanceStatus, InstanceStatus]] = {}
        # the ``instances/`` tree of the last commit read, and that commit: a commit never
        # changes, and a pass that records nothing reads the same one as the pass before
        # (parsing a tree of 10,000 entries was a tenth of a no-op pass)
        self._entries: tuple[str | None, objects.Entries] = (None, {})
        # the head of the last build that committed nothing: every status it was given
        # was compared there (``_settled`` holds each, with its record at that head)
        self._quiet_head: str | None = None

    @property
    def display(self) -> str:
        """The repository as people may see it (credentials redacted)."""
        return self._store.display

    def head(self, *, refresh: bool = False) -> str | None:
        """The commit at the head of the branch (None: no branch yet), fetched only on ``refresh``.

        One ref read (no process): what a cache of anything derived from the branch keys on.
        """
        with locked(self._lock):
            if refresh:
                self._store.refresh()
            return store.tip(self._store)

    def fleet(self) -> FleetStatus:
        """A reader of every cluster's status branch in this repository (the wave gate's),
        sharing this ledger's mirror, lock and parsed records."""
        return FleetStatus(
            self._store.repo,
            self.access,
            self._lock,
            self._parse,
            remote=isinstance(self._store, store.RemoteStore),
        )

    def read(self) -> dict[str, InstanceStatus]:
        """The current record of every instance; unreadable files are logged and skipped."""
        snap = self.snapshot()
        for problem in snap.problems:
            log.warning("status branch %s: %s", self.branch, problem)
        return snap.statuses

    def snapshot(self, *, refresh: bool = True) -> StatusSnapshot:
        """Fetch (for a URL) and read every ``instances/*.yaml`` at the branch head."""
        with locked(self._lock):
            if refresh:
                self._store.refresh()
            head = store.tip(self._store)
            if head is None:
                return StatusSnapshot(None, {})
            statuses: dict[str, InstanceStatus] = {}
            problems: list[Problem] = []
            for name, (sha, _mode) in sorted(self._instance_entries(head).items()):
                if not name.endswith(".yaml"):
                    continue
                path = f"{INSTANCES_DIR}/{name}"
                try:
                    status = self._parse(sha, path)
                except StatusFileError as e:
                    problems.append(error(path, e.line, e.detail))
                    continue
                statuses[status.instance] = status
            return StatusSnapshot(head, statuses, tuple(problems))

    def record(
        self,
        statuses: Iterable[InstanceStatus],
        *,
        source_commit: str | None = None,
        now: str | None = None,
        pass_id: str | None = None,
        refresh: bool = True,
        known: Collection[str] | None = None,
    ) -> list[CommitInfo]:
        """Commit every status that differs from its record; return the commits published.

        Several statuses of one instance are recorded in the order given, one commit
        each (a migration run, then the upgrade it preceded: SPEC section 5).
        ``source_commit`` fills records whose ``source_commit`` is empty; ``now``
        (RFC 3339) stamps changed records and new condition transitions; ``pass_id``
        (the daemon pass recording them) becomes each commit's ``Reconciler-Pass``
        trailer. ``refresh=False``: the caller fetched the branch a moment ago (the
        daemon's pass that read it with ``snapshot``), so the first attempt builds on
        the head as fetched then; a publish that other writers beat fetches and
        re-applies, as every later attempt does. ``known`` (the daemon's: every
        instance of the catalog and of the cluster's inventories): records of any
        other instance, but ``Removed`` ones, are deleted in one last commit. Raises
        ``SourceError`` when the branch cannot be fetched or pushed (after retries)
        or when other writers keep winning for ``conflict_attempts`` rounds.
        """
        wanted, settled = self._validated(statuses, source_commit)
        if not wanted and known is None:
            return []
        with locked(self._lock):
            for attempt in range(1, self._conflict_attempts + 1):
                if refresh or attempt > 1:
                    self._store.refresh()
                base = store.tip(self._store)
                if (
                    settled
                    and self._quiet_head is not None
                    and base == self._quiet_head
                    and not self._any_stale(base, wanted, known)
                ):
                    return []  # the very statuses compared at this very head: no change
                self._quiet_head = None  # a build may settle records it does not publish
                commits, new_head = self._build(base, wanted, now, pass_id, known)
                if not commits:
                    self._quiet_head = base
                    return []
                if self._store.publish(new_head, base):
                    store.housekeep(self._store)
                    for info in commits:
                        # debug: the daemon logs one line per changed instance already
                        log.debug("%s", info.subject, extra={"cluster": self.cluster})
                    return commits
                log.info(
                    "status branch %s moved (attempt %d); re-applying %d record(s) on its new head",
                    self.branch,
                    attempt,
                    len(commits),
                )
                self._sleep(random.uniform(0, 0.05 * attempt))
        raise SourceError(
            f"{self.display}: gave up writing {self.branch} after "
            f"{self._conflict_attempts} rejected pushes (other writers kept moving it)"
        )

    def history(
        self, instance: str | None = None, *, limit: int = 0, refresh: bool = True
    ) -> list[HistoryEntry]:
        """Status changes, newest first, from one ``git log`` over the branch.

        With ``instance``, only that instance's commits, found by their
        ``Reconciler-Instance`` trailer: a path-limited ``git log`` diffs the
        ``instances/`` tree of every commit (seconds on a long branch of a large
        cluster), a message search reads commits only. Returns an empty list when
        the branch does not exist yet. ``refresh=False`` reads the branch as last
        fetched (the daemon's status page: its own pushes keep it current).
        """
        if instance is not None:
            _checked_name(instance)  # a DNS label: nothing a pattern would interpret
        with locked(self._lock):
            if refresh:
                self._store.refresh()
            if store.tip(self._store) is None:
                return []
            args = ["log", f"--format={_LOG_FORMAT}"]
            if instance is not None:  # basic regexp whatever grep.patternType says
                args += ["--basic-regexp", f"--grep=^{TRAILER_INSTANCE}: {instance}$"]
            if limit > 0:
                args.append(f"-n{limit}")
            args.append(self._store.ref)
            output = run(self._store.repo, args, what=f"git log {self.branch}")
        entries = [entry for entry in map(_history_entry, output.split("\x1e")) if entry]
        if instance is None:
            return entries
        # the pattern matches any line of a message; the trailer decides
        return [entry for entry in entries if entry.instance == instance]

    @property
    def source_ref(self) -> str:
        """The ref read: ``status/prod``, or ``origin/status/prod`` in a checkout without one."""
        return self._store.ref.removeprefix("refs/heads/").removeprefix("refs/remotes/")

    def known_clusters(self) -> list[str]:
        """Every cluster the repository knows: catalog ``clusters/`` and status branches.

        For ``no cluster named X; known: ...`` (``reconciler.source.clusters``).
        """
        with locked(self._lock):
            return known_clusters(self._store)

    def namespaces(self, statuses: Iterable[InstanceStatus]) -> dict[str, str | None]:
        """Each instance's namespace, from its file at the record's ``sourceCommit``.

        For ``status -n`` (``reconciler.source.namespaces``); None where unknown.
        """
        commits = {s.instance: s.source_commit for s in statuses}
        with locked(self._lock):
            return instance_namespaces(self._store, self.cluster, commits)

    def _validated(
        self, statuses: Iterable[InstanceStatus], source_commit: str | None
    ) -> tuple[dict[str, list[InstanceStatus]], bool]:
        """The statuses to record, by instance, and whether each is the very one that
        left its record unchanged last time (see ``_quiet_head``)."""
        wanted: dict[str, list[InstanceStatus]] = {}
        secrets = self.access.secrets()
        settled = self._settled
        all_settled = True
        for status in statuses:
            known = settled.get(status.instance)
            if (
                known is not None
                and known[0] is status
                and (status.source_commit or not source_commit)
            ):
                # the very status that left its record unchanged last time: checked and
                # redacted then (a no-op pass hands back every settled record itself)
                wanted.setdefault(status.instance, []).append(status)
                continue
            all_settled = False
            _checked_name(status.instance)
            if status.cluster != self.cluster:
                raise SourceError(
                    f"status of {status.cluster}/{status.instance} given to the ledger of "
                    f"cluster {self.cluster}"
                )
            if source_commit and not status.source_commit:
                status = replace(status, source_commit=source_commit)
            wanted.setdefault(status.instance, []).append(self._redacted(status, secrets))
        return wanted, all_settled

    def _redacted(self, status: InstanceStatus, secrets: tuple[str, ...]) -> InstanceStatus:
        """Messages come from errors that may quote a URL: never record a credential."""
        message = redact_text(status.message, secrets)
        conditions = tuple(
            c
            if (text := redact_text(c.message, secrets)) == c.message
            else replace(c, message=text)
            for c in status.conditions
        )
        if message == status.message and conditions == status.conditions:
            return status  # the usual case: a copy per instance per pass would cost more
        return replace(status, message=message, conditions=conditions)

    def _instance_entries(self, commit: str | None) -> objects.Entries:
        """The ``instances/`` tree of ``commit``, by file name (read only: it is shared)."""
        if commit is not None and self._entries[0] == commit:
            return self._entries[1]
        root = objects.read_tree(self._store.repo, objects.root_tree_of(self._store.repo, commit))
        sub = root.get(INSTANCES_DIR)
        if sub is None or sub[1] != objects.TREE_MODE:
            entries: objects.Entries = {}
        else:
            entries = objects.read_tree(self._store.repo, sub[0])
        self._entries = (commit, entries)
        return entries

    def _build(
        self,
        base: str | None,
        wanted: dict[str, list[InstanceStatus]],
        now: str | None,
        pass_id: str | None = None,
        known: Collection[str] | None = None,
    ) -> tuple[list[CommitInfo], str]:
        """A chain of commits on ``base``, one per changed record, in instance order,
        and one deleting the records of unknown instances (``known`` given)."""
        entries = self._instance_entries(base)
        stale = self._stale(entries, wanted, known) if known is not None else []
        made: list[tuple[str, str]] = []  # each commit's instance and subject, in order

        def changes() -> Iterator[objects.Change]:
            """Each changed record as the chain is written: a first install's 10,000
            records and messages are never all held at once, only their subjects."""
            for name in sorted(wanted):
                previous, note = self._previous(entries, name)
                for status in wanted[name]:
                    if previous is not None and self._still_settled(name, status, previous):
                        continue
                    prepared = prepare_record(status, previous, now=now)
                    if not prepared.changed:
                        if previous is not None:
                            self._settled[name] = (status, previous)
                        continue
                    message = commit_message(prepared.status, previous, note=note, pass_id=pass_id)
                    data = dump_record(prepared.status)
                    made.append((name, message.split("\n", 1)[0]))
                    previous, note = prepared.status, ""
                    replaced = entries.get(f"{name}.yaml")
                    if replaced is not None:  # superseded: only the new record is compared next
                        self._parsed.pop(replaced[0], None)
                    # what the next pass compares with: no need to parse back what was written
                    self._remember(objects.blob_id(data), prepared.status)
                    # the same status again leaves the record just written unchanged
                    self._settled[name] = (status, prepared.status)
                    yield objects.Change(status_path(name), data, message)
            if stale:
                message = dropped_message(self.cluster, stale, pass_id=pass_id)
                made.append(("", message.split("\n", 1)[0]))
                paths = [status_path(name) for name in stale]
                yield objects.Change(paths[0], None, message, removed=tuple(paths[1:]))

        shas = objects.write_chain(self._store.repo, base, changes())
        commits = [
            CommitInfo(sha, name, subject) for sha, (name, subject) in zip(shas, made, strict=True)
        ]
        return commits, shas[-1] if shas else (base or "")

    def _any_stale(
        self,
        base: str | None,
        wanted: dict[str, list[InstanceStatus]],
        known: Collection[str] | None,
    ) -> bool:
        """Whether a build on ``base`` would drop a record (``_stale``)."""
        return known is not None and bool(self._stale(self._instance_entries(base), wanted, known))

    def _stale(
        self,
        entries: objects.Entries,
        wanted: dict[str, list[InstanceStatus]],
        known: Collection[str],
    ) -> list[str]:
        """Instances with a record but neither a status now nor a place in ``known``.

        Names only, but for the few records of unknown instances, which are read to
        keep ``Removed`` tombstones (an unreadable one is dropped too).
        """
        stale = []
        for file, (sha, _mode) in entries.items():
            name = file.removesuffix(".yaml")
            if name == file or name in wanted or name in known:
                continue
            try:
                if self._parse(sha, status_path(name)).phase is Phase.REMOVED:
                    continue
            except StatusFileError:
                pass
            stale.append(name)
        return sorted(stale)

    def _still_settled(self, name: str, status: InstanceStatus, previous: InstanceStatus) -> bool:
        """True when ``status`` left this very record unchanged last time already.

        Whether a status changes its record depends only on the two (``prepare_record``
        carries every time from the record when nothing changed), and ``previous`` is
        the object parsed from the record's blob, kept while the blob stays the same.
        """
        settled = self._settled.get(name)
        if settled is None or settled[1] is not previous:
            return False
        if settled[0] is status:
            return True
        if settled[0] == status:
            # this very object from now on: the next pass that hands it back again (the
            # daemon's memo does) is known settled by identity, in ``_validated`` too
            self._settled[name] = (status, previous)
            return True
        return False

    def _parse(self, sha: bytes, path: str) -> InstanceStatus:
        """The record in blob ``sha``, parsed once per blob (raises ``StatusFileError``)."""
        status = self._parsed.pop(sha, None)
        if status is None:
            status = parse_status(objects.read_blob(self._store.repo, sha), path)
        self._remember(sha, status)
        return status

    def _remember(self, sha: bytes, status: InstanceStatus) -> None:
        """Keep ``status`` as the newest entry; the least recently used goes when full."""
        if len(self._parsed) >= _PARSED_LIMIT:
            del self._parsed[next(iter(self._parsed))]  # superseded records age out first
        self._parsed[sha] = status

    def _previous(
        self, entries: objects.Entries, instance: str
    ) -> tuple[InstanceStatus | None, str]:
        """The recorded status, or None with a note when the file is unreadable."""
        entry = entries.get(f"{instance}.yaml")
        if entry is None:
            return None, ""
        try:
            return self._parse(entry[0], status_path(instance)), ""
        except StatusFileError as e:
            log.warning("status branch %s: %s; rewriting it", self.branch, e)
            return None, f"The previous record was unreadable and has been rewritten: {e}"


def status_branch_clusters(
    repo: str,
    *,
    credentials: Credentials | None = None,
    policy: NetworkPolicy | None = None,
) -> list[str]:
    """The clusters that have a status branch ``status/<cluster>`` in ``repo``, sorted.

    One ``git ls-remote`` (no fetch), so ``reconciler report`` without ``--cluster``
    shows every cluster that has recorded something; for a local path, its
    branches and its remote-tracking branches (``origin/status/<cluster>``). Branches deeper than
    ``status/<name>`` are not status branches of the default name and are left out.
    """
    access = RemoteAccess.parse(repo, credentials, policy)
    if access.local_path is not None:
        # a checkout: its own branches and its remotes' copies (after a clone and a
        # fetch only origin/status/* exist), which the read commands fall back to
        try:
            local = open_repo(access.local_path)
        except SourceError as e:
            raise UsageError(f"--repo {e}") from e
        refs = run(local, ["for-each-ref", "--format=%(refname)", *STATUS_REFS])
        return branch_clusters(refs.split())
    output = run_remote(
        Path.cwd(),
        ["ls-remote", "--heads", access.url, f"{STATUS_PREFIX}*"],
        access,
        what=f"list the status branches of {access.display}",
    )
    return branch_clusters(line.split("\t", 1)[-1].strip() for line in output.splitlines())


def _checked_name(instance: str) -> str:
    if not _NAME.match(instance) or len(instance) > 63:
        raise SourceError(f"{instance!r} is not a valid instance name (a DNS-1123 label)")
    return instance


def _history_entry(chunk: str) -> HistoryEntry | None:
    fields = chunk.lstrip("\n").split("\x1f")
    if len(fields) != 4:
        return None
    commit, when, subject, trailer_text = fields
    trailers = parse_trailers(trailer_text)
    if TRAILER_INSTANCE not in trailers:
        return None  # not a status commit (a hand-made commit on the branch)
    return HistoryEntry(
        commit=commit,
        time=when,
        cluster=trailers.get(TRAILER_CLUSTER, ""),
        instance=trailers[TRAILER_INSTANCE],
        phase=trailers.get(TRAILER_PHASE, ""),
        version=trailers.get(TRAILER_VERSION, ""),
        source_commit=trailers.get(TRAILER_SOURCE_COMMIT, ""),
        summary=summary_of(subject, trailers),
    )
