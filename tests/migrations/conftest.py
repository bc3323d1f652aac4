"""Real-Git fixtures (see tests/source/fixtures.py) for the ``migrations`` command."""

from tests.source.fixtures import (  # noqa: F401
    bare_remote,
    cache_dir,
    catalog_repo,
    empty_remote,
    remotes,
)
