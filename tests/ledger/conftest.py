"""Real-Git fixtures (see tests/source/fixtures.py)."""

from tests.source.fixtures import (  # noqa: F401
    bare_remote,
    cache_dir,
    catalog_repo,
    empty_remote,
    git_daemon,
    http_server,
    remotes,
)
