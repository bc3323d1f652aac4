"""Connect to the cluster from the command line's options, like kubectl does.

``diff``, ``apply`` and ``run`` take ``--kubeconfig``, ``--context`` and
``--request-timeout`` before or after the subcommand name (``reconciler.cli``
resolves which one wins); this turns them into a ``KubeClient``.
"""

from __future__ import annotations

import argparse

from reconciler.kube import KubeClient, RetryPolicy


def connect(args: argparse.Namespace) -> KubeClient:
    """A client for ``args``; ``--request-timeout 0`` waits as long as the server takes."""
    timeout: float | None = getattr(args, "request_timeout", None)
    retry = None
    if timeout is not None:
        retry = RetryPolicy(timeout=None if timeout == 0 else (timeout, timeout))
    return KubeClient.connect(
        getattr(args, "kubeconfig", None), getattr(args, "context", None), retry=retry
    )
