"""A real registry (CNCF distribution, Debian's ``docker-registry``) per test session.

The registry must start: ``running_registry`` raises, never skips, so a machine
without ``/usr/bin/docker-registry`` fails these tests (``make test`` installs it).
Tests share one open registry and one behind token auth, each test in
repositories of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from reconciler.registry import RegistryClient, RetryPolicy
from reconciler.registry.local import LocalRegistry, running_registry

_names = itertools.count()

FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05, connect_timeout=2, read_timeout=10)


@pytest.fixture(autouse=True)
def _no_proxy_or_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's proxy and registry settings must not change what the tests ask."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "DOCKER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name in ("USERNAME", "PASSWORD", "HOST", "INSECURE"):
        monkeypatch.delenv(f"RECONCILER_REGISTRY_{name}", raising=False)


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    with running_registry(tmp_path_factory.mktemp("registry")) as handle:
        yield handle


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    with running_registry(
        tmp_path_factory.mktemp("token-registry"),
        token_auth=True,
        username="reader",
        password="s3cret-Pa55",
    ) as handle:
        yield handle


@pytest.fixture
def repo_name(request: pytest.FixtureRequest) -> str:
    """A repository name no other test uses (registries are shared by the session)."""
    base = request.node.name.lower().replace("_", "-").replace("[", "-").replace("]", "")
    return f"t{next(_names)}/{base[:60].strip('-')}"


@pytest.fixture
def client() -> Iterator[RegistryClient]:
    with RegistryClient(policy=FAST) as c:
        yield c
