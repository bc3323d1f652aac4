"""Fixtures: real Git (tests/source/fixtures.py) and the sandbox-or-real-cluster backend."""

from tests.kube.conftest import backend  # noqa: F401
from tests.source.fixtures import (  # noqa: F401
    bare_remote,
    cache_dir,
    catalog_repo,
    empty_remote,
    remotes,
)
