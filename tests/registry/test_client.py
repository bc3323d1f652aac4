"""The Distribution API client against a real registry (and a proxy that fails for a while)."""

from __future__ import annotations

import base64
import json
import logging
import socket
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import urllib3

from reconciler.registry import (
    Credential,
    Credentials,
    RegistryClient,
    RegistryError,
    RetryPolicy,
    repository_of,
)
from reconciler.registry.auth import parse_challenges
from reconciler.registry.local import (
    FaultProxy,
    LocalRegistry,
    delete_manifest,
    image_manifest,
    push_image,
    put_manifest,
)
from tests.registry.conftest import FAST

READER = Credential("reader", "s3cret-Pa55")


def test_tags_follow_link_pagination_over_250_tags(registry: LocalRegistry, repo_name: str) -> None:
    manifest = image_manifest(registry.url, repo_name, "one image, many tags")
    tags = [f"1.0.0-rev1-b{n}" for n in range(260)]
    pool = urllib3.PoolManager(maxsize=8, retries=False)
    with ThreadPoolExecutor(8) as workers:
        list(
            workers.map(
                lambda t: put_manifest(registry.url, repo_name, t, manifest, pool=pool), tags
            )
        )
    with RegistryClient(policy=FAST, page_size=100) as c:
        # distribution 2.8 ignores n on tag lists: all 260 in one answer, no Link
        assert sorted(c.list_tags(repository_of(f"{registry.host}/{repo_name}"))) == sorted(tags)
        # the spec's pages (as distribution 3, Docker Hub and GHCR serve them), cut from
        # the real registry's list by the proxy, with relative Link URLs
        with FaultProxy(registry.host, paginate=True) as proxy:
            found = c.list_tags(repository_of(f"{proxy.host}/{repo_name}:x"))
    assert len(found) == 260 and sorted(found) == sorted(tags)
    pages = [path for _, path, _ in proxy.seen if "/tags/list" in path]
    assert len(pages) == 3 and pages[0].endswith("?n=100")
    assert pages[1].endswith(f"?n=100&last={sorted(tags)[99]}")
    assert pages[2].endswith(f"?n=100&last={sorted(tags)[199]}")


def test_manifest_digest_by_head_and_missing_is_none(
    registry: LocalRegistry, repo_name: str, client: RegistryClient
) -> None:
    digest = push_image(registry.url, repo_name, "2.6.2-rev1-b5.1")
    repo = repository_of(f"{registry.host}/{repo_name}:2.6.2-rev1")
    assert client.manifest_digest(repo, "2.6.2-rev1-b5.1") == digest
    assert client.manifest_digest(repo, digest) == digest
    assert client.manifest_digest(repo, "2.6.2-rev1-b9") is None


def test_a_deleted_manifest_is_gone_by_tag_and_by_digest(
    registry: LocalRegistry, repo_name: str, client: RegistryClient
) -> None:
    old = push_image(registry.url, repo_name, "2.6.2-rev1-b5.1")
    push_image(registry.url, repo_name, "2.6.2-rev1-b6.1")
    repo = repository_of(f"{registry.host}/{repo_name}")
    delete_manifest(registry.url, repo_name, old)
    assert client.list_tags(repo) == ["2.6.2-rev1-b6.1"]
    assert client.manifest_digest(repo, "2.6.2-rev1-b5.1") is None
    assert client.manifest_digest(repo, old) is None


def test_a_repository_that_does_not_exist_is_an_error_naming_it(
    registry: LocalRegistry, client: RegistryClient
) -> None:
    with pytest.raises(RegistryError) as caught:
        client.list_tags(repository_of(f"{registry.host}/no/such-repo:1"))
    assert str(caught.value) == (
        f"registry {registry.host}: repository no/such-repo does not exist "
        "(NAME_UNKNOWN: repository name not known to registry)"
    )
    assert caught.value.registry == registry.host


def test_500_then_recovery_is_retried_with_backoff(registry: LocalRegistry, repo_name: str) -> None:
    push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    waits: list[float] = []
    policy = RetryPolicy(attempts=4, backoff=0.01)
    with (
        FaultProxy(registry.host, failures=2) as proxy,
        RegistryClient(policy=policy, sleep=waits.append) as c,
    ):
        assert c.list_tags(repository_of(f"{proxy.host}/{repo_name}")) == ["1.0.0-rev1-b1"]
    assert [status for _, _, status in proxy.seen] == [500, 500, 200]
    assert waits == [0.01, 0.02]  # exponential backoff between the attempts


