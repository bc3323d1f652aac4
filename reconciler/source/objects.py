"""Git objects for the status ledger: read trees and blobs, write chains of commits.

``StatusLedger`` reads the records at a branch head with ``read_tree``/``read_blob``
(gitpython's persistent ``cat-file`` process) and writes one pass's commits with
``write_chain``, which builds only what each commit changes: the new blob, the
``instances/`` tree spliced in memory and stored as a small delta on its previous
version, the root tree, the commit. All of them go into one pack with its index,
written here in Git's pack format (what ``git fast-import`` does, minus rebuilding
the whole directory for every commit), so a pass costs in proportion to the
records it changes, not to the records times the size of the directory. No ref
the user can see moves here; the store publishes the result.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import os
import re
import struct
import time
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import git
from git.objects.fun import tree_entries_from_data
from git.objects.util import parse_date

TREE_MODE = 0o040000

# name -> (binary sha, mode)
Entries = dict[str, tuple[bytes, int]]


@dataclass(frozen=True)
class Change:
    """One commit to write: ``path`` gets ``data`` (None: ``path`` is deleted), and the
    files ``removed`` of the same directory are deleted; ``message`` is the full message."""

    path: str
    data: bytes | None
    message: str
    removed: tuple[str, ...] = ()


def read_tree(repo: git.Repo, binsha: bytes | None) -> Entries:
    if binsha is None:
        return {}
    data = bytes(repo.odb.stream(binsha).read())
    return _plain_entries(data) or {
        name: (bytes(sha), int(mode)) for sha, mode, name in tree_entries_from_data(data)
    }


# a tree entry whose mode and name need no check: a file or directory, an ASCII name no
# file system reads as another (GitPython checks every name against Git's rules for
# ``.git`` aliases; a status tree of 50 records is all such names)
_PLAIN_ENTRY = re.compile(rb"(100644|100755|40000) ([A-Za-z0-9_][A-Za-z0-9_.-]*)\0")


def _plain_entries(data: bytes) -> Entries | None:
    """``data``'s entries when every one is plain (``_PLAIN_ENTRY``), read with one
    pattern; None (GitPython's checked reader decides) as soon as one is not."""
    entries: Entries = {}
    offset, end = 0, len(data)
    while offset < end:
        found = _PLAIN_ENTRY.match(data, offset)
        if found is None or found.end() + 20 > end:
            return None
        name = found.group(2).decode("ascii")
        if name.endswith(".") or name.lower().startswith("git"):
            return None
        entries[name] = (data[found.end() : found.end() + 20], int(found.group(1), 8))
        offset = found.end() + 20
    return entries if entries else None


def list_refs(repo: git.Repo, prefix: str) -> dict[str, str]:
    """Every ref under ``prefix`` (``refs/remotes/origin/status/``) -> its object id.

    Read from the files Git keeps (``packed-refs``, then the loose refs, which win),
    in process: the wave gate lists 200 status branches every pass, and a ``git
    for-each-ref`` process would be most of what a pass with nothing new costs.
    """
    git_dir = str(repo.git_dir)
    refs: dict[str, str] = {}
    with (
        contextlib.suppress(FileNotFoundError),
        open(os.path.join(git_dir, "packed-refs"), encoding="utf-8") as packed,
    ):
        for line in packed:
            sha, _, name = line.rstrip("\n").partition(" ")
            if name.startswith(prefix) and len(sha) == 40:
                refs[name] = sha
    folders = [prefix.rstrip("/")]
    while folders:  # os.scandir and plain strings: 200 refs in well under a millisecond
        folder = folders.pop()
        with (
            contextlib.suppress(FileNotFoundError, NotADirectoryError),
            os.scandir(os.path.join(git_dir, folder)) as entries,
        ):
            for entry in entries:
                if entry.is_dir():
                    folders.append(f"{folder}/{entry.name}")
                elif not entry.name.endswith(".lock"):
                    sha = _ref_file(entry.path)
                    if len(sha) == 40:
                        refs[f"{folder}/{entry.name}"] = sha
    return refs


def loose_refs(repo: git.Repo, prefix: str) -> int:
    """How many refs under ``prefix`` are loose files (not in ``packed-refs``)."""
    count = 0
    folders = [os.path.join(str(repo.git_dir), prefix.rstrip("/"))]
    while folders:
        with (
            contextlib.suppress(FileNotFoundError, NotADirectoryError),
            os.scandir(folders.pop()) as entries,
        ):
            for entry in entries:
                if entry.is_dir():
                    folders.append(entry.path)
                elif not entry.name.endswith(".lock"):
                    count += 1
    return count


def _ref_file(path: str) -> str:
    """A loose ref's content ("" when it went away meanwhile), read without a text wrapper."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return ""
    try:
        return os.read(fd, 128).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def has_object(repo: git.Repo, sha: str) -> bool:
    """Is ``sha`` in the object store? Asked of ``git cat-file`` (GitPython's own
    ``has_object`` looks at loose objects only, never in packs)."""
    try:
        repo.odb.info(bytes.fromhex(sha))
    except ValueError:  # not a hex id, or cat-file's "missing"
        return False
    return True


def read_blob(repo: git.Repo, binsha: bytes) -> bytes:
    return bytes(repo.odb.stream(binsha).read())


def root_tree_of(repo: git.Repo, commit: str | None) -> bytes | None:
    if commit is None:
        return None
    return bytes(git.Commit(repo, bytes.fromhex(commit)).tree.binsha)


_SUBMODULE_MODE = 0o160000


def file_at(repo: git.Repo, commit: str, path: str) -> bytes | None:
    """The content of file ``path`` (``a/b/c.yaml``) in ``commit``: what ``git show
    commit:path`` prints for a file (a symbolic link's target too), through the
    repository's one object reader instead of a process per file. None where Git shows
    no file: no such commit, no such path, a directory or a submodule there.
    """
    *directories, name = path.split("/")
    try:
        tree = root_tree_of(repo, commit)
        for directory in directories:
            entry = read_tree(repo, tree).get(directory)
            if entry is None or entry[1] != TREE_MODE:
                return None
            tree = entry[0]
        entry = read_tree(repo, tree).get(name)
    except ValueError:  # not a commit id, or not in the object store
        return None
    if entry is None or entry[1] in (TREE_MODE, _SUBMODULE_MODE):
        return None
    return read_blob(repo, entry[0])


def blob_id(data: bytes) -> bytes:
    """The binary id Git gives a blob holding ``data``."""
    return _object_id(OBJ_BLOB, data)


def write_chain(repo: git.Repo, base: str | None, changes: Iterable[Change]) -> list[str]:
    """Write ``changes`` as a chain of commits on ``base`` (None: a new root); return shas.

    ``changes`` is read once, in order, and may be a generator: each change is
    written as it comes, so a caller building 10,000 records need not hold them all.

    Every commit's tree holds every file of ``base`` plus the changes so far, but
    only what a change touches is built: the changed blob, its directory's tree
    (the previous version spliced in memory, hashed, stored as a delta of a few
    bytes) and the root tree. Unchanged entries keep their ids. Rebuilding the
    whole ``instances/`` tree per commit (what ``git fast-import`` does) made a
    pass of 10,000 new records take most of a minute.

    Everything goes into one new pack and its index, which Git sees only once
    both are complete; no ref moves here (the store publishes the result), so
    concurrent writers never see each other's unfinished work.
    """
    remaining = iter(changes)
    first = next(remaining, None)
    if first is None:
        return []
    pack = _PackWriter(Path(repo.common_dir) / "objects" / "pack")
    try:
        shas = _write(repo, base, itertools.chain((first,), remaining), pack)
        pack.finish()
        return shas
    finally:
        pack.discard()


def _write(
    repo: git.Repo, base: str | None, changes: Iterable[Change], pack: _PackWriter
) -> list[str]:
    ident = _identity()
    signature = (
        f"author {ident} {git_date('GIT_AUTHOR_DATE')}\n"
        f"committer {ident} {git_date('GIT_COMMITTER_DATE')}\n"
    ).encode()
    root_tree = root_tree_of(repo, base)
    root = _Tree(read_object(repo, root_tree) if root_tree is not None else b"")
    root_slot = _Slot()
    subtrees: dict[bytes, tuple[_Tree, _Slot]] = {}
    parent = base
    shas: list[str] = []
    for change in changes:
        directory, _, name = _split(change.path)
        if directory not in subtrees:
            current = root.get(directory)
            listing = b""
            if current is not None and current[1] == _TREE_MODE_TEXT:
                listing = read_object(repo, current[0])
            subtrees[directory] = (_Tree(listing), _Slot())
        sub, sub_slot = subtrees[directory]
        splice = None
        if change.data is not None:
            splice = sub.set(name, _BLOB_MODE_TEXT, pack.add_whole(OBJ_BLOB, change.data))
        gone = change.removed if change.data is not None else (change.path, *change.removed)
        for path in gone:
            other, _, file = _split(path)
            if other != directory:
                raise ValueError(f"{path!r}: not in the directory of {change.path!r}")
            sub.remove(file)
        if sub.entries:
            sub_id = sub_slot.store(pack, sub, splice)
            root_id = root_slot.store(pack, root, root.set(directory, _TREE_MODE_TEXT, sub_id))
        else:  # Git keeps no empty directory
            root.remove(directory, _TREE_MODE_TEXT)
            root_id = root_slot.store(pack, root, None)
        body = b"tree " + root_id.hex().encode() + b"\n"
        if parent:
            body += b"parent " + parent.encode() + b"\n"
        body += signature + b"\n" + change.message.encode("utf-8")
        parent = pack.add_whole(OBJ_COMMIT, body).hex()
        shas.append(parent)
    return shas


def _split(path: str) -> tuple[bytes, bytes, bytes]:
    directory, slash, name = path.encode("utf-8").rpartition(b"/")
    if not directory or b"/" in directory or not name:
        raise ValueError(f"{path!r}: expected <directory>/<file>")
    return directory, slash, name


def read_object(repo: git.Repo, binsha: bytes) -> bytes:
    """The raw content of an object (a tree's binary listing, a blob's bytes)."""
    return bytes(repo.odb.stream(binsha).read())


OBJ_COMMIT, OBJ_TREE, OBJ_BLOB, OBJ_OFS_DELTA = 1, 2, 3, 6
_TYPE_NAMES = {OBJ_COMMIT: b"commit", OBJ_TREE: b"tree", OBJ_BLOB: b"blob"}
_BLOB_MODE_TEXT = b"100644"
_TREE_MODE_TEXT = b"40000"
_STORE_ABOVE = 64 * 1024
_MAX_DEPTH = 50  # Git's own default pack.depth: a reader resolves at most 50 deltas


@dataclass(frozen=True)
class _Splice:
    """``entry`` replaced the ``old`` bytes at ``offset`` of a listing (``old`` 0: inserted)."""

    offset: int
    old: int
    entry: bytes


class _Tree:
    """A tree's binary listing, kept in Git's order and edited in place.

    ``set`` finds an entry by bisection and splices the listing. Entry offsets are
    recomputed lazily from the first edited position on, so a pass that edits in
    name order walks the listing once, not once per edit.
    """

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)
        self.keys: list[bytes] = []
        self.entries: list[bytes] = []
        pos = 0
        while pos < len(data):
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            self.keys.append(_sort_key(data[space + 1 : nul], data[pos:space]))
            self.entries.append(data[pos : nul + 21])
            pos = nul + 21
        self.offsets = [0] * len(self.entries)
        self.valid = 0  # offsets[i] is right for every i < valid
        self.rebuilt = False  # an edit no splice describes happened since the last store

    def get(self, name: bytes) -> tuple[bytes, bytes] | None:
        """(binary id, mode) of the file or directory ``name``, if present."""
        for key in (name, name + b"/"):
            i = bisect.bisect_left(self.keys, key)
            if i < len(self.keys) and self.keys[i] == key:
                entry = self.entries[i]
                return entry[-20:], entry[: entry.index(b" ")]
        return None

    def set(self, name: bytes, mode: bytes, binsha: bytes) -> _Splice | None:
        """Point ``name`` at ``binsha``; None when it already does.

        A directory where a file goes (or the reverse) is dropped first, as
        ``git fast-import`` would; ``rebuilt`` then tells the slot that no delta
        on the previous version describes the change.
        """
        other = name if mode == _TREE_MODE_TEXT else name + b"/"
        j = bisect.bisect_left(self.keys, other)
        if j < len(self.keys) and self.keys[j] == other:
            offset = self._offset(j)
            del self.data[offset : offset + len(self.entries[j])]
            del self.keys[j], self.entries[j], self.offsets[j]
            self.valid = min(self.valid, j)
            self.rebuilt = True
        key = _sort_key(name, mode)
        entry = mode + b" " + name + b"\0" + binsha
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            if self.entries[i] == entry:
                return None
            offset, old = self._offset(i), len(self.entries[i])
            self.entries[i] = entry
            if old != len(entry):
                self.valid = min(self.valid, i + 1)
        else:
            offset, old = self._offset(i), 0
            self.keys.insert(i, key)
            self.entries.insert(i, entry)
            self.offsets.insert(i, offset)
            self.valid = min(self.valid, i + 1)
        self.data[offset : offset + old] = entry
        return _Splice(offset, old, entry)

    def remove(self, name: bytes, mode: bytes = _BLOB_MODE_TEXT) -> None:
        """Drop ``name`` if present; the next store writes the listing whole."""
        i = bisect.bisect_left(self.keys, _sort_key(name, mode))
        if i < len(self.keys) and self.keys[i] == _sort_key(name, mode):
            offset = self._offset(i)
            del self.data[offset : offset + len(self.entries[i])]
            del self.keys[i], self.entries[i], self.offsets[i]
            self.valid = min(self.valid, i)
            self.rebuilt = True

    def _offset(self, i: int) -> int:
        if i >= len(self.entries):
            return len(self.data)
        while self.valid <= i:
            v = self.valid
            self.offsets[v] = self.offsets[v - 1] + len(self.entries[v - 1]) if v else 0
            self.valid = v + 1
        return self.offsets[i]


def _sort_key(name: bytes, mode: bytes) -> bytes:
    """Git orders a directory as if its name ended in ``/``."""
    return name + b"/" if mode == _TREE_MODE_TEXT else name


class _Slot:
    """One tree's successive versions in a pack, each stored as a delta on the one before."""

    def __init__(self) -> None:
        self.offset = -1  # of the last version in the pack (-1: none yet)
        self.depth = 0
        self.size = 0
        self.binsha = b""

    def store(self, pack: _PackWriter, tree: _Tree, splice: _Splice | None) -> bytes:
        """Add the tree's current version to ``pack`` unless already there; its id."""
        if splice is None and self.binsha and not tree.rebuilt:
            return self.binsha
        whole, tree.rebuilt = tree.rebuilt, False
        data = tree.data
        binsha = _object_id(OBJ_TREE, data)
        known = pack.objects.get(binsha)
        if known is not None:
            offset, depth = known[0], pack.depths.get(binsha, 0)
        elif whole or splice is None or self.offset < 0 or self.depth >= _MAX_DEPTH:
            offset, depth = pack.add(OBJ_TREE, data, binsha), 0
        else:
            delta = _delta(self.size, len(data), splice)
            offset, depth = pack.add_delta(self.offset, delta, binsha), self.depth + 1
            pack.depths[binsha] = depth
        self.offset, self.depth, self.size, self.binsha = offset, depth, len(data), binsha
        return binsha


def _delta(source_size: int, target_size: int, splice: _Splice) -> bytes:
    """A pack delta: copy what precedes the splice, insert the entry, copy the rest."""
    out = bytearray(_varint(source_size) + _varint(target_size))
    _copy(out, 0, splice.offset)
    for i in range(0, len(splice.entry), 127):
        chunk = splice.entry[i : i + 127]
        out.append(len(chunk))
        out += chunk
    start = splice.offset + splice.old
    _copy(out, start, source_size - start)
    return bytes(out)


def _copy(out: bytearray, offset: int, size: int) -> None:
    """Delta copy instructions: a flag byte, then the non-zero bytes of offset and size."""
    while size > 0:
        n = min(size, 0xFFFFFF)
        op, args = 0x80, bytearray()
        for i in range(4):
            byte = (offset >> (8 * i)) & 0xFF
            if byte:
                op |= 1 << i
                args.append(byte)
        for i in range(3):
            byte = (n >> (8 * i)) & 0xFF
            if byte:
                op |= 0x10 << i
                args.append(byte)
        out.append(op)
        out += args
        offset += n
        size -= n


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _object_id(kind: int, data: bytes | bytearray) -> bytes:
    digest = hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[kind], len(data)))
    digest.update(data)
    return digest.digest()


