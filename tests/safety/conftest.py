"""The safety regressions reuse the daemon's end-to-end world (catalog repo + sandbox)."""

from tests.daemon.conftest import World, world

__all__ = ["World", "world"]
