"""URL classification, credential handling and redaction."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from reconciler.model.errors import UsageError
from reconciler.source.redact import redact_text, redact_url, split_credentials
from reconciler.source.remote import Credentials, NetworkPolicy, RemoteAccess, cache_root


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:tok3n@host/x.git", "https://user:***@host/x.git"),
        ("https://tok3n@github.com/o/r", "https://***@github.com/o/r"),
        ("ssh://git@host/x.git", "ssh://git@host/x.git"),
        ("ssh://git:pw@host/x.git", "ssh://git:***@host/x.git"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("see http://a:b@h/x and https://c:d@h/y", "see http://a:***@h/x and https://c:***@h/y"),
        ("/plain/path", "/plain/path"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_text_masks_known_secrets() -> None:
    assert redact_text("token abcdef leaked", ["abcdef", "ab"]) == "token *** leaked"


def test_redact_text_leaves_text_without_url_or_secret_as_it_is_and_masks_the_rest() -> None:
    """The status ledger redacts every record of every pass: text with neither a URL nor
    a known secret comes back as it is; a URL alone, a secret alone, or both are still
    masked (the shortcut must not skip either)."""
    text = "web 1.0.0: Ready (3 objects)"
    assert redact_text(text, ["abcdef"]) is text
    assert redact_text("fetch https://u:pw@h/x failed", []) == "fetch https://u:***@h/x failed"
    assert redact_text("token abcdef, no url", ["abcdef"]) == "token ***, no url"
    assert redact_text("https://abcdef@h/x abcdef", ["abcdef"]) == "https://***@h/x ***"


def test_split_credentials_moves_them_out_of_the_url() -> None:
    assert split_credentials("https://u:p%40ss@h/x") == ("https://h/x", "u", "p@ss")
    assert split_credentials("https://tok@h/x") == ("https://h/x", None, "tok")
    assert split_credentials("ssh://git@h/x") == ("ssh://git@h/x", None, None)


def test_parse_classifies_locations(tmp_path: Path) -> None:
    local = RemoteAccess.parse(str(tmp_path), Credentials())
    assert local.local_path == tmp_path and local.url == tmp_path.as_uri()
    file_url = RemoteAccess.parse(tmp_path.as_uri(), Credentials())
    assert file_url.local_path is None and file_url.url == tmp_path.as_uri()
    scp = RemoteAccess.parse("git@github.com:org/catalog.git", Credentials())
    assert scp.local_path is None and scp.url == "git@github.com:org/catalog.git"
    https = RemoteAccess.parse("https://me:tok@example.com/c.git", Credentials())
    assert https.url == "https://example.com/c.git"
    assert https.display == "https://me:***@example.com/c.git"
    assert "tok" in https.secrets()
    with pytest.raises(UsageError):
        RemoteAccess.parse("  ", Credentials())


def test_token_travels_in_environment_not_arguments() -> None:
    creds = Credentials(https_username="bot", https_token="t0ken-value")
    env = RemoteAccess.parse("https://example.com/c.git", creds).env()
    assert env["GIT_CONFIG_KEY_0"] == "http.https://example.com/.extraHeader"
    expected = base64.b64encode(b"bot:t0ken-value").decode()
    assert env["GIT_CONFIG_VALUE_0"] == f"Authorization: Basic {expected}"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert "t0ken-value" not in repr(creds)
    plain = RemoteAccess.parse("https://example.com/c.git", Credentials()).env()
    assert "GIT_CONFIG_COUNT" not in plain


def test_ssh_key_and_known_hosts() -> None:
    creds = Credentials(ssh_key_file="/keys/id ed", ssh_known_hosts_file="/keys/known_hosts")
    policy = NetworkPolicy(timeout=7)
    command = RemoteAccess.parse("ssh://git@h/x", creds, policy).env()["GIT_SSH_COMMAND"]
    assert "-i '/keys/id ed'" in command and "IdentitiesOnly=yes" in command
    assert "UserKnownHostsFile='/keys/known_hosts'" in command
    assert "StrictHostKeyChecking=yes" in command and "ConnectTimeout=7" in command
    assert "BatchMode=yes" in command


def test_credentials_from_environment(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    creds = Credentials.from_env(
        {"RECONCILER_GIT_TOKEN_FILE": str(token_file), "RECONCILER_SSH_KEY_FILE": "/k"}
    )
    assert creds.https_token == "from-file" and creds.ssh_key_file == "/k"
    assert Credentials.from_env({"RECONCILER_GIT_TOKEN": "direct"}).https_token == "direct"
    with pytest.raises(UsageError, match="cannot read"):
        Credentials.from_env({"RECONCILER_GIT_TOKEN_FILE": str(tmp_path / "missing")})


def test_backoff_doubles_up_to_a_cap() -> None:
    policy = NetworkPolicy(backoff=1, max_backoff=5)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 5]


def test_cache_root_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv("RECONCILER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_root() == tmp_path / "x" / "reconciler"
