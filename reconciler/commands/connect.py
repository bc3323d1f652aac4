"""Connect to the cluster from the command line's options, like kubectl does.

``diff``, ``apply`` and ``run`` take ``--kubeconfig``, ``--context`` and
``--request-timeout`` before or after the subcommand name (``reconciler.cli``
resolves which one wins); this turns them into a ``KubeClient``.
"""

from __future__ import annotations

import argparse

from reconciler.kube import KubeClient, RetryPolicy
from reconciler.kube.client import DEFAULT_MAX_REQUESTS_IN_FLIGHT


def connect(args: argparse.Namespace) -> KubeClient:
    """A client for ``args``; ``--request-timeout 0`` waits as long as the server takes."""
    timeout: float | None = getattr(args, "request_timeout", None)
    retry = None
    if timeout is not None:
        retry = RetryPolicy(timeout=None if timeout == 0 else (timeout, timeout))
    return KubeClient.connect(
        getattr(args, "kubeconfig", None),
        getattr(args, "context", None),
        retry=retry,
        max_requests_in_flight=max_requests_in_flight(args),
    )


def max_requests_in_flight(args: argparse.Namespace) -> int:
    """``--max-requests-in-flight`` (``apply``, ``run``), or the client's default."""
    value = getattr(args, "max_requests_in_flight", None)
    return int(value) if value else DEFAULT_MAX_REQUESTS_IN_FLIGHT
