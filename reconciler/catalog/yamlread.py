"""Fast, safe YAML reading that still knows line numbers.

Reading is the hot path of every pass (issue 2 asks for load+validate within
2x of a bare PyYAML C parse), so documents are parsed with libyaml
(``CSafeLoader``) into plain Python values. Line numbers are not attached to
every value; instead each document keeps its composed node tree, and
``line_of(path)`` walks it only when a problem must be reported. Duplicate keys,
which PyYAML silently accepts (last one wins), are detected while constructing
and reported with their line: a duplicated ``version:`` in a reviewed pull
request is exactly the kind of mistake a GitOps lint must catch.

ruamel.yaml stays in use where YAML is written back (``channel set``), because
it round-trips comments and formatting; reading never needs that.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

try:
    _BaseLoader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _BaseLoader = yaml.SafeLoader

MAX_FILE_BYTES = 2 * 1024 * 1024  # larger than any sane catalog file; etcd's limit is ~1.5 MiB
# Bounds that keep one hostile or careless file from stopping the fleet (SPEC section 3).
# A 494-byte "billion laughs" file expands to millions of nodes through aliases; deep
# nesting overflows Python's recursion limit in every recursive consumer (and 100,000
# levels crash libyaml's C composer outright); a 5,000-digit integer cannot be printed.
MAX_ALIAS_NODES = 10_000  # nodes that aliases may add when expanded, per document
# characters of scalars that aliases may add when expanded, per document: ten thousand
# aliases of one 1.9 MB anchored string are under the node bound and expand to 19 GB
MAX_ALIAS_CHARS = MAX_FILE_BYTES
MAX_DEPTH = 100  # nested collections; a Kubernetes object needs fewer than 30
MAX_NUMBER_CHARS = 100  # characters of one integer or float scalar
# the first read of a file (``read_text``): under the C library's threshold for mapping
# memory, and more than any usual catalog file holds
_FIRST_READ = 64 * 1024
# below this many nesting indicators a file cannot be deep enough to endanger libyaml
_SAFE_INDICATORS = 5_000

PathKey = str | int


class YamlReadError(Exception):
    """A file that cannot be read as YAML; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass
class Document:
    """One parsed YAML document: its value, node tree, and duplicate keys found."""

    data: Any
    node: yaml.Node
    duplicates: list[tuple[str, int]] = field(default_factory=list)

    @property
    def start_line(self) -> int:
        return int(self.node.start_mark.line) + 1

    def line_of(self, path: Sequence[PathKey]) -> int:
        """Line of the value at ``path`` (keys and list indexes), or its closest parent."""
        return _line_in(self.node, path)

    def key_lines(self) -> dict[str, int]:
        """Lines of the top-level keys, plus ``""`` for the document start.

        The keys are interned: a catalog's thousands of instance files name the same
        few keys, and the lines are kept with each instance (``Origin``) for the life
        of the catalog, so one string of each serves them all.
        """
        lines = {"": self.start_line}
        if isinstance(self.node, yaml.MappingNode):
            for key_node, _ in self.node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    lines[sys.intern(str(key_node.value))] = int(key_node.start_mark.line) + 1
        return lines

    def child_key_lines(self, key: str) -> dict[str, int]:
        """Lines of the keys of the mapping under top-level ``key`` (e.g. channels)."""
        node = _child(self.node, key)
        lines: dict[str, int] = {}
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):  # interned: see ``key_lines``
                    lines[sys.intern(str(key_node.value))] = int(key_node.start_mark.line) + 1
        return lines


def _child(node: yaml.Node | None, key: PathKey) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        found = None
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(key):
                found = value_node  # last one wins, like the constructed value
        return found
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
        child: yaml.Node = node.value[key]
        return child
    return None


def _line_in(node: yaml.Node, path: Sequence[PathKey]) -> int:
    line = int(node.start_mark.line) + 1
    current: yaml.Node | None = node
    for key in path:
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(key):
                    line = int(key_node.start_mark.line) + 1
                    current = value_node
                    break
            else:
                return line
        else:
            nxt = _child(current, key)
            if nxt is None:
                return line
            current = nxt
            line = int(current.start_mark.line) + 1
    return line


_STR, _MAP, _SEQ = (f"tag:yaml.org,2002:{t}" for t in ("str", "map", "seq"))
# scalars whose constructors return a value at once (no generator, no alias state);
# "value" ("=") and "merge" ("<<") keys change their mapping and stay with PyYAML
_PLAIN_SCALARS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "timestamp", "binary")
)


class _NotPlain(Exception):
    """A node ``_Loader._build`` leaves to PyYAML's own constructor."""


# the implicit tag of a plain scalar, by its text: the regular expressions PyYAML tries
# depend on the text alone (the loader has no path resolvers), and a catalog repeats
# the same keys and values in every file; bounded, so hostile input cannot grow it
_IMPLICIT_TAGS: dict[str, str] = {}
_IMPLICIT_TAGS_MAX = 50_000
_IMPLICIT_TEXT_MAX = 64


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """libyaml parser with duplicate-key detection and no implicit timestamps.

    Timestamps stay strings: ``2026-01-01`` in a ConfigMap must not become a
    ``datetime`` that cannot be serialised back to JSON for the API server.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[str, int]] = []
        # only a "<<" merge key changes a mapping's pairs while it is built
        self.merges = "<<" in stream
        # no merges and no anchors: every node is built once, where it stands
        self.plain = not self.merges and "&" not in stream

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        """The tag of a node without an explicit one, as PyYAML's resolver gives it.

        libyaml calls this for every node it composes, and PyYAML's answer for a
        plain scalar tries a list of regular expressions each time: a tenth of
        reading a catalog. A plain scalar's tag depends on its text alone, so short
        texts are answered from ``_IMPLICIT_TAGS``; a mapping's or a sequence's
        and a quoted scalar's is the default without asking.
        """
        if kind is yaml.ScalarNode:
            if not implicit[0]:
                return _STR  # quoted, or a block scalar: never an implicit int or bool
            tag = _IMPLICIT_TAGS.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(value) <= _IMPLICIT_TEXT_MAX and len(_IMPLICIT_TAGS) < _IMPLICIT_TAGS_MAX:
                    _IMPLICIT_TAGS[value] = tag
            return tag
        return _MAP if kind is yaml.MappingNode else _SEQ

    def construct_document(self, node: yaml.Node) -> Any:
        """The document's value: for plain YAML (the catalog's), by one direct walk.

        PyYAML's constructor handles anchors, merges, recursive aliases and custom
        tags through generators and per-node bookkeeping, which is most of the
        cost of reading a catalog. A document with none of those (no ``&``, no
        ``<<``; any tag outside the plain ones stops the walk) is built by
        ``_build`` into exactly the values PyYAML builds; anything else takes
        PyYAML's own path, from the start.
        """
        if self.plain:
            try:
                return self._build(node)
            except _NotPlain:
                self.duplicates = []  # found again by the full construction
        return super().construct_document(node)

    def _build(self, node: yaml.Node) -> Any:
        cls = node.__class__
        if cls is yaml.ScalarNode:
            tag = node.tag
            if tag == _STR:
                return node.value
            if tag in _PLAIN_SCALARS:
                return self.yaml_constructors[tag](self, node)
        elif cls is yaml.MappingNode and node.tag == _MAP:
            build = self._build
            mapping: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.__class__ is not yaml.ScalarNode:
                    raise _NotPlain  # PyYAML reports an unhashable key with its line
                mapping[build(key_node)] = build(value_node)
            if len(mapping) != len(node.value):
                self._find_duplicates(node)
            return mapping
        elif cls is yaml.SequenceNode and node.tag == _SEQ:
            return [self._build(child) for child in node.value]
        raise _NotPlain

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if self.merges:
            self._find_duplicates(node)  # before merging adds pairs that may repeat keys
            merged: dict[Any, Any] = super().construct_mapping(node, deep=deep)
            return merged
        # Without merges a mapping with fewer keys than pairs is the only sign of a
        # duplicate: one length comparison per mapping, the key scan only then.
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(mapping) != len(node.value):
            self._find_duplicates(node)
        return mapping

    def _find_duplicates(self, node: yaml.Node) -> None:
        keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
        if len(set(keys)) != len(keys):  # rare: look for the culprits only then
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = key_node.value
                    if key in seen and key != "<<":
                        self.duplicates.append((str(key), int(key_node.start_mark.line) + 1))
                    seen.add(key)


_Loader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    lambda loader, node: loader.construct_scalar(node),
)


def _bounded_number(tag: str) -> Any:
    base = _BaseLoader.yaml_constructors[tag]

    def construct(loader: _Loader, node: yaml.ScalarNode) -> Any:
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise YamlReadError(
                f"number has {len(str(node.value))} characters; the limit is "
                f"{MAX_NUMBER_CHARS} (quote it if it is meant as text)",
                int(node.start_mark.line) + 1,
            )
        return base(loader, node)

    return construct


for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    _Loader.add_constructor(_tag, _bounded_number(_tag))


def _check_nesting_before_compose(text: str) -> int:
    """Refuse nesting deeper than ``MAX_DEPTH`` before libyaml composes it; the number
    of nesting indicators in ``text``.

    Every level of nesting needs an indicator (``-``, ``:``, ``?``, ``[``, ``{``),
    so a text with few of them is safe and costs five C-level counts. Only a
    larger text is scanned event by event (an iterative parse, no recursion).
    """
    count = text.count
    indicators = count("-") + count(":") + count("?") + count("[") + count("{")
    if indicators <= _SAFE_INDICATORS:
        return indicators
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_BaseLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    mark = event.start_mark
                    raise YamlReadError(_too_deep(), int(mark.line) + 1 if mark else None)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass  # composing reports the syntax error with its line
    return indicators


def _too_deep() -> str:
    return f"YAML is nested more than {MAX_DEPTH} levels deep (the limit)"


def _check_depth(root: yaml.Node, aliased: bool) -> None:
    """Refuse a composed document nested deeper than ``MAX_DEPTH``, level by level.

    Breadth-first over collection nodes only (scalars are skipped without a
    call), so a typical manifest costs a few dozen list operations. With
    aliases, a node shared by many parents is kept once per level, so the walk
    never expands what the aliases would.
    """
    level = [root]
    depth = 0
    while level:
        if aliased:
            level = list({id(n): n for n in level}.values())
        depth += 1
        if depth > MAX_DEPTH:
            raise YamlReadError(_too_deep(), int(level[0].start_mark.line) + 1)
        deeper: list[yaml.Node] = []
        for node in level:
            if node.__class__ is yaml.MappingNode:
                for key, value in node.value:
                    if value.__class__ is not yaml.ScalarNode:
                        deeper.append(value)
                    if key.__class__ is not yaml.ScalarNode:
                        deeper.append(key)
            elif node.__class__ is yaml.SequenceNode:
                deeper.extend(c for c in node.value if c.__class__ is not yaml.ScalarNode)
        level = deeper


def _check_aliases(root: yaml.Node) -> None:
    """Refuse a document whose aliases would expand past ``MAX_ALIAS_NODES`` extra nodes,
    or past ``MAX_ALIAS_CHARS`` extra characters of scalars.

    Aliases share node objects, so the expanded size is computed once per
    distinct node (memoised): a billion-laughs document is refused in
    microseconds instead of being expanded into gigabytes.
    """
    sizes: dict[int, tuple[int, int]] = {}  # node -> (nodes, scalar characters) expanded
    unique = unique_chars = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children: list[yaml.Node] = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if done:
            sizes[id(node)] = (
                1 + sum(sizes[id(c)][0] for c in children),
                _chars(node) + sum(sizes[id(c)][1] for c in children),
            )
        elif id(node) not in sizes:
            chars = _chars(node)
            unique += 1
            unique_chars += chars
            sizes[id(node)] = (1, chars)  # in progress (a recursive alias counts once)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    nodes, chars = sizes[id(root)]
    extra = nodes - unique
    line = int(root.start_mark.line) + 1
    if extra > MAX_ALIAS_NODES:
        raise YamlReadError(
            f"YAML aliases expand to {extra:,} more nodes; the limit is {MAX_ALIAS_NODES:,}", line
        )
    if chars - unique_chars > MAX_ALIAS_CHARS:
        raise YamlReadError(
            f"YAML aliases expand to {chars - unique_chars:,} more characters; "
            f"the limit is {MAX_ALIAS_CHARS:,}",
            line,
        )


def _chars(node: yaml.Node) -> int:
    return len(node.value) if isinstance(node, yaml.ScalarNode) else 0


def read_text(path: Path) -> str:
    """Read a file as strict UTF-8 with a size bound, naming the line of a bad byte.

    One ``open`` and a bounded ``read``: the size is asked of the file system only
    when the read shows the file is too large (a ``stat`` per file was a tenth of a
    large catalog's load). The first read asks for ``_FIRST_READ`` bytes, which holds
    any usual catalog file: a read of the whole bound allocates (and maps) a buffer of
    that size for every file, which cost more than reading the catalog's 13,000 files.
    """
    try:
        with open(path, "rb") as stream:
            raw = stream.read(_FIRST_READ)
            if len(raw) == _FIRST_READ:  # a large file: the rest, up to the bound
                raw += stream.read(MAX_FILE_BYTES + 1 - _FIRST_READ)
            if len(raw) > MAX_FILE_BYTES:
                size = os.fstat(stream.fileno()).st_size
                raise YamlReadError(
                    f"file is too large ({max(size, len(raw))} bytes; the limit is "
                    f"{MAX_FILE_BYTES} bytes)"
                )
    except OSError as e:
        raise YamlReadError(f"cannot read file: {e.strerror or e}") from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise YamlReadError(
            f"file is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})", line
        ) from e


def _translate(e: yaml.YAMLError, text: str) -> YamlReadError:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    line = int(mark.line) + 1 if mark is not None else None
    problem = getattr(e, "problem", None) or str(e)
    if line is not None:
        lines = text.splitlines()
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        indent = source[: len(source) - len(source.lstrip(" \t"))]
        if "\t" in indent:
            return YamlReadError(
                "tab character in indentation; YAML allows only spaces there", line
            )
    context = getattr(e, "context", None)
    message = f"invalid YAML: {problem}" + (f" ({context})" if context else "")
    return YamlReadError(message, line)


def iter_documents(text: str) -> Iterator[Document]:
    """Parse every document of ``text``; skips empty documents (``---`` alone)."""
    indicators = _check_nesting_before_compose(text)
    aliased = "*" in text and "&" in text
    # without aliases a document nests at most once per indicator: most files need no walk
    shallow = not aliased and indicators <= MAX_DEPTH
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            if not shallow:
                _check_depth(node, aliased)
            if aliased:
                _check_aliases(node)
            loader.duplicates = []
            data = loader.construct_document(node)
            if data is not None:
                yield Document(data, node, list(loader.duplicates))
    except yaml.YAMLError as e:
        raise _translate(e, text) from e
    except (ValueError, TypeError, RecursionError) as e:
        # e.g. an unhashable key such as "? [a, b]", or absurd nesting
        raise YamlReadError(f"invalid YAML: {e}") from e
    finally:
        loader.dispose()


def load_bounded(text: str) -> Any:
    """The value of a single-document YAML text, within the same bounds as catalog files.

    For YAML that does not come from a catalog checkout but is just as
    untrusted: status files on the status branch can be edited by hand.
    Raises ``YamlReadError`` (with a line where known); an empty text is None.
    """
    if len(text) > MAX_FILE_BYTES:
        raise YamlReadError(f"text is too large ({len(text)} characters)")
    docs = list(iter_documents(text))
    if len(docs) > 1:
        raise YamlReadError(f"expected one YAML document, found {len(docs)}", docs[1].start_line)
    return docs[0].data if docs else None


def read_documents(path: Path) -> list[Document]:
    """All documents of a file; raises ``YamlReadError`` with a line where possible."""
    return list(iter_documents(read_text(path)))


def read_single_document(path: Path) -> Document:
    """Exactly one non-empty document, as reconciler's own files must hold."""
    docs = read_documents(path)
    if not docs:
        raise YamlReadError("file is empty", 1)
    if len(docs) > 1:
        raise YamlReadError(
            f"expected one YAML document, found {len(docs)} (remove the extra '---')",
            docs[1].start_line,
        )
    return docs[0]


def type_name(value: Any) -> str:
    """A person's word for a YAML value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