class _PackWriter:
    """A version-2 pack and its version-2 index (Git's Documentation/gitformat-pack.txt).

    Entries go straight to a temporary file in the pack directory (a pass over a
    large cluster stores megabytes of tree versions); ``finish`` fills in the
    header, appends the checksum, writes the index and renames both into place,
    ``discard`` removes what an interrupted write left.
    """

    def __init__(self, pack_dir: Path) -> None:
        pack_dir.mkdir(parents=True, exist_ok=True)
        self.pack_dir = pack_dir
        self.tmp = pack_dir / f"tmp_pack_reconciler_{os.getpid()}_{uuid.uuid4().hex[:12]}"
        self.out = open(f"{self.tmp}.pack", "w+b")  # noqa: SIM115 - closed by finish/discard
        self.out.write(bytes(12))  # the header holds the count: written last
        self.size = 12
        self.objects: dict[bytes, tuple[int, int]] = {}  # id -> (offset, crc32 of the entry)
        self.depths: dict[bytes, int] = {}

    def add_whole(self, kind: int, data: bytes) -> bytes:
        binsha = _object_id(kind, data)
        if binsha not in self.objects:
            self.add(kind, data, binsha)
        return binsha

    def add(self, kind: int, data: bytes | bytearray, binsha: bytes) -> int:
        return self._entry(binsha, _entry_header(kind, len(data)), _deflate(data))

    def add_delta(self, base_offset: int, delta: bytes, binsha: bytes) -> int:
        header = _entry_header(OBJ_OFS_DELTA, len(delta)) + _ofs(self.size - base_offset)
        return self._entry(binsha, header, _deflate(delta))

    def _entry(self, binsha: bytes, header: bytes, body: bytes) -> int:
        offset = self.size
        self.out.write(header)
        self.out.write(body)
        self.size += len(header) + len(body)
        self.objects[binsha] = (offset, zlib.crc32(body, zlib.crc32(header)))
        return offset

    def finish(self) -> None:
        """Complete the pack, write its index; rename both into place (the index last)."""
        self.out.seek(0)
        self.out.write(struct.pack(">4sII", b"PACK", 2, len(self.objects)))
        self.out.seek(0)
        digest = hashlib.sha1()
        while chunk := self.out.read(1 << 20):
            digest.update(chunk)
        checksum = digest.digest()
        self.out.write(checksum)
        self.out.close()
        Path(f"{self.tmp}.idx").write_bytes(self._index(checksum))
        name = self.pack_dir / f"pack-{checksum.hex()}"
        for suffix in (".pack", ".idx"):  # Git looks for packs by their index
            os.chmod(f"{self.tmp}{suffix}", 0o444)
            os.replace(f"{self.tmp}{suffix}", f"{name}{suffix}")

    def discard(self) -> None:
        """Remove the temporary files, if still there (after ``finish``: nothing to do)."""
        self.out.close()
        for suffix in (".pack", ".idx"):
            Path(f"{self.tmp}{suffix}").unlink(missing_ok=True)

    def _index(self, pack_checksum: bytes) -> bytes:
        ids = sorted(self.objects)
        fanout = [0] * 256
        for binsha in ids:
            fanout[binsha[0]] += 1
        for i in range(1, 256):
            fanout[i] += fanout[i - 1]
        offsets: list[int] = []
        large: list[int] = []
        for binsha in ids:
            offset = self.objects[binsha][0]
            if offset < 0x80000000:
                offsets.append(offset)
            else:  # the index's 64-bit offset table
                offsets.append(0x80000000 | len(large))
                large.append(offset)
        body = b"".join(
            [
                b"\377tOc",
                struct.pack(">I", 2),
                struct.pack(">256I", *fanout),
                b"".join(ids),
                struct.pack(f">{len(ids)}I", *(self.objects[b][1] for b in ids)),
                struct.pack(f">{len(offsets)}I", *offsets),
                struct.pack(f">{len(large)}Q", *large),
                pack_checksum,
            ]
        )
        return body + hashlib.sha1(body).digest()


