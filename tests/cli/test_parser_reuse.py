"""``reconciler.cli.main`` builds its parser once per process and parses every command
line with it: one parse must never show in the next."""

from __future__ import annotations

import argparse

import pytest

from reconciler import cli

# each command with an ``append`` option (default ``[]``), a command line that leaves it
# out, and the option's destination
APPENDED = [
    (["resolve"], "deployed"),
    (["run", "--cluster", "c"], "verify_signatures"),
    (["preview", "--base", "a"], "cluster"),
    (["report", "--html", "d"], "cluster"),
]


def _list_defaults(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[str]:
    """``command dest`` of every option in the tree whose default is a mutable container."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _list_defaults(sub, (*path, name))
        elif isinstance(action.default, list | dict | set):
            found.add(" ".join((*path, action.dest)))
    return found


def test_every_mutable_default_is_checked_below() -> None:
    """A new ``append`` option with a list default joins APPENDED (so its parse is checked)."""
    assert _list_defaults(cli.build_parser()) == {f"{argv[0]} {dest}" for argv, dest in APPENDED}


def test_main_reuses_one_parser() -> None:
    assert cli._shared_parser() is cli._shared_parser()


@pytest.mark.parametrize(("argv", "dest"), APPENDED, ids=[a[0] for a, _ in APPENDED])
def test_a_default_changed_by_one_parse_is_not_seen_by_the_next(argv: list[str], dest: str) -> None:
    first = cli.parse_args(argv)
    assert getattr(first, dest) == []
    getattr(first, dest).append("left over")  # as a command extending its option would
    second = cli.parse_args(argv)
    assert getattr(second, dest) == []
    assert getattr(second, dest) is not getattr(first, dest)


def test_given_values_are_parsed_afresh_each_time() -> None:
    first = cli.parse_args(["report", "--html", "d", "--cluster", "a", "--cluster", "b"])
    second = cli.parse_args(["report", "--html", "e", "--cluster", "c"])
    assert (first.cluster, first.html) == (["a", "b"], "d")
    assert (second.cluster, second.html) == (["c"], "e")
    assert cli.parse_args(["report", "--html", "d"]).cluster == []
