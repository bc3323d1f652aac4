"""A local Kubernetes API server for ``reconciler sandbox``, ``reconciler demo`` and the tests.

Served over plain HTTP on loopback by aiohttp, faithful enough for kubectl and the
official client: discovery, CRUD, patches, server-side apply, watch, finalizers,
garbage collection, CRDs, simulated workload controllers, graceful pod deletion
(``termination.py``, ``kubelet.py``), PodDisruptionBudgets with the eviction
subresource (``disruption.py``), the Endpoints/EndpointSlice and ResourceQuota
controllers, admission (LimitRange, ResourceQuota, Priority: ``admission.py``) and
access reviews (``reviews.py``). Start one in-process
with :func:`running_sandbox`; the modules are described in their docstrings
(``server.py`` routes, ``api.py`` write rules, ``store.py`` objects and the watch
cache's per-resource history, ``workqueue.py`` the controller manager's work queue,
run beside the requests, never inside them).
"""

from __future__ import annotations

from reconciler.sandbox.testing import SandboxHandle, running_sandbox

__all__ = ["SandboxHandle", "running_sandbox"]
