"""Shared state of one catalog load: the root, the problems found, and safe file access.

Every file is read through ``LoadContext`` so that two rules hold everywhere:
paths in problems are relative to the catalog root, and no file is read through
a symlink that leaves the catalog (a pull request could otherwise make the
reconciler read ``/etc/shadow`` or another team's secrets into a manifest).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from reconciler.catalog.schema import check_document, field_name
from reconciler.catalog.yamlread import Document, YamlReadError, read_single_document
from reconciler.model import API_VERSION
from reconciler.model.problems import Problem, Severity


class Listed(NamedTuple):
    """One directory entry as ``os.scandir`` saw it (``is_dir``/``is_file`` follow symlinks,
    as ``Path.is_dir`` does; ``is_symlink`` does not)."""

    is_dir: bool
    is_file: bool
    is_symlink: bool


@dataclass
class LoadContext:
    """Problems and path rules of one load.

    Containment is checked top-down: the loader verifies each directory as it
    enters it, so a path whose own entry is not a symlink (and has no ``..``)
    is inside its verified parent without resolving it. That keeps ``realpath``
    off the hot path; a catalog of 13,000 files would otherwise spend most of
    its load time in ``lstat``.

    Each directory is listed once per load (``listing``): the entry checks, the
    "is it a file, a directory, a symlink?" questions and the manifest walk all
    read that one ``os.scandir``, whose entries answer them from the directory
    itself. Asking the file system again for each of a large catalog's 13,000
    files cost more than validating them.
    """

    root: Path
    real_root: Path
    problems: list[Problem] = field(default_factory=list)
    files_with_errors: set[str] = field(default_factory=set)
    _prefix: str = ""
    _listings: dict[str, dict[str, Listed]] = field(default_factory=dict, repr=False)

    @classmethod
    def for_root(cls, root: Path) -> LoadContext:
        return cls(root=root, real_root=root.resolve(), _prefix=str(root).rstrip("/") + "/")

    def rel(self, path: Path) -> str:
        text = str(path)
        if text.startswith(self._prefix):
            return text[len(self._prefix) :]
        if text == str(self.root):
            return "."
        return path.as_posix()

    def error(self, file: str, line: int | None, message: str) -> None:
        self.problems.append(Problem(file, line, Severity.ERROR, message))
        self.files_with_errors.add(file)

    def warning(self, file: str, line: int | None, message: str) -> None:
        self.problems.append(Problem(file, line, Severity.WARNING, message))

    def listing(self, directory: Path) -> dict[str, Listed]:
        """The entries of ``directory`` by name, listed once per load; empty when it is not
        a readable directory."""
        key = str(directory)
        found = self._listings.get(key)
        if found is None:
            found = {}
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        found[entry.name] = Listed(
                            entry.is_dir(), entry.is_file(), entry.is_symlink()
                        )
            except OSError:
                pass  # missing or not a directory: nothing listed, as Path.iterdir would fail
            self._listings[key] = found
        return found

    def entry(self, path: Path) -> Listed | None:
        """What ``path`` is, from its parent's listing; None when it does not exist.

        The parent's listing is found by the text of ``path`` (which a ``Path`` keeps
        once made): ``path.parent`` would build a new ``Path`` and its text for each of
        the several questions the loader asks of every file.
        """
        text = str(path)
        head, _, name = text.rpartition("/")
        found = self._listings.get(head)
        if found is None:
            found = self.listing(path.parent)
        return found.get(name)

    def is_dir(self, path: Path) -> bool:
        found = self.entry(path)
        return found is not None and found.is_dir

    def is_file(self, path: Path) -> bool:
        found = self.entry(path)
        return found is not None and found.is_file

    def exists_or_link(self, path: Path) -> bool:
        """``os.path.lexists``: there, even as a dangling symlink."""
        return self.entry(path) is not None

    def inside(self, path: Path, base: Path) -> bool:
        """True when ``path`` (following symlinks) stays inside ``base`` and the catalog."""
        try:
            real = Path(os.path.realpath(path))
        except OSError:
            return False
        real_base = Path(os.path.realpath(base))
        return real.is_relative_to(real_base) and real.is_relative_to(self.real_root)

    def check_contained(self, path: Path, base: Path, what: str) -> bool:
        """Report a path that escapes ``base`` through a symlink or ``..``; True if safe.

        ``base`` must already be verified (the loader walks top-down).
        """
        found = self.entry(path)
        if (found is None or not found.is_symlink) and (
            ".." not in str(path) or ".." not in path.parts
        ):
            return True
        if self.inside(path, base):
            return True
        target = os.path.realpath(path)
        where = "the catalog" if base == self.root else self.rel(base)
        self.error(
            self.rel(path),
            None,
            f"{what} leaves {where} (resolves to {target}); files must stay inside their directory",
        )
        return False

    def read_reconciler_file(self, path: Path, kind: str) -> Document | None:
        """Read one reconciler file and check apiVersion, kind, duplicates and schema.

        Returns the document when it is usable (no errors), else None after
        reporting every problem found in it.
        """
        doc, valid = self.read_checked(path, kind)
        return doc if valid else None

    def read_checked(self, path: Path, kind: str) -> tuple[Document | None, bool]:
        """Like ``read_reconciler_file``, but also return a parsed document that has errors.

        Callers that report status for a broken file use what it still says
        (an instance's app and namespace); the bool says whether it is valid.
        """
        rel = self.rel(path)
        if not self.check_contained(path, path.parent, "file"):
            return None, False
        try:
            doc = read_single_document(path)
        except YamlReadError as e:
            self.error(rel, e.line, e.message)
            return None, False
        first = len(self.problems)
        for key, line in doc.duplicates:
            self.error(rel, line, f'duplicate key "{key}" (the earlier value would be ignored)')
        if not isinstance(doc.data, dict):
            self.error(
                rel,
                doc.start_line,
                f"expected a mapping (key: value) at the top level, got {_kind_of(doc.data)}",
            )
            return None, False
        if not self._check_header(rel, doc, kind):
            return doc, False
        for violation in check_document(kind, doc.data):
            self.error(rel, doc.line_of(violation.path), violation.message)
        return doc, not any(p.is_error for p in self.problems[first:])

    def _check_header(self, rel: str, doc: Document, kind: str) -> bool:
        data: dict[str, Any] = doc.data
        api = data.get("apiVersion")
        found_kind = data.get("kind")
        ok = True
        if api != API_VERSION:
            where = doc.line_of(["apiVersion"])
            if api is None:
                self.error(rel, where, f'missing "apiVersion: {API_VERSION}"')
            else:
                self.error(rel, where, f'apiVersion must be "{API_VERSION}", got "{api}"')
            ok = False
        if found_kind != kind:
            where = doc.line_of(["kind"])
            if found_kind is None:
                self.error(rel, where, f'missing "kind: {kind}"')
            else:
                self.error(
                    rel, where, f'unknown kind "{found_kind}" here (this file must be kind {kind})'
                )
            ok = False
        return ok

    def check_name(self, rel: str, doc: Document, key: str, expected: str, holder: str) -> bool:
        value = doc.data.get(key)
        if value != expected:
            self.error(
                rel,
                doc.line_of([key]),
                f'{key} "{value}" does not match the {holder} "{expected}" that holds it',
            )
            return False
        return True


def _kind_of(value: Any) -> str:
    from reconciler.catalog.yamlread import type_name

    return type_name(value)


__all__ = ["LoadContext", "field_name"]