def _deflate(data: bytes | bytearray) -> bytes:
    """zlib data as a pack entry holds it, made for speed.

    A pass writes tens of thousands of small objects: zlib's default 32 KiB window
    and 128 KiB hash table cost ten times the compression itself, so small objects
    get small ones (any window is read back alike). A large tree is mostly 20-byte
    ids that do not compress: level 1 would save 40% of its size at 20 times the
    cost of the rest of its write, so it is stored as is.
    """
    if len(data) >= _STORE_ABOVE:
        return zlib.compress(data, 0)
    deflater = zlib.compressobj(1, zlib.DEFLATED, 12, 2)
    return deflater.compress(data) + deflater.flush()


def _entry_header(kind: int, size: int) -> bytes:
    """An entry's type and inflated size: 4 bits of size, then 7 bits per byte."""
    out = bytearray([(kind << 4) | (size & 0x0F)])
    size >>= 4
    while size:
        out[-1] |= 0x80
        out.append(size & 0x7F)
        size >>= 7
    return bytes(out)


def _ofs(distance: int) -> bytes:
    """An OFS_DELTA's distance back to its base: base 128, big-endian, one added per byte."""
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.append(0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(reversed(out))


def git_date(variable: str) -> str:
    """``<epoch> +0000`` from Git's date variable (any form Git takes, ISO 8601 with ``Z``
    included, which gitpython cannot parse), or now."""
    value = os.environ.get(variable, "")
    if value:
        try:
            return f"{parse_date(value)[0]} +0000"
        except ValueError:
            pass
        try:
            return f"{int(datetime.fromisoformat(value).timestamp())} +0000"
        except ValueError:
            pass
    return f"{int(time.time())} +0000"


def _identity() -> str:
    """Who status commits are from: Git's usual variables, else ``reconciler``."""
    name = os.environ.get("GIT_COMMITTER_NAME", "reconciler").replace("<", "").replace(">", "")
    email = os.environ.get("GIT_COMMITTER_EMAIL", "reconciler@localhost")
    return f"{name} <{email.replace('<', '').replace('>', '')}>"
