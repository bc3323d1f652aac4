"""Client details that need no registry of their own: token expiry, Link forms, config keys.

The HTTP parts still go through the real registry (the token registry and a proxy in
front of the open one), so what is checked is what goes over the wire.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Mapping
from pathlib import Path

import pytest

from reconciler.model.errors import UsageError
from reconciler.registry import (
    Credential,
    Credentials,
    RegistryClient,
    RegistryError,
    repository_of,
)
from reconciler.registry.local import (
    FaultProxy,
    LocalRegistry,
    RegistryStartError,
    push_image,
    running_registry,
)
from tests.registry.conftest import FAST

Answer = tuple[int, dict[str, str], bytes] | None


def test_an_expired_token_is_fetched_again(token_registry: LocalRegistry, repo_name: str) -> None:
    push_image(
        token_registry.url, repo_name, "1.0.0-rev1-b1", token=token_registry.token(repo_name)
    )
    server = token_registry.token_server
    assert server is not None
    now = [1000.0]
    with RegistryClient(
        credentials=Credentials(everywhere=Credential("reader", "s3cret-Pa55")),
        policy=FAST,
        clock=lambda: now[0],
    ) as c:
        repo = repository_of(f"{token_registry.host}/{repo_name}")
        before = len(server.requests)
        c.list_tags(repo)
        c.list_tags(repo)
        assert len(server.requests) - before == 1  # cached: the token server issues 300s tokens
        now[0] += 291  # renewed 10s before it expires
        c.list_tags(repo)
        assert len(server.requests) - before == 2


def test_a_head_without_digest_header_is_hashed_from_the_body(
    registry: LocalRegistry, repo_name: str
) -> None:
    digest = push_image(registry.url, repo_name, "1.0.0-rev1-b1")

    def no_digest(method: str, path: str, _: Mapping[str, str]) -> Answer:
        return (200, {"Content-Type": "application/json"}, b"") if method == "HEAD" else None

    with FaultProxy(registry.host, override=no_digest) as proxy, RegistryClient(policy=FAST) as c:
        assert (
            c.manifest_digest(repository_of(f"{proxy.host}/{repo_name}"), "1.0.0-rev1-b1") == digest
        )
    assert [m for m, _, _ in proxy.seen] == ["HEAD", "GET"]


def test_link_headers_absolute_or_relative_are_followed(
    registry: LocalRegistry, repo_name: str
) -> None:
    push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    host: list[str] = []

    def pages(method: str, path: str, _: Mapping[str, str]) -> Answer:
        if path.endswith("?n=100"):  # absolute URL, rel among other parameters
            link = f'<http://{host[0]}/v2/{repo_name}/tags/list?page=2>; type="x"; rel="next"'
            return 200, {"Link": link}, json.dumps({"name": repo_name, "tags": ["a"]}).encode()
        if path.endswith("page=2"):
            link = f"</v2/{repo_name}/tags/list?page=3>; rel=next"
            return 200, {"Link": link}, json.dumps({"name": repo_name, "tags": ["b"]}).encode()
        if path.endswith("page=3"):
            return 200, {}, json.dumps({"name": repo_name, "tags": None}).encode()
        return None

    with FaultProxy(registry.host, override=pages) as proxy, RegistryClient(policy=FAST) as c:
        host.append(proxy.host)
        assert c.list_tags(repository_of(f"{proxy.host}/{repo_name}")) == ["a", "b"]


def test_a_link_that_loops_is_an_error(registry: LocalRegistry, repo_name: str) -> None:
    def loop(method: str, path: str, _: Mapping[str, str]) -> Answer:
        link = f'</v2/{repo_name}/tags/list?n=100>; rel="next"'
        return 200, {"Link": link}, json.dumps({"tags": ["a"]}).encode()

    with (
        FaultProxy(registry.host, override=loop) as proxy,
        RegistryClient(policy=FAST) as c,
        pytest.raises(RegistryError, match="pagination loops"),
    ):
        c.list_tags(repository_of(f"{proxy.host}/{repo_name}"))


def test_a_401_without_a_challenge_is_an_error(registry: LocalRegistry, repo_name: str) -> None:
    def refuse(method: str, path: str, _: Mapping[str, str]) -> Answer:
        return 401, {}, b""

    with (
        FaultProxy(registry.host, override=refuse) as proxy,
        RegistryClient(policy=FAST) as c,
        pytest.raises(RegistryError) as caught,
    ):
        c.manifest_digest(repository_of(f"{proxy.host}/{repo_name}"), "1")
    assert str(caught.value) == (
        f"registry {proxy.host}: manifest {repo_name}:1: 401 Unauthorized without a challenge"
    )


def test_docker_hub_keys_of_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "auths": {
                    "https://index.docker.io/v1/": {"auth": "aHViOmh1Yi1wYXNz"},  # hub:hub-pass
                    "https://ghcr.io": {"username": "me", "password": "p"},
                    "reg.lan:5000": {"identitytoken": "tok"},
                    "empty.example": {},
                },
                "credsStore": "desktop",
            }
        )
    )
    creds = Credentials.from_environment({"DOCKER_CONFIG": str(tmp_path)})
    hub = creds.for_host(repository_of("nginx:1").host)
    assert hub is not None and (hub.username, hub.password) == ("hub", "hub-pass")
    assert creds.for_host("ghcr.io") is not None
    lan = creds.for_host("reg.lan:5000")
    assert lan is not None and lan.identity_token == "tok"
    assert creds.for_host("empty.example") is None
    assert "hub-pass" not in repr(creds) and "tok" not in repr(lan)


def test_a_broken_config_json_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text("{not json")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    with pytest.raises(UsageError) as caught:
        RegistryClient.from_environment()
    assert (
        str(caught.value)
        == f"{tmp_path / 'config.json'}: cannot read docker config: JSONDecodeError"
    )


def test_http_proxy_from_the_environment_with_its_credentials(
    registry: LocalRegistry, repo_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = push_image(registry.url, repo_name, "1.0.0-rev1-b1")
    auth: list[str | None] = []

    def record(method: str, path: str, headers: Mapping[str, str]) -> Answer:
        auth.append({k.lower(): v for k, v in headers.items()}.get("proxy-authorization"))
        return None  # forward

    with FaultProxy(registry.host, override=record) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://px%40user:px-pass@{proxy.host}")
        with RegistryClient(policy=FAST) as c:
            repo = repository_of(f"{registry.host}/{repo_name}")
            assert c.manifest_digest(repo, "1.0.0-rev1-b1") == digest
        # absolute-form request line: the proxy was asked for the registry's URL
        assert [p for _, p, _ in proxy.seen] == [
            f"http://{registry.host}/v2/{repo_name}/manifests/1.0.0-rev1-b1"
        ]
        assert auth == ["Basic " + base64.b64encode(b"px@user:px-pass").decode()]
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with RegistryClient(policy=FAST) as c:
            assert c.manifest_digest(repo, "1.0.0-rev1-b1") == digest
        assert len(proxy.seen) == 1  # NO_PROXY: straight to the registry


def test_a_registry_that_cannot_start_is_an_error_not_a_skip(tmp_path: Path) -> None:
    with (
        pytest.raises(RegistryStartError, match="apt-get install -y docker-registry"),
        running_registry(tmp_path / "a", binary=str(tmp_path / "no-registry")),
    ):
        pass
    script = tmp_path / "broken-registry"
    script.write_text("#!/bin/sh\necho 'configuration error: bad storage' >&2\nexit 1\n")
    script.chmod(0o755)
    with (
        pytest.raises(RegistryStartError) as caught,
        running_registry(tmp_path / "b", binary=str(script)),
    ):
        pass
    assert "exited before answering" in str(caught.value)
    assert "configuration error: bad storage" in str(caught.value)


def test_a_fixed_port_that_is_taken_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with (
            pytest.raises(RegistryStartError) as caught,
            running_registry(tmp_path, port=port),
        ):
            pass
    assert "exited before answering (1 tries)" in str(caught.value)
    assert "address already in use" in str(caught.value)  # the registry's own words