def test_429_honours_retry_after(registry: LocalRegistry, repo_name: str) -> None:
    push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    waits: list[float] = []
    with (
        FaultProxy(registry.host, failures=1, status=429, retry_after="3") as proxy,
        RegistryClient(policy=FAST, sleep=waits.append) as c,
    ):
        repo = repository_of(f"{proxy.host}/{repo_name}")
        assert c.manifest_digest(repo, "1.0.0-rev1-b1") is not None
    assert waits == [3.0]


def test_a_registry_that_keeps_failing_is_one_error_after_bounded_tries(
    registry: LocalRegistry, repo_name: str
) -> None:
    with (
        FaultProxy(registry.host, failures=100) as proxy,
        RegistryClient(policy=FAST, sleep=lambda _: None) as c,
        pytest.raises(RegistryError) as caught,
    ):
        c.list_tags(repository_of(f"{proxy.host}/{repo_name}"))
    assert str(caught.value) == (
        f"registry {proxy.host}: listing tags of {repo_name}: HTTP 500 (UNAVAILABLE: ) after 3 tries"
    )
    assert len(proxy.seen) == 3


def test_a_registry_that_is_down_is_an_error_naming_it() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        RegistryClient(policy=FAST, sleep=lambda _: None) as c,
        pytest.raises(RegistryError) as caught,
    ):
        c.list_tags(repository_of(f"127.0.0.1:{port}/shop/web:1.0.0-rev1"))
    assert str(caught.value).startswith(
        f"registry 127.0.0.1:{port}: listing tags of shop/web: cannot connect ("
    )
    assert str(caught.value).endswith("after 3 tries")


def test_a_malformed_tags_answer_is_an_error(registry: LocalRegistry, repo_name: str) -> None:
    def answer(
        method: str, path: str, _: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes] | None:
        if "/tags/list" in path:
            return 200, {"Content-Type": "application/json"}, b'{"name": "x", "tags": "oops"}'
        return None

    with (
        FaultProxy(registry.host, override=answer) as proxy,
        RegistryClient(policy=FAST) as c,
        pytest.raises(RegistryError, match="malformed tags response"),
    ):
        c.list_tags(repository_of(f"{proxy.host}/{repo_name}"))


# --- authentication ---------------------------------------------------------------------


def test_bearer_token_auth_sends_basic_credentials_to_the_realm_and_caches_the_token(
    token_registry: LocalRegistry, repo_name: str
) -> None:
    digest = push_image(
        token_registry.url, repo_name, "1.0.0-rev1-b1", token=token_registry.token(repo_name)
    )
    server = token_registry.token_server
    assert server is not None
    before = len(server.requests)
    credentials = Credentials(by_host={token_registry.host: READER})
    with RegistryClient(credentials=credentials, policy=FAST) as c:
        repo = repository_of(f"{token_registry.host}/{repo_name}:1.0.0-rev1")
        assert c.list_tags(repo) == ["1.0.0-rev1-b1"]
        assert c.manifest_digest(repo, "1.0.0-rev1-b1") == digest
    asked = server.requests[before:]
    assert asked == [{"method": "GET", "path": "/token", "basic": True}]  # one token per scope


def test_basic_auth_answers_the_challenge_with_the_configured_credentials(
    registry: LocalRegistry, repo_name: str
) -> None:
    """A registry behind HTTP Basic (an nginx in front of distribution, as its docs show)."""
    push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    good = "Basic " + base64.b64encode(b"reader:s3cret-Pa55").decode()
    sent: list[str | None] = []

    def basic(
        method: str, path: str, headers: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes] | None:
        sent.append(headers.get("Authorization"))
        if headers.get("Authorization") == good:
            return None
        return 401, {"WWW-Authenticate": 'Basic realm="registry"'}, b""

    with FaultProxy(registry.host, override=basic) as proxy:
        repo = repository_of(f"{proxy.host}/{repo_name}")
        with RegistryClient(credentials=Credentials(everywhere=READER), policy=FAST) as c:
            assert c.list_tags(repo) == ["1.0.0-rev1-b1"]
            assert c.manifest_digest(repo, "1.0.0-rev1-b1") is not None
        # anonymous first; once challenged, every request carries the credentials
        assert sent == [None, good, good]
        wrong = Credentials(everywhere=Credential("reader", "nope"))
        with (
            RegistryClient(credentials=wrong, policy=FAST) as c,
            pytest.raises(RegistryError) as caught,
        ):
            c.list_tags(repo)
    assert str(caught.value) == (
        f"registry {proxy.host}: listing tags of {repo_name}: 401 Unauthorized: "
        "credentials were refused"
    )


