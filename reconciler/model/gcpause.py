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

# Young objects a kept block must leave for the move to the oldest generation to be
# worth it. Below this the next young and middle collections walk them in well under a
# millisecond, while asking whether objects are frozen (``gc.get_freeze_count``) walks
# every frozen object: 10 ms under a test runner that froze its heap, paid on each of the
# thousands of small catalog loads of the test suite. A real catalog leaves millions.
WORTH_MOVING = 10_000


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
    whoever froze them (a test runner) meant them to stay so; and skipped when the
    block left fewer than ``WORTH_MOVING`` young objects (``gc.get_count()``, which
    the paused collector leaves counting the block's allocations), a walk not worth
    saving.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            moving = keeps and gc.get_count()[0] >= WORTH_MOVING
            # the cheap test first: gc.get_freeze_count walks every frozen object
            if moving and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
