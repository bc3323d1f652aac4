"""Webhook verification and parsing: GitHub, GitLab and generic, every rejection path."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import urlencode

import pytest

from reconciler.daemon.webhook import WebhookEvent, WebhookRejected, parse_webhook, sign

SECRET = "s3cret-value"
SHA = "1a2b3c4d5e6f1a2b3c4d5e6f1a2b3c4d5e6f1a2b"


def hmac_hex(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_push(ref: str = "refs/heads/main") -> bytes:
    return json.dumps({"ref": ref, "after": SHA, "head_commit": {"id": SHA}}).encode()


def rejected(
    provider: str, headers: dict[str, str], body: bytes, secret: str = SECRET
) -> WebhookRejected:
    with pytest.raises(WebhookRejected) as info:
        parse_webhook(provider, headers, body, secret)
    assert SECRET not in str(info.value)
    return info.value


def test_sign_matches_an_independent_hmac() -> None:
    assert sign(b"{}", SECRET) == hmac_hex(b"{}")
    assert sign(b"{}", SECRET.encode()) == hmac_hex(b"{}")


def test_github_push() -> None:
    body = github_push()
    headers = {
        "X-Hub-Signature-256": hmac_hex(body),
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "d-1",
    }
    event = parse_webhook("github", headers, body, SECRET)
    assert event == WebhookEvent("github", "main", SHA, "d-1", "push", "refs/heads/main")
    assert event.triggers_pass("main")
    assert not event.triggers_pass("release")
    assert event.describe() == f"github push to main at {SHA[:12]} (delivery d-1)"


def test_github_header_names_are_case_insensitive() -> None:
    body = github_push()
    headers = {"x-hub-signature-256": hmac_hex(body), "x-github-event": "push"}
    assert parse_webhook("github", headers, body, SECRET).branch == "main"


def test_github_form_encoded_payload() -> None:
    body = urlencode({"payload": github_push("refs/heads/dev").decode()}).encode()
    headers = {
        "X-Hub-Signature-256": hmac_hex(body),
        "X-GitHub-Event": "push",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    assert parse_webhook("github", headers, body, SECRET).branch == "dev"
    empty = b"other=1"
    headers["X-Hub-Signature-256"] = hmac_hex(empty)
    assert rejected("github", headers, empty).status_code == 400


def test_github_ping_and_other_events_do_not_trigger() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    ping = parse_webhook(
        "github", {"X-Hub-Signature-256": hmac_hex(body), "X-GitHub-Event": "ping"}, body, SECRET
    )
    assert ping.event == "ping" and not ping.triggers_pass("main")
    issue = parse_webhook(
        "github", {"X-Hub-Signature-256": hmac_hex(body), "X-GitHub-Event": "issues"}, body, SECRET
    )
    assert issue.event == "issues" and not issue.triggers_pass(None)


def test_github_tag_push_is_not_a_branch() -> None:
    body = github_push("refs/tags/v1.0.0")
    event = parse_webhook(
        "github", {"X-Hub-Signature-256": hmac_hex(body), "X-GitHub-Event": "push"}, body, SECRET
    )
    assert event.branch is None and event.ref == "refs/tags/v1.0.0"
    assert not event.triggers_pass("main")


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({"X-GitHub-Event": "push"}, 401, "missing X-Hub-Signature-256 header"),
        (
            {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha1=abc"},
            401,
            "X-Hub-Signature-256 must look like sha256=<hex>",
        ),
        (
            {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256="},
            401,
            "X-Hub-Signature-256 must look like sha256=<hex>",
        ),
        (
            {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + "0" * 64},
            401,
            "X-Hub-Signature-256 does not match the body and the webhook secret",
        ),
        (
            {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=ü"},
            401,
            "X-Hub-Signature-256 does not match the body and the webhook secret",
        ),
    ],
)
def test_github_bad_signatures(headers: dict[str, str], status: int, message: str) -> None:
    error = rejected("github", headers, github_push())
    assert (error.status_code, error.message) == (status, message)


def test_github_signature_with_another_secret_is_refused() -> None:
    body = github_push()
    headers = {"X-Hub-Signature-256": hmac_hex(body, "other"), "X-GitHub-Event": "push"}
    assert rejected("github", headers, body).status_code == 401


def test_github_missing_event_header() -> None:
    body = github_push()
    error = rejected("github", {"X-Hub-Signature-256": hmac_hex(body)}, body)
    assert (error.status_code, error.message) == (400, "missing X-GitHub-Event header")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "body is not valid JSON"),
        (b"\xff\xfe", "body is not valid JSON"),
        (b"[1, 2]", "body must be a JSON object, got list"),
        (b'{"ref": 5}', "'ref' must be a string, got int"),
        (b'{"ref": "refs/heads/main", "after": ["x"]}', "'after' must be a string, got list"),
    ],
)
def test_github_bad_bodies(body: bytes, message: str) -> None:
    headers = {"X-Hub-Signature-256": hmac_hex(body), "X-GitHub-Event": "push"}
    error = rejected("github", headers, body)
    assert error.status_code == 400
    assert error.message.startswith(message)


def test_gitlab_push() -> None:
    body = json.dumps({"ref": "refs/heads/main", "checkout_sha": SHA, "after": "f" * 40}).encode()
    headers = {
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "u-1",
    }
    event = parse_webhook("gitlab", headers, body, SECRET)
    assert event == WebhookEvent("gitlab", "main", SHA, "u-1", "push", "refs/heads/main")
    assert event.triggers_pass("main")


def test_gitlab_other_hooks_are_kept_by_name_and_do_not_trigger() -> None:
    body = b'{"ref": "refs/tags/v1"}'
    headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Tag Push Hook"}
    event = parse_webhook("gitlab", headers, body, SECRET)
    assert event.event == "Tag Push Hook" and not event.triggers_pass(None)


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({"X-Gitlab-Event": "Push Hook"}, 401, "missing X-Gitlab-Token header"),
        (
            {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "wrong"},
            401,
            "X-Gitlab-Token does not match the webhook secret",
        ),
        (
            {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET + "x"},
            401,
            "X-Gitlab-Token does not match the webhook secret",
        ),
        ({"X-Gitlab-Token": SECRET}, 400, "missing X-Gitlab-Event header"),
    ],
)
def test_gitlab_rejections(headers: dict[str, str], status: int, message: str) -> None:
    error = rejected("gitlab", headers, b'{"ref": "refs/heads/main"}')
    assert (error.status_code, error.message) == (status, message)


def test_gitlab_bad_json() -> None:
    headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"}
    assert rejected("gitlab", headers, b"nope").status_code == 400


def test_generic_with_branch_ref_or_nothing() -> None:
    body = b'{"branch": "main", "commit": "abc"}'
    headers = {"X-Reconciler-Signature": hmac_hex(body), "X-Reconciler-Delivery": "ci-42"}
    event = parse_webhook("generic", headers, body, SECRET)
    assert (event.branch, event.commit, event.delivery_id) == ("main", "abc", "ci-42")
    assert event.triggers_pass("main") and not event.triggers_pass("dev")

    body = b'{"ref": "refs/heads/dev", "id": "x-1"}'
    event = parse_webhook("generic", {"X-Reconciler-Signature": hmac_hex(body)}, body, SECRET)
    assert (event.branch, event.delivery_id) == ("dev", "x-1")

    # no ref at all: "something changed", whatever branch the daemon follows
    for body in (b"", b"{}"):
        event = parse_webhook("generic", {"X-Reconciler-Signature": hmac_hex(body)}, body, SECRET)
        assert event.triggers_pass("main")
        assert event.describe() == "generic push to any branch"


@pytest.mark.parametrize(
    ("headers", "body", "status", "message"),
    [
        ({}, b"{}", 401, "missing X-Reconciler-Signature header"),
        (
            {"X-Reconciler-Signature": "md5=00"},
            b"{}",
            401,
            "X-Reconciler-Signature must look like sha256=<hex>",
        ),
        (
            {"X-Reconciler-Signature": hmac_hex(b"{}")},
            b'{"branch": "main"}',
            401,
            "X-Reconciler-Signature does not match the body and the webhook secret",
        ),
        ({"X-Reconciler-Signature": hmac_hex(b"oops")}, b"oops", 400, "body is not valid JSON"),
        (
            {"X-Reconciler-Signature": hmac_hex(b'"main"')},
            b'"main"',
            400,
            "body must be a JSON object, got str",
        ),
        (
            {"X-Reconciler-Signature": hmac_hex(b'{"branch": 1}')},
            b'{"branch": 1}',
            400,
            "'branch' must be a string, got int",
        ),
    ],
)
def test_generic_rejections(
    headers: dict[str, str], body: bytes, status: int, message: str
) -> None:
    error = rejected("generic", headers, body)
    assert error.status_code == status
    assert error.message.startswith(message)


def test_unknown_provider_and_missing_secret() -> None:
    assert rejected("bitbucket", {}, b"{}").status_code == 404
    body = github_push()
    headers = {"X-Hub-Signature-256": hmac_hex(body, ""), "X-GitHub-Event": "push"}
    error = rejected("github", headers, body, secret="")
    assert (error.status_code, error.message) == (
        403,
        "webhooks are disabled: no webhook secret is configured",
    )


def test_rejections_never_echo_the_signature() -> None:
    body = github_push()
    forged = "sha256=" + "ab" * 32
    error = rejected("github", {"X-Hub-Signature-256": forged, "X-GitHub-Event": "push"}, body)
    assert "ab" * 32 not in str(error)
