"""tests/conftest.py's order for xdist workers: each worker's first share starts with its slow tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import slow_first


class _Item:
    """What ``slow_first`` reads of a collected test: its node id, marks and module."""

    def __init__(self, nodeid: str, slow: bool = False, module: object = None) -> None:
        self.nodeid = nodeid
        self.module = module
        self._slow = slow

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return pytest.mark.slow.mark if name == "slow" and self._slow else None


def _shares(items: list[_Item], workers: int) -> list[list[str]]:
    """How ``--dist worksteal`` first splits the collection: equal runs, in order."""
    shares, left, start = [], len(items), 0
    for i in range(workers):
        size = left // (workers - i)
        shares.append([item.nodeid for item in items[start : start + size]])
        left, start = left - size, start + size
    return shares


def _collection() -> list[_Item]:
    browser = SimpleNamespace(pytestmark=[pytest.mark.slow.mark])  # a module marked whole
    items = [_Item(f"tests/a.py::quick{n}") for n in range(10)]
    items += [_Item(f"tests/b.py::slow{n}", slow=True) for n in range(4)]
    items += [_Item(f"tests/c.py::quick{n}") for n in range(10)]
    items += [_Item(f"tests/browser.py::page{n}", True, browser) for n in range(2)]
    items += [_Item("tests/d.py::slow_last", slow=True)]
    return items


def test_each_worker_s_share_starts_with_its_turn_of_the_slow_tests() -> None:
    items = _collection()
    ordered = slow_first(items, 3)  # type: ignore[arg-type]
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    shares = _shares(ordered, 3)  # type: ignore[arg-type]
    assert [s[:3] for s in shares] == [
        ["tests/b.py::slow0", "tests/b.py::slow3", "tests/a.py::quick0"],
        ["tests/b.py::slow1", "tests/browser.py::page0", "tests/browser.py::page1"],
        ["tests/b.py::slow2", "tests/d.py::slow_last", "tests/c.py::quick3"],
    ]
    # the quick tests follow in their collection order (module fixtures still shared)
    quick = [i.nodeid for i in ordered if "quick" in i.nodeid]
    assert quick == [i.nodeid for i in items if "quick" in i.nodeid]


def test_with_one_worker_or_no_slow_test_the_order_is_the_collection_s() -> None:
    items = _collection()
    assert slow_first(items, 1) == items  # type: ignore[arg-type]
    quick = [_Item(f"tests/a.py::t{n}") for n in range(7)]
    assert slow_first(quick, 4) == quick  # type: ignore[arg-type]


def test_more_slow_tests_than_a_share_holds_keeps_every_test_once() -> None:
    items = [_Item(f"tests/s.py::slow{n}", slow=True) for n in range(9)] + [_Item("tests/q.py::q")]
    ordered = slow_first(items, 4)  # type: ignore[arg-type]
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    # every share is all slow tests, the quick one last of all
    assert [len(s) for s in _shares(ordered, 4)] == [2, 2, 3, 3]  # type: ignore[arg-type]
    assert ordered[-1].nodeid == "tests/q.py::q"
