"""API errors as Kubernetes reports them: a ``Status`` object with a code and reason.

Every layer of the sandbox raises :class:`ApiError`; ``server.py`` turns it into the
HTTP response, and watch streams into an ERROR event. Clients (kubectl, the official
client) read ``reason``/``code``/``details`` to decide what happened, so the shape
follows https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/.
"""

from __future__ import annotations

import json
from typing import Any

_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    504: "Timeout",
}


class ApiError(Exception):
    """A request the API server refuses; carries everything a Status needs."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        name: str = "",
        group: str = "",
        kind: str = "",
        causes: list[dict[str, str]] | None = None,
        retry_after: int = 0,
        list_continue: str = "",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # reason="" is a Status without a reason, as the server writes for errors it
        # could not classify (metav1.StatusReasonUnknown).
        self.reason = _REASONS.get(code, "Unknown") if reason is None else reason
        self.name = name
        self.group = group
        self.kind = kind
        self.causes = causes or []
        self.retry_after = retry_after
        # A 410 for an expired continue token carries a token that resumes the list
        # from the latest state (``metadata.continue`` of the Status).
        self.list_continue = list_continue

    def to_status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        if self.retry_after:
            details["retryAfterSeconds"] = self.retry_after
        # Field order of metav1.Status as the server serialises it: details before code.
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {"continue": self.list_continue} if self.list_continue else {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            status["reason"] = self.reason
        if details:
            status["details"] = details
        status["code"] = self.code
        return status


def not_found(group: str, plural: str, name: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(404, f'{resource} "{name}" not found', name=name, group=group, kind=plural)


def already_exists(group: str, plural: str, name: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        f'{resource} "{name}" already exists',
        reason="AlreadyExists",
        name=name,
        group=group,
        kind=plural,
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {resource} "{name}": {why}',
        name=name,
        group=group,
        kind=plural,
    )


def invalid(kind: str, name: str, group: str, field: str, why: str) -> ApiError:
    return ApiError(
        422,
        f'{kind} "{name}" is invalid: {field}: {why}',
        name=name,
        group=group,
        kind=kind,
        causes=[{"reason": "FieldValueInvalid", "message": why, "field": field}],
    )


def success_status(name: str, group: str, plural: str, uid: str) -> dict[str, Any]:
    """What DELETE answers for a removed object of a kind that does not return it.

    The generic registry's ``finalizeDelete`` writes a Status with no code and
    ``details.kind`` set to the resource (plural), group omitted for the core group.
    """
    details = {"name": name, "group": group, "kind": plural, "uid": uid}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {k: v for k, v in details.items() if v},
    }


def field_errors(
    group_kind: tuple[str, str], name: str, errors: list[tuple[str, str, str]]
) -> ApiError:
    """422 Invalid for ``errors`` of (cause type, field, message body), as ``NewInvalid`` words it.

    ``group_kind`` is e.g. ``("meta.k8s.io", "ListOptions")``; one error reads
    ``ListOptions.meta.k8s.io "" is invalid: field: body``, several are bracketed.
    """
    group, kind = group_kind
    qualified = f"{kind}.{group}" if group else kind
    texts = list(dict.fromkeys(f"{field}: {body}" for _, field, body in errors))
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(
        422,
        f'{qualified} "{name}" is invalid: {joined}',
        name=name,
        group=group,
        kind=kind,
        causes=[{"reason": r, "message": body, "field": field} for r, field, body in errors],
    )


def unsupported_dry_run(values: list[Any]) -> tuple[str, str, str] | None:
    """The ``field_errors`` entry for ``dryRun`` values other than ``All``, else None.

    ``All`` is the one value the API server accepts
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run); anything
    else is refused with the write's options kind (``CreateOptions``, ...) as a 422,
    never taken as "not a dry run".
    """
    if all(value == "All" for value in values):
        return None
    shown = json.dumps(values, separators=(",", ":"))
    return (
        "FieldValueNotSupported",
        "dryRun",
        f'Unsupported value: {shown}: supported values: "All"',
    )


def not_allowed(method: str) -> ApiError:
    return ApiError(
        405, f"the server does not allow this method on the requested resource: {method}"
    )
