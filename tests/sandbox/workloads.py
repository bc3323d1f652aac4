"""Helpers for the workload contract tests: a fast sandbox, readers and manifests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client

from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.sandbox.timing import TEST_GRACE_SCALE, Timing
from tests.sandbox.helpers import deployment, eventually

FAST = Timing(
    pod_grace_scale=TEST_GRACE_SCALE,
    controller_delay=0.01,
    pod_start=0.03,
    job_duration=0.05,
    job_backoff=0.05,
)
# Deleted pods take their grace period at a hundredth of real time, so a test can see
# them Terminating; one that must linger asks for LINGER seconds and ends it sooner.
GRACEFUL = Timing(controller_delay=0.01, pod_start=0.02, job_duration=0.05, pod_grace_scale=0.01)
LINGER = 6000  # seconds of grace: a minute at GRACEFUL's scale, ended by a shorter DELETE


def client_of(sandbox: SandboxHandle) -> client.ApiClient:
    """An official client of ``sandbox``, configured as its kubeconfig says (its URL and
    bearer token: tests/sandbox/test_runner.py checks the client reads the kubeconfig
    so) without reading the file: parsing its YAML and the loader's token refresh
    before each request were a millisecond a test and a tenth of one a request."""
    configuration = client.Configuration(
        host=sandbox.url,
        api_key={"BearerToken": "sandbox"},
        api_key_prefix={"BearerToken": "Bearer"},
    )
    return client.ApiClient(configuration)


@contextmanager
def fast_sandbox(timing: Timing = FAST, **options: Any) -> Iterator[tuple[SandboxHandle, Any]]:
    with running_sandbox(timing=timing, **options) as sandbox:
        api = client_of(sandbox)
        try:
            yield sandbox, api
        finally:
            api.close()


def conditions(obj: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in obj.status.conditions or []}


def rolled_out(apps: client.AppsV1Api, name: str, timeout: float = 60.0) -> Any:
    """The Deployment once ``kubectl rollout status`` would say it finished."""

    def done() -> Any:
        d = apps.read_namespaced_deployment_status(name, "default")
        s, want = d.status, d.spec.replicas
        finished = (
            s.observed_generation == d.metadata.generation
            and (s.updated_replicas or 0) == want
            and (s.replicas or 0) == want
            and (s.available_replicas or 0) == want
        )
        return d if finished else None

    return eventually(done, timeout)


def pods_of(core: client.CoreV1Api, selector: str) -> list[Any]:
    return list(core.list_namespaced_pod("default", label_selector=selector).items)


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def rolling(
    name: str, replicas: int, image: str, surge: Any = "25%", unavailable: Any = "25%"
) -> dict[str, Any]:
    body = deployment(name, replicas=replicas, image=image)
    body["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
    }
    return body
