"""Verify and parse push webhooks from GitHub, GitLab and any HMAC-signing sender.

``DaemonHttpServer`` hands the raw request (headers and body bytes) to ``parse_webhook``
and gets back either a ``WebhookEvent`` or a ``WebhookRejected`` carrying the HTTP
status to answer. Nothing here does I/O, so every rejection path is a plain unit.

Authenticity is checked before the body is parsed, on the exact bytes received:

* GitHub: ``X-Hub-Signature-256: sha256=<hex>``, HMAC-SHA256 of the body with the secret.
* GitLab: ``X-Gitlab-Token`` equal to the secret (GitLab sends the token itself).
* generic: ``X-Reconciler-Signature: sha256=<hex>``, HMAC-SHA256 of the body, and a
  JSON object body with optional ``ref``/``branch``/``commit`` (an empty body is ``{}``).

``reconciler reconcile`` asks for a pass with the generic scheme too (``POST
/reconcile``, see ``parse_reconcile_request``): a JSON body naming the cluster and
the time of the request, signed with the same secret, so a request for another
cluster's daemon or a replayed old request is refused.

Comparisons are constant-time. The secret and the signatures never appear in an
error message, so they never reach a log line or a response.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from reconciler.model.errors import ReconcilerError

PROVIDERS = ("github", "gitlab", "generic")

GITHUB_SIGNATURE = "x-hub-signature-256"
GITHUB_EVENT = "x-github-event"
GITHUB_DELIVERY = "x-github-delivery"
GITLAB_TOKEN = "x-gitlab-token"
GITLAB_EVENT = "x-gitlab-event"
GITLAB_DELIVERY = ("x-gitlab-event-uuid", "x-gitlab-webhook-uuid")
GENERIC_SIGNATURE = "x-reconciler-signature"
GENERIC_DELIVERY = "x-reconciler-delivery"

_BRANCH_PREFIX = "refs/heads/"
REQUEST_MAX_AGE = 300  # seconds a signed reconcile request stays valid (clock skew included)


class WebhookRejected(ReconcilerError):
    """A delivery the server refuses; ``status_code`` is the HTTP answer."""

    reason = "WebhookRejected"

    def __init__(self, status_code: int, reason: str) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.message = reason


@dataclass(frozen=True)
class WebhookEvent:
    """An authenticated delivery.

    ``event`` is ``push`` for pushes and ``ping`` for GitHub's hello; other event
    names are kept as sent, so the server can say what it ignored. ``branch`` is set
    when ``ref`` names a branch; a generic event with neither means "any change".
    """

    provider: str
    branch: str | None = None
    commit: str | None = None
    delivery_id: str | None = None
    event: str = "push"
    ref: str | None = None

    def triggers_pass(self, watched_branch: str | None) -> bool:
        """Whether this event should start a pass for a daemon watching ``watched_branch``."""
        if self.event != "push":
            return False
        if self.ref is None and self.branch is None:
            return True
        return watched_branch is None or self.branch == watched_branch

    def describe(self) -> str:
        """One line for logs and trigger details (no secrets are ever part of an event)."""
        target = self.branch or self.ref or "any branch"
        text = f"{self.provider} {self.event} to {target}"
        if self.commit:
            text += f" at {self.commit[:12]}"
        if self.delivery_id:
            text += f" (delivery {self.delivery_id})"
        return text


def parse_webhook(
    provider: str, headers: Mapping[str, str], body: bytes, secret: str | bytes
) -> WebhookEvent:
    """Authenticate and parse one delivery; raises ``WebhookRejected``."""
    verify = _VERIFIERS.get(provider)
    if verify is None:
        raise WebhookRejected(404, f"unknown webhook provider {provider!r}")
    if not secret:
        raise WebhookRejected(403, "webhooks are disabled: no webhook secret is configured")
    lowered = {key.lower(): value for key, value in headers.items()}
    return verify(lowered, body, _as_bytes(secret))


def reconcile_request_body(cluster: str, now: float | None = None) -> bytes:
    """The body ``reconciler reconcile`` signs and posts to ``/reconcile``."""
    stamp = int(time.time() if now is None else now)
    return json.dumps({"cluster": cluster, "requestedAt": stamp}).encode()


def parse_reconcile_request(
    headers: Mapping[str, str],
    body: bytes,
    secret: str | bytes,
    cluster: str | None,
    now: float | None = None,
) -> str:
    """Authenticate a ``/reconcile`` request for the daemon of ``cluster``; its cluster.

    Signed like a generic webhook (``X-Reconciler-Signature``). ``requestedAt``
    (Unix seconds) must be within ``REQUEST_MAX_AGE`` of ``now``: the signature
    covers it, so a captured request cannot be replayed later.
    """
    if not secret:
        raise WebhookRejected(
            403, "reconcile requests are disabled: no webhook secret is configured"
        )
    lowered = {key.lower(): value for key, value in headers.items()}
    _check_signature(lowered, GENERIC_SIGNATURE, body, _as_bytes(secret))
    payload = _json_object(body)
    wanted = _optional_str(payload, "cluster")
    if wanted is None:
        raise WebhookRejected(400, "the request names no cluster")
    if cluster is not None and wanted != cluster:
        raise WebhookRejected(409, f"this daemon reconciles cluster {cluster}, not {wanted}")
    stamp = payload.get("requestedAt")
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        raise WebhookRejected(400, "'requestedAt' must be a number (Unix seconds)")
    skew = abs((time.time() if now is None else now) - stamp)
    if skew > REQUEST_MAX_AGE:
        raise WebhookRejected(
            401,
            f"request time is {skew:.0f}s off the daemon's clock (at most {REQUEST_MAX_AGE}s)",
        )
    return wanted


def sign(body: bytes, secret: str | bytes) -> str:
    """The ``sha256=<hex>`` signature GitHub and generic senders put in their header."""
    return "sha256=" + hmac.new(_as_bytes(secret), body, hashlib.sha256).hexdigest()


def parse_github(headers: Mapping[str, str], body: bytes, secret: bytes) -> WebhookEvent:
    _check_signature(headers, GITHUB_SIGNATURE, body, secret)
    event = headers.get(GITHUB_EVENT, "").strip()
    if not event:
        raise WebhookRejected(400, "missing X-GitHub-Event header")
    delivery = headers.get(GITHUB_DELIVERY) or None
    if event == "ping":
        return WebhookEvent("github", delivery_id=delivery, event="ping")
    payload = _github_payload(headers, body)
    ref = _optional_str(payload, "ref")
    commit = _optional_str(payload, "after") or _head_commit(payload)
    return WebhookEvent("github", _branch_of(ref), commit, delivery, event, ref)


def parse_gitlab(headers: Mapping[str, str], body: bytes, secret: bytes) -> WebhookEvent:
    token = headers.get(GITLAB_TOKEN)
    if token is None:
        raise WebhookRejected(401, "missing X-Gitlab-Token header")
    if not hmac.compare_digest(token.encode("utf-8", "surrogateescape"), secret):
        raise WebhookRejected(401, "X-Gitlab-Token does not match the webhook secret")
    name = headers.get(GITLAB_EVENT, "").strip()
    if not name:
        raise WebhookRejected(400, "missing X-Gitlab-Event header")
    delivery = next((headers[h] for h in GITLAB_DELIVERY if headers.get(h)), None)
    event = "push" if name == "Push Hook" else name
    payload = _json_object(body)
    ref = _optional_str(payload, "ref")
    commit = _optional_str(payload, "checkout_sha") or _optional_str(payload, "after")
    return WebhookEvent("gitlab", _branch_of(ref), commit, delivery, event, ref)


def parse_generic(headers: Mapping[str, str], body: bytes, secret: bytes) -> WebhookEvent:
    _check_signature(headers, GENERIC_SIGNATURE, body, secret)
    payload = _json_object(body) if body.strip() else {}
    ref = _optional_str(payload, "ref")
    branch = _optional_str(payload, "branch") or _branch_of(ref)
    commit = _optional_str(payload, "commit")
    delivery = headers.get(GENERIC_DELIVERY) or _optional_str(payload, "id")
    return WebhookEvent("generic", branch, commit, delivery, "push", ref)


_VERIFIERS: dict[str, Callable[[Mapping[str, str], bytes, bytes], WebhookEvent]] = {
    "github": parse_github,
    "gitlab": parse_gitlab,
    "generic": parse_generic,
}


def _check_signature(headers: Mapping[str, str], header: str, body: bytes, secret: bytes) -> None:
    shown = "-".join(part.capitalize() for part in header.split("-"))
    sent = headers.get(header)
    if not sent:
        raise WebhookRejected(401, f"missing {shown} header")
    algorithm, _, digest = sent.strip().partition("=")
    if algorithm != "sha256" or not digest:
        raise WebhookRejected(401, f"{shown} must look like sha256=<hex>")
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(digest.lower().encode("ascii", "replace"), expected.encode()):
        raise WebhookRejected(401, f"{shown} does not match the body and the webhook secret")


def _github_payload(headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    # GitHub can be set to send ``application/x-www-form-urlencoded`` with the JSON
    # in a ``payload`` field; the signature still covers the raw form body.
    if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        form = parse_qs(body.decode("utf-8", "replace"))
        fields = form.get("payload")
        if not fields:
            raise WebhookRejected(400, "form-encoded delivery without a payload field")
        return _json_object(fields[0].encode())
    return _json_object(body)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WebhookRejected(400, f"body is not valid JSON: {e}") from e
    except RecursionError as e:  # a validly signed but absurdly nested body
        raise WebhookRejected(400, "body is nested too deeply to be a webhook") from e
    if not isinstance(data, dict):
        raise WebhookRejected(400, f"body must be a JSON object, got {type(data).__name__}")
    return data


def _optional_str(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise WebhookRejected(400, f"{key!r} must be a string, got {type(value).__name__}")
    return value or None


def _head_commit(payload: Mapping[str, Any]) -> str | None:
    head = payload.get("head_commit")
    return _optional_str(head, "id") if isinstance(head, dict) else None


def _branch_of(ref: str | None) -> str | None:
    if ref and ref.startswith(_BRANCH_PREFIX):
        return ref[len(_BRANCH_PREFIX) :]
    return None


def _as_bytes(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret
