"""Duplicate keys and the size bound of the catalog's YAML reader.

The reader looks for duplicate keys only when a mapping came out shorter than its
pairs (or when the text holds a ``<<`` merge key); these pin that every duplicate is
still found, with its line, and that a merge's overridden keys are not duplicates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.catalog import yamlread
from reconciler.catalog.yamlread import (
    MAX_FILE_BYTES,
    YamlReadError,
    iter_documents,
    read_text,
)


def duplicates(text: str) -> list[tuple[str, int]]:
    return [d for doc in iter_documents(text) for d in doc.duplicates]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a: 1\nb: 2\na: 3\n", [("a", 3)]),
        ("top:\n  x: 1\n  y: 2\n  x: 3\n", [("x", 4)]),
        ("list:\n  - {k: 1, k: 2}\n", [("k", 2)]),
        ("a: 1\nb: 2\n", []),
        # equal once constructed, different as written: not what a reviewer sees twice
        ("0x1: a\n1: b\n", []),
        # a merge's keys may be overridden; a key written twice is still a duplicate
        ("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 3\n", []),
        ("base: &b {x: 1}\nuse:\n  <<: *b\n  z: 1\n  z: 2\n", [("z", 5)]),
    ],
)
def test_duplicate_keys_are_found_with_their_line(text: str, found: list[tuple[str, int]]) -> None:
    assert duplicates(text) == found


def test_each_document_reports_only_its_own_duplicates() -> None:
    docs = list(iter_documents("a: 1\na: 2\n---\nb: 1\n---\nc: 1\nc: 2\n"))
    assert [d.duplicates for d in docs] == [[("a", 2)], [], [("c", 7)]]


def test_a_file_over_the_bound_is_refused_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_FILE_BYTES + 10))
    with pytest.raises(YamlReadError, match=rf"too large \({MAX_FILE_BYTES + 10} bytes"):
        read_text(path)


def test_a_file_at_the_bound_is_read(tmp_path: Path) -> None:
    path = tmp_path / "full.yaml"
    path.write_bytes(b"#" * MAX_FILE_BYTES)
    assert len(read_text(path)) == MAX_FILE_BYTES


@pytest.mark.parametrize("extra", [-1, 0, 1, 4096])
def test_a_file_around_the_first_read_is_read_whole(tmp_path: Path, extra: int) -> None:
    """``read_text`` reads a first chunk, then the rest of a larger file: nothing lost
    or doubled at the seam, and a bad byte past it is still named by its line."""
    size = yamlread._FIRST_READ + extra
    line = "k: v\n"
    text = (line * (size // len(line) + 1))[:size]
    path = tmp_path / "seam.yaml"
    path.write_text(text)
    assert read_text(path) == text
    path.write_bytes(text.encode() + b"\n\xff\n")
    with pytest.raises(YamlReadError, match="not valid UTF-8") as e:
        read_text(path)
    assert e.value.line == text.count("\n") + 2


def test_a_directory_is_not_readable_as_a_file(tmp_path: Path) -> None:
    with pytest.raises(YamlReadError, match="cannot read file"):
        read_text(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: -0x1F\nc: 1_000\nd: 0o17\ne: 1.5e3\nf: .inf\ng: ~\nh: yes\ni: 'yes'\n",
        "list: [1, two, 3.0, null, {k: v}]\nnested: {a: {b: {c: [[], {}]}}}\n",
        "bin: !!binary aGVsbG8=\nstr: !!str 123\nint: !!int '7'\n",
        "1: int key\n2.5: float key\ntrue: bool key\n~: null key\n",
        "set: !!set {a, b}\nomap: !!omap [{a: 1}, {b: 2}]\n",  # PyYAML's own path
        "base: &b {x: 1}\nuse: {<<: *b, y: 2}\nalias: *b\n",  # anchors: PyYAML's own path
        "text: |\n  line one\n  line two\nfolded: >\n  a\n  b\n",
    ],
)
def test_values_are_those_pyyaml_builds(text: str) -> None:
    [doc] = iter_documents(text)
    assert doc.data == yaml.load(text, Loader=yaml.SafeLoader)
    assert doc.duplicates == []


SCALARS = (
    "a: 1\nb: '1'\nc: \"1\"\nd: 1.0\ne: yes\nf: 'yes'\ng: null\nh: ~\ni: ''\nj:\n"
    "k: 0x1F\nl: .nan\nm: -.inf\nn: true\no: True\np: 1_000\nq: 0o17\ns: <<x\n"
    "t: !!str 5\nu: ! 5\nv: [1, '1', yes, 'yes']\nw: {1: 1, '1': '1'}\nx: |\n  7\n"
)


def test_scalars_read_again_keep_the_types_pyyaml_gives() -> None:
    """The second read of the same texts is answered from the loader's tag memo: every
    value must keep its type (a memo that mixed up 1 and True, or "1" and 1, would still
    compare equal as a dict)."""
    expected = repr(yaml.load(SCALARS, Loader=yaml.SafeLoader))
    for _ in range(2):
        [doc] = iter_documents(SCALARS)
        assert repr(doc.data) == expected


def test_the_tag_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Distinct scalars beyond the bound are still read right, and not kept."""
    monkeypatch.setattr(yamlread, "_IMPLICIT_TAGS", {})
    monkeypatch.setattr(yamlread, "_IMPLICIT_TAGS_MAX", 10)
    text = "".join(f"k{i}: {i}\n" for i in range(50)) + f"long: {'9' * 80}\n"
    [doc] = iter_documents(text)
    assert doc.data == {**{f"k{i}": i for i in range(50)}, "long": int("9" * 80)}
    assert len(yamlread._IMPLICIT_TAGS) == 10
    assert "9" * 80 not in yamlread._IMPLICIT_TAGS


def test_a_timestamp_stays_text() -> None:
    [doc] = iter_documents("when: 2026-01-01\nat: 2026-01-01T10:00:00Z\n")
    assert doc.data == {"when": "2026-01-01", "at": "2026-01-01T10:00:00Z"}


def test_an_unhashable_key_is_refused_with_a_reason() -> None:
    with pytest.raises(YamlReadError, match="unhashable"):
        list(iter_documents("? [a, b]\n: value\n"))
