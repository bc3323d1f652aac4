"""Which Git processes ran: Git's own trace (``GIT_TRACE2``), one file per process.

Tests of how many Git processes something costs (no ``git maintenance`` after a
fetch, one status fetch per daemon pass) read them from Git itself, not from a
wrapper of our runner, so a process Git starts on its own counts too.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconciler.source import checkout
from reconciler.source.remote import RemoteAccess


@dataclass
class GitTrace:
    """Every Git process started while ``GIT_TRACE2`` names ``directory``."""

    directory: Path
    # the listings of a remote on this machine made in process (``local_heads``
    # answered, no ``git ls-remote``), which Git's trace cannot show
    local_listings: list[Sequence[str]] = field(default_factory=list)

    def listings(self) -> int:
        """How many times a remote's refs were listed: ``git ls-remote`` or in process."""
        return self.count("ls-remote") + len(self.local_listings)

    def commands(self) -> list[list[str]]:
        """Each process's arguments after ``git`` (children such as ``git maintenance`` too)."""
        found = []
        for path in sorted(self.directory.iterdir()):
            for line in path.read_text(errors="replace").splitlines():
                _, sep, argv = line.partition(" start ")
                if sep:
                    words = shlex.split(argv)
                    found.append(words[1:])  # the first word is the program (git)
                    break
        return found

    def count(self, *prefix: str) -> int:
        """The processes whose arguments (options like ``-c x=y`` left out) start with ``prefix``."""
        return sum(1 for args in self.commands() if _command(args)[: len(prefix)] == list(prefix))

    def clear(self) -> None:
        for path in self.directory.iterdir():
            path.unlink()
        self.local_listings.clear()


def _command(args: list[str]) -> list[str]:
    """``-c gc.auto=1 gc --auto`` -> ``gc --auto``."""
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in ("-c", "-C") and rest:
            rest.pop(0)
    return rest


@pytest.fixture
def git_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitTrace:
    directory = tmp_path / "git-trace"
    directory.mkdir()
    monkeypatch.setenv("GIT_TRACE2", str(directory))
    trace = GitTrace(directory)
    listed = checkout.local_heads

    def counted(
        access: RemoteAccess, patterns: Sequence[str], environ: Mapping[str, str] | None = None
    ) -> dict[str, str] | None:
        heads = listed(access, patterns, environ)
        if heads is not None:
            trace.local_listings.append(patterns)
        return heads

    monkeypatch.setattr(checkout, "local_heads", counted)
    return trace
