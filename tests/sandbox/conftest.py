"""Fixtures for the sandbox contract tests: official clients bound to the ``sandbox`` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.workloads import GRACEFUL, client_of, fast_sandbox


@pytest.fixture
def api_client(sandbox: SandboxHandle) -> Iterator[client.ApiClient]:
    api = client_of(sandbox)
    yield api
    api.close()


@pytest.fixture
def fast() -> Iterator[tuple[SandboxHandle, client.ApiClient]]:
    """A sandbox whose workloads settle in hundredths of a second, and a client of it."""
    with fast_sandbox() as (handle, api):
        yield handle, api


@pytest.fixture
def graceful_api() -> Iterator[tuple[SandboxHandle, client.ApiClient]]:
    """As ``fast``, but deleted pods take their (scaled) grace period, and a client."""
    with fast_sandbox(GRACEFUL) as (handle, api):
        yield handle, api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture
def dyn(api_client: client.ApiClient) -> DynamicClient:
    return DynamicClient(api_client)
