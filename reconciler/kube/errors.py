"""Kubernetes failures translated once, at the client boundary, into our error tree.

``reconciler.kube.client`` turns every ``kubernetes``/``urllib3`` exception and
every non-2xx API answer into one of these classes (chained with ``from``), so
no caller above ``kube/`` ever sees a third-party exception. Messages name the
object and the API's reason, e.g.
``Deployment/web/podinfo: apply failed (Invalid): spec.replicas: must be >= 0``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reconciler.model.errors import KubeError


class KubeApiError(KubeError):
    """The API server answered with an error status for one request."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        api_reason: str,
        causes: tuple[dict[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.api_reason = api_reason
        self.causes = causes


class ConflictError(KubeApiError):
    """Server-side apply found fields owned by another field manager."""

    reason = "ApplyConflict"

    @property
    def managers(self) -> tuple[str, ...]:
        """Names of the field managers in conflict, from the Status causes."""
        names: list[str] = []
        for cause in self.causes:
            name = _quoted_manager(cause.get("message", ""))
            if name and name not in names:
                names.append(name)
        return tuple(names)


class NotFoundError(KubeApiError):
    """The object (or its kind) does not exist."""


class ClusterUnreachable(KubeError):
    """No answer from the API server after every retry, or no usable connection config."""

    reason = "ClusterUnreachable"


class UnknownKind(KubeError):
    """Discovery does not know a kind (its CRD is missing or not yet established)."""

    reason = "ApplyFailed"


class LimitViolation(KubeError):
    """An object is outside what ``cluster.yaml`` allows (namespaces, cluster scope)."""

    reason = "PolicyViolation"


@dataclass(frozen=True)
class ApiStatus:
    """The useful part of a ``metav1.Status`` body."""

    reason: str
    message: str
    causes: tuple[dict[str, str], ...] = ()


def parse_status(status: int, http_reason: str, body: bytes) -> ApiStatus:
    """Read a ``Status`` error body; fall back to the HTTP reason for non-JSON bodies."""
    try:
        data: Any = json.loads(body) if body else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        text = body.decode("utf-8", "replace").strip()[:300] if body else ""
        return ApiStatus(http_reason or str(status), text or http_reason or f"HTTP {status}")
    details = data.get("details") if isinstance(data.get("details"), dict) else {}
    causes = tuple(
        {str(k): str(v) for k, v in c.items()}
        for c in (details or {}).get("causes") or ()
        if isinstance(c, dict)
    )
    return ApiStatus(
        reason=str(data.get("reason") or http_reason or status),
        message=str(data.get("message") or http_reason or f"HTTP {status}"),
        causes=causes,
    )


def api_error(subject: str, verb: str, status: int, http_reason: str, body: bytes) -> KubeApiError:
    """The error for a non-2xx answer to ``verb`` on ``subject`` (an object or a path)."""
    parsed = parse_status(status, http_reason, body)
    message = f"{subject}: {verb} failed ({parsed.reason}): {parsed.message}"
    cls: type[KubeApiError] = KubeApiError
    if status == 409 and parsed.causes and parsed.reason == "Conflict":
        cls = ConflictError
    elif status == 404:
        cls = NotFoundError
    return cls(message, status=status, api_reason=parsed.reason, causes=parsed.causes)


def _quoted_manager(message: str) -> str:
    # Conflict causes read: conflict with "kubectl-edit" using apps/v1
    start = message.find('"')
    end = message.find('"', start + 1)
    return message[start + 1 : end] if 0 <= start < end else ""
