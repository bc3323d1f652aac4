"""The cyclic collector stays off while a catalog is loaded, resolved and rendered.

Both build millions of acyclic objects on a large catalog; with the collector on,
its collections walked everything built so far (15% of ``check_catalog(load_catalog())``
at 1,000 apps, more at 5,000: the cost grew faster than the catalog). Reference
counting frees those objects, so the collector is paused and then put back as it was.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.daemon.plan import check_catalog, plan_cluster
from reconciler.model import gcpause
from reconciler.model.gcpause import WORTH_MOVING, gc_paused
from tests.factories import write_catalog


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection that starts while the test runs, at CPython's
    default thresholds (the suite runs with fewer young collections: tests/conftest.py)."""
    seen: list[int] = []
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)


def _catalog(root: Path, instances: int) -> Path:
    """The baseline catalog and ``instances`` more instances: enough allocation for the
    collector (700 new objects start a young collection) many times over."""
    extra = {
        f"clusters/prod/instances/web{i}.yaml": f"""\
            apiVersion: reconciler/v1
            kind: Instance
            name: web{i}
            app: podinfo
            channel: stable
            namespace: team-{i}
            parameters: {{replicas: {i % 5 + 1}}}
            """
        for i in range(instances)
    }
    return write_catalog(root, extra)


def test_check_runs_without_collections(tmp_path: Path, collections: list[int]) -> None:
    root = _catalog(tmp_path, 40)
    catalog = load_catalog(root)
    # the collector's first look at the loaded catalog, once, when the load's pause ends
    gc.collect()
    collections.clear()
    assert gc.isenabled()
    problems = check_catalog(catalog)
    assert problems == []
    assert collections == []
    assert gc.isenabled()  # put back as it was
    # planning the same instances outside ``check_catalog`` (the collector on) does start
    # collections: the allocation above is enough to fail the check without the pause
    plan_cluster(load_catalog(root), "prod")
    assert collections != []


def test_the_collector_stays_off_for_a_caller_that_turned_it_off(tmp_path: Path) -> None:
    root = _catalog(tmp_path, 3)
    gc.disable()
    try:
        check_catalog(load_catalog(root))
        assert not gc.isenabled()
        with gc_paused():
            with gc_paused():
                pass
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_back_after_an_error() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """No frozen objects during the test (the suite freezes what collection built: see
    ``tests/conftest.py``); frozen again after it, as they were."""
    had = gc.get_freeze_count()
    gc.unfreeze()
    try:
        yield
    finally:
        if had:
            gc.freeze()


def _generation_of(obj: object) -> int | None:
    return next((g for g in range(3) if any(o is obj for o in gc.get_objects(g))), None)


def test_what_a_kept_block_built_goes_to_the_oldest_generation(unfrozen: None) -> None:
    """The young collections never walk what a kept block built (a loaded catalog): the
    first two collections after it would only have walked it on its way to the oldest."""
    with gc_paused(keeps=True):
        kept = [[i] for i in range(2 * WORTH_MOVING)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert _generation_of(kept[0]) == 2 and _generation_of(kept) == 2
    # what a plain pause built starts young, as anything else
    with gc_paused():
        young = [[i] for i in range(10)]
    assert _generation_of(young[0]) == 0


def test_a_kept_block_that_built_little_leaves_it_young(unfrozen: None) -> None:
    """Fewer than WORTH_MOVING young objects are not worth the move: they start young
    (the collections may have moved them up one generation since, never to the oldest)."""
    gc.collect()  # nothing young before the block
    with gc_paused(keeps=True):
        small = [[i] for i in range(WORTH_MOVING // 2)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert _generation_of(small[0]) in (0, 1) and _generation_of(small) in (0, 1)


def test_a_loaded_catalog_is_kept(
    tmp_path: Path, unfrozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's pause is a kept one (a test catalog builds too little to be moved at
    the real bound, so every block counts as worth it here)."""
    monkeypatch.setattr(gcpause, "WORTH_MOVING", 0)
    catalog = load_catalog(_catalog(tmp_path, 3))
    assert _generation_of(catalog) == 2
    assert _generation_of(catalog.clusters["prod"].instances["web0"]) == 2


def test_frozen_objects_stay_frozen_through_a_kept_load(unfrozen: None) -> None:
    """Whoever froze objects (a test runner) meant them to stay out of every collection:
    a kept load leaves them so, and its own objects start young."""
    marker = [object()]
    gc.freeze()
    try:
        with gc_paused(keeps=True):  # enough to be worth a move, were none frozen
            kept = [[i] for i in range(2 * WORTH_MOVING)]
        # still frozen: in none of the collector's generations (other frozen objects
        # may have been freed meanwhile, so their count is no measure)
        assert _generation_of(marker) is None
        assert _generation_of(kept[0]) in (0, 1)  # young (a collection may have run)
    finally:
        gc.unfreeze()
