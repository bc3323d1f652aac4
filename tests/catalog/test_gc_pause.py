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
from reconciler.model.gcpause import gc_paused
from tests.factories import write_catalog


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection that starts while the test runs."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


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
