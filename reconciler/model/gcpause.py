"""Pausing the cyclic garbage collector around bulk work that builds acyclic objects.

Loading a catalog and then resolving and rendering every instance build millions
of small objects (YAML values kept as templates, rendered objects, plans) that
hold no reference cycles: reference counting frees all of them. With the
collector on, every allocation burst starts a collection, and the ones that
reach the older generations walk everything built so far, so the collector's
share grows with the catalog: at 1,000 apps x 5 versions it was 15% of
``check_catalog(load_catalog(...))``, and a larger part at 5,000.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(*, keeps: bool = False) -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state is restored after.

    Nested blocks and callers that paused it already are left alone: only the
    block that turned it off turns it back on.

    ``keeps``: the block builds what the process keeps (a loaded catalog). Resumed
    plainly, the collector's next young collection walks every object the block
    built, then the next middle one walks them again, before they reach the oldest
    generation, where only the rare full collections look. Freezing and at once
    unfreezing every tracked object moves them there directly (``gc.unfreeze`` puts
    frozen objects back into the oldest generation; both calls splice lists and
    cost the same whatever the heap). Skipped when objects are frozen already:
    whoever froze them (a test runner) meant them to stay so.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if keeps and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