def test_wrong_credentials_are_a_clear_error(token_registry: LocalRegistry, repo_name: str) -> None:
    wrong = Credentials(everywhere=Credential("reader", "wrong"))
    with RegistryClient(credentials=wrong, policy=FAST) as c, pytest.raises(RegistryError) as e:
        c.list_tags(repository_of(f"{token_registry.host}/{repo_name}"))
    server = token_registry.token_server
    assert server is not None
    assert str(e.value) == (
        f"registry {token_registry.host}: token from {server.url[7:]} for "
        f"repository:{repo_name}:pull: 401: credentials were refused"
    )


def test_no_credentials_for_a_token_registry_is_a_clear_error(
    token_registry: LocalRegistry, repo_name: str
) -> None:
    with RegistryClient(policy=FAST) as c, pytest.raises(RegistryError) as e:
        c.list_tags(repository_of(f"{token_registry.host}/{repo_name}"))
    assert "credentials are needed and none are configured" in str(e.value)


def _config(path: Path, host: str, entry: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"auths": {host: entry}}))
    return path


@pytest.mark.parametrize("form", ["auth", "username-password"])
def test_docker_config_json_credentials(
    token_registry: LocalRegistry, repo_name: str, tmp_path: Path, form: str
) -> None:
    push_image(
        token_registry.url, repo_name, "1.0.0-rev1-b1", token=token_registry.token(repo_name)
    )
    entry = (
        {"auth": base64.b64encode(b"reader:s3cret-Pa55").decode()}
        if form == "auth"
        else {"username": "reader", "password": "s3cret-Pa55"}
    )
    config = _config(tmp_path / "docker", f"http://{token_registry.host}", entry)
    credentials = Credentials.from_environment({"DOCKER_CONFIG": str(config)})
    with RegistryClient(credentials=credentials, policy=FAST) as c:
        assert c.list_tags(repository_of(f"{token_registry.host}/{repo_name}")) == ["1.0.0-rev1-b1"]


def test_docker_config_identity_token_is_a_refresh_token(
    token_registry: LocalRegistry, repo_name: str, tmp_path: Path
) -> None:
    server = token_registry.token_server
    assert server is not None
    server.identity_token = "refresh-me-42"
    push_image(
        token_registry.url, repo_name, "1.0.0-rev1-b1", token=token_registry.token(repo_name)
    )
    config = _config(tmp_path / "d", token_registry.host, {"identitytoken": "refresh-me-42"})
    credentials = Credentials.from_environment({"DOCKER_CONFIG": str(config)})
    before = len(server.requests)
    with RegistryClient(credentials=credentials, policy=FAST) as c:
        assert c.list_tags(repository_of(f"{token_registry.host}/{repo_name}")) == ["1.0.0-rev1-b1"]
    assert server.requests[before:] == [
        {"method": "POST", "path": "/token", "basic": False, "refresh": True}
    ]


def test_environment_credentials_can_be_limited_to_hosts() -> None:
    env = {
        "RECONCILER_REGISTRY_USERNAME": "u",
        "RECONCILER_REGISTRY_PASSWORD": "p",
        "RECONCILER_REGISTRY_HOST": "registry.example.com, docker.io",
    }
    creds = Credentials.from_environment(env, config=None)
    assert creds.for_host("registry.example.com") == Credential("u", "p", source="environment")
    assert creds.for_host("index.docker.io") is not None  # Docker Hub under any of its names
    assert creds.for_host("ghcr.io") is None
    everywhere = Credentials.from_environment({k: env[k] for k in list(env)[:2]}, config=None)
    assert everywhere.for_host("ghcr.io") is not None


