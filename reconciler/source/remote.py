"""Where a repository lives and how to reach it: URL parsing, credentials, the cache dir.

``RemoteAccess`` is built once per repository by the catalog source, the status
ledger and ``channel set``. It turns a user's ``--repo`` (a path, ``file://``,
``https://``, ``ssh://`` or scp-like ``git@host:x``) into the URL Git is given and
the environment Git runs with. Credentials never travel in a command line or a
cached clone's config: an HTTP(S) password or token becomes an ``Authorization``
header passed through ``GIT_CONFIG_*`` variables, an SSH key becomes
``GIT_SSH_COMMAND`` with strict host-key checking against a known_hosts file.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from reconciler.model.errors import UsageError
from reconciler.source.redact import redact_url, split_credentials

ENV_CACHE_DIR = "RECONCILER_CACHE_DIR"
ENV_USERNAME = "RECONCILER_GIT_USERNAME"
ENV_TOKEN = "RECONCILER_GIT_TOKEN"
ENV_TOKEN_FILE = "RECONCILER_GIT_TOKEN_FILE"
ENV_SSH_KEY = "RECONCILER_SSH_KEY_FILE"
ENV_KNOWN_HOSTS = "RECONCILER_SSH_KNOWN_HOSTS"

_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?[^/:]+:(?!//)")


def cache_root() -> Path:
    """``$RECONCILER_CACHE_DIR``, else ``$XDG_CACHE_HOME/reconciler``, else ``~/.cache/...``."""
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "reconciler"


@dataclass(frozen=True)
class NetworkPolicy:
    """Bounds for every operation that talks to a remote.

    Each attempt is killed after ``timeout`` seconds; a transient failure
    (connection refused, reset, timed out) is retried ``attempts - 1`` times after
    ``backoff``, doubling up to ``max_backoff``. Authentication failures and
    missing repositories or branches fail at once: retrying cannot fix them.
    """

    timeout: float = 60.0
    attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return float(min(self.max_backoff, self.backoff * (2 ** (attempt - 1))))


@dataclass(frozen=True)
class Credentials:
    """HTTPS token and SSH key settings; ``repr`` never shows the token."""

    https_username: str | None = None
    https_token: str | None = field(default=None, repr=False)
    ssh_key_file: str | None = None
    ssh_known_hosts_file: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials:
        """Read ``RECONCILER_GIT_TOKEN[_FILE]``, ``..._USERNAME``, ``RECONCILER_SSH_*``."""
        env = os.environ if environ is None else environ
        token = env.get(ENV_TOKEN) or None
        token_file = env.get(ENV_TOKEN_FILE)
        if token is None and token_file:
            try:
                token = Path(token_file).read_text(encoding="utf-8").strip() or None
            except OSError as e:
                raise UsageError(
                    f"{ENV_TOKEN_FILE}={token_file}: cannot read ({e.strerror})"
                ) from e
        return cls(
            https_username=env.get(ENV_USERNAME) or None,
            https_token=token,
            ssh_key_file=env.get(ENV_SSH_KEY) or None,
            ssh_known_hosts_file=env.get(ENV_KNOWN_HOSTS) or None,
        )


@dataclass(frozen=True)
class RemoteAccess:
    """A repository location plus everything needed to reach it safely.

    ``url`` is what Git is given (no password in it), ``display`` is what people
    see (redacted), ``local_path`` is set for a plain path (not for ``file://``).
    """

    url: str
    display: str
    local_path: Path | None = None
    credentials: Credentials = field(default_factory=Credentials)
    policy: NetworkPolicy = field(default_factory=NetworkPolicy)
    _auth_user: str | None = field(default=None, repr=False)
    _auth_secret: str | None = field(default=None, repr=False)

    @classmethod
    def parse(
        cls,
        spec: str,
        credentials: Credentials | None = None,
        policy: NetworkPolicy | None = None,
    ) -> RemoteAccess:
        """Classify ``spec`` like Git does: an existing path, a URL, or scp-like SSH."""
        creds = Credentials.from_env() if credentials is None else credentials
        pol = policy or NetworkPolicy()
        if not spec.strip():
            raise UsageError("--repo: empty repository location")
        if "://" not in spec and (os.path.exists(spec) or not _SCP_LIKE.match(spec)):
            path = Path(spec).expanduser().resolve()
            return cls(path.as_uri(), str(path), path, creds, pol)
        if spec.lower().startswith("file://"):
            # a URL is a remote even on this machine: written by push, like any other
            uri = Path(urlsplit(spec).path).as_uri()
            return cls(uri, uri, None, creds, pol)
        clean, user, secret = split_credentials(spec)
        return cls(clean, redact_url(spec), None, creds, pol, user, secret)

    @property
    def is_http(self) -> bool:
        return self.url.lower().startswith(("http://", "https://"))

    @property
    def cache_key(self) -> str:
        """A stable directory name for this remote: readable stem plus a hash."""
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", self.url.rstrip("/").rsplit("/", 1)[-1])
        stem = stem.removesuffix(".git")[:40] or "repo"
        digest = hashlib.sha256(self.url.encode("utf-8")).hexdigest()[:12]
        return f"{stem}-{digest}"

    def secrets(self) -> tuple[str, ...]:
        """Every secret value that must never appear in output."""
        values = [self._auth_secret, self.credentials.https_token]
        values += [self._basic_auth()] if self._basic_auth() else []
        return tuple(v for v in values if v)

    def env(self) -> dict[str, str]:
        """Environment for a Git process talking to this remote: no prompts, bounded, authed."""
        env = {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            # abort an HTTP transfer that stalls below 1 byte/s for the whole timeout
            "GIT_HTTP_LOW_SPEED_LIMIT": "1",
            "GIT_HTTP_LOW_SPEED_TIME": str(max(1, int(self.policy.timeout))),
            "GIT_SSH_COMMAND": self._ssh_command(),
        }
        header = self._basic_auth()
        if header and self.is_http:
            parts = urlsplit(self.url)
            env["GIT_CONFIG_COUNT"] = "1"
            env["GIT_CONFIG_KEY_0"] = f"http.{parts.scheme}://{parts.netloc}/.extraHeader"
            env["GIT_CONFIG_VALUE_0"] = f"Authorization: Basic {header}"
        return env

    def _basic_auth(self) -> str | None:
        secret = self._auth_secret or self.credentials.https_token
        if not secret:
            return None
        user = self._auth_user or self.credentials.https_username or "x-access-token"
        return base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")

    def _ssh_command(self) -> str:
        timeout = max(1, int(self.policy.timeout))
        parts = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}"]
        creds = self.credentials
        if creds.ssh_key_file:
            parts += ["-i", _quote(creds.ssh_key_file), "-o", "IdentitiesOnly=yes"]
        if creds.ssh_known_hosts_file:
            parts += ["-o", f"UserKnownHostsFile={_quote(creds.ssh_known_hosts_file)}"]
            parts += ["-o", "StrictHostKeyChecking=yes"]
        return " ".join(parts)


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"