def test_credentials_and_tokens_never_reach_logs_or_errors(
    token_registry: LocalRegistry, repo_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    push_image(
        token_registry.url, repo_name, "1.0.0-rev1-b1", token=token_registry.token(repo_name)
    )
    caplog.set_level(logging.DEBUG)
    with RegistryClient(credentials=Credentials(everywhere=READER), policy=FAST) as c:
        repo = repository_of(f"{token_registry.host}/{repo_name}")
        c.list_tags(repo)
        c.manifest_digest(repo, "1.0.0-rev1-b1")
        tokens = [t.value for t in c._tokens.values()]
        assert repr(c.credentials).count("s3cret") == 0
    wrong = Credential("reader", "wr0ng-Secret")
    with (
        RegistryClient(credentials=Credentials(everywhere=wrong), policy=FAST) as c,
        pytest.raises(RegistryError) as caught,
    ):
        c.list_tags(repo)
    assert tokens and "GET http" in caplog.text  # the requests were logged, at debug
    basic = base64.b64encode(b"reader:s3cret-Pa55").decode()
    for secret in ("s3cret-Pa55", "wr0ng-Secret", basic, *tokens):
        assert secret not in caplog.text
        assert secret not in str(caught.value)


# --- references and challenges ----------------------------------------------------------


def test_references_name_registry_and_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECONCILER_REGISTRY_INSECURE", raising=False)
    hub = repository_of("nginx:1.27")
    assert (hub.host, hub.name, hub.base_url) == (
        "docker.io",
        "library/nginx",
        "https://registry-1.docker.io",
    )
    assert repository_of("docker.io/bitnami/redis:7").name == "bitnami/redis"
    assert repository_of("ghcr.io/org/app:1@sha256:" + "a" * 64).base_url == "https://ghcr.io"
    assert repository_of("localhost:5000/app:1").base_url == "http://localhost:5000"
    assert repository_of("[::1]:5000/app:1").base_url == "http://[::1]:5000"
    assert repository_of("reg.lan:5000/app").scheme == "https"
    monkeypatch.setenv("RECONCILER_REGISTRY_INSECURE", "reg.lan:5000,mirror.lan")
    assert repository_of("reg.lan:5000/app").scheme == "http"
    assert repository_of("mirror.lan/app").scheme == "http"


def test_www_authenticate_challenges_parse() -> None:
    header = (
        'Bearer realm="https://auth.example.com/token",service="registry.example.com",'
        'scope="repository:a/b:pull,push", Basic realm="x"'
    )
    bearer, basic = parse_challenges(header)
    assert bearer.scheme == "bearer" and bearer.realm == "https://auth.example.com/token"
    assert bearer.params["scope"] == "repository:a/b:pull,push"
    assert bearer.params["service"] == "registry.example.com"
    assert (basic.scheme, basic.realm) == ("basic", "x")


def test_a_link_to_another_host_is_refused_and_gets_no_credentials(
    registry: LocalRegistry, repo_name: str
) -> None:
    """Issue 28: a registry answering ``Link: <http://OTHER-HOST/...>; rel="next"`` got the
    scan's Basic credentials sent to that other host. Now such a page is refused; a
    ``Link`` to the registry itself (absolute or relative) is still followed."""
    push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    push_image(registry.url, repo_name, "1.0.1-rev1-b1")
    good = "Basic " + base64.b64encode(b"reader:s3cret-Pa55").decode()
    elsewhere: list[tuple[str, str | None]] = []

    def other_host(
        method: str, path: str, headers: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes] | None:
        elsewhere.append((path, headers.get("Authorization")))
        return 200, {"Content-Type": "application/json"}, b'{"name": "x", "tags": ["9.9.9"]}'

    def front(next_host: str) -> Callable[..., tuple[int, dict[str, str], bytes] | None]:
        def answer(
            method: str, path: str, headers: Mapping[str, str]
        ) -> tuple[int, dict[str, str], bytes] | None:
            if headers.get("Authorization") != good:
                return 401, {"WWW-Authenticate": 'Basic realm="registry"'}, b""
            if "last=" in path:
                return None  # the second page: what the registry answers
            link = f'<http://{next_host()}/v2/{repo_name}/tags/list?n=1&last=1.0.0-rev1-b1>; rel="next"'
            body = json.dumps({"name": repo_name, "tags": ["1.0.0-rev1-b1"]}).encode()
            return 200, {"Content-Type": "application/json", "Link": link}, body

        return answer

    creds = Credentials(everywhere=READER)
    with FaultProxy(registry.host, override=other_host) as other:
        with FaultProxy(registry.host, override=front(lambda: other.host)) as proxy:
            repo = repository_of(f"{proxy.host}/{repo_name}")
            with (
                RegistryClient(credentials=creds, policy=FAST) as c,
                pytest.raises(RegistryError) as caught,
            ):
                c.list_tags(repo)
        assert elsewhere == []  # not one request reached the other host, with or without them
        assert f"the next page is on another origin (http://{other.host}/v2/" in str(caught.value)
        assert "s3cret" not in str(caught.value)

    same: list[str] = []
    with FaultProxy(registry.host) as proxy:
        proxy.override = front(lambda: same.append(proxy.host) or proxy.host)
        with RegistryClient(credentials=creds, policy=FAST) as c:
            tags = c.list_tags(repository_of(f"{proxy.host}/{repo_name}"))
    assert "1.0.0-rev1-b1" in tags and "1.0.1-rev1-b1" in tags and same
