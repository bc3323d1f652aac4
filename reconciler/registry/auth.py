"""Registry credentials and the ``WWW-Authenticate`` challenges that ask for them.

Where credentials come from, first match wins:

1. ``RECONCILER_REGISTRY_USERNAME`` / ``RECONCILER_REGISTRY_PASSWORD``. With
   ``RECONCILER_REGISTRY_HOST`` (a comma-separated list of ``host[:port]``) they
   are sent to those registries only; without it, to every registry that asks.
   Set the host in any setup that pulls from more than one registry, so a
   password is never offered to a registry it does not belong to.
2. A docker ``config.json`` (``$DOCKER_CONFIG/config.json``, else
   ``~/.docker/config.json``): ``auths.<host>.auth`` (base64 ``user:password``),
   ``username``/``password``, or ``identitytoken`` (an OAuth2 refresh token).
   Credential helpers (``credsStore``, ``credHelpers``) are not run.

Nothing here logs or formats a secret: ``Credential.__repr__`` hides them, and
every message names the registry and what failed, never what was sent.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.registry.reference import canonical_host

log = logging.getLogger("reconciler.registry")

USERNAME_ENV = "RECONCILER_REGISTRY_USERNAME"
PASSWORD_ENV = "RECONCILER_REGISTRY_PASSWORD"
HOST_ENV = "RECONCILER_REGISTRY_HOST"


@dataclass(frozen=True)
class Credential:
    """A username and password, or an identity (refresh) token, for one registry."""

    username: str = ""
    password: str = field(default="", repr=False)
    identity_token: str = field(default="", repr=False)
    source: str = ""  # where it came from, for messages: "environment", "config.json"

    def basic(self) -> str:
        """The ``Authorization`` header value for HTTP Basic."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.password, self.identity_token) if s)


@dataclass(frozen=True)
class Credentials:
    """Credentials per registry host (keys are ``canonical_host`` values)."""

    by_host: Mapping[str, Credential] = field(default_factory=dict)
    everywhere: Credential | None = None

    def for_host(self, host: str) -> Credential | None:
        return self.by_host.get(canonical_host(host), self.everywhere)

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, *, config: Path | None = None
    ) -> Credentials:
        """``RECONCILER_REGISTRY_*`` over the docker ``config.json`` (see the module doc)."""
        env = os.environ if environ is None else environ
        path = config if config is not None else docker_config_path(env)
        by_host = dict(read_docker_config(path)) if path is not None else {}
        everywhere = None
        username, password = env.get(USERNAME_ENV, ""), env.get(PASSWORD_ENV, "")
        if username or password:
            cred = Credential(username, password, source="environment")
            hosts = [h for h in env.get(HOST_ENV, "").split(",") if h.strip()]
            if hosts:
                by_host.update({canonical_host(h): cred for h in hosts})
            else:
                everywhere = cred
        return cls(by_host, everywhere)


def docker_config_path(environ: Mapping[str, str]) -> Path | None:
    """``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``, when it exists."""
    base = environ.get("DOCKER_CONFIG")
    path = Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"
    return path if path.is_file() else None


class CredentialsError(ValueError):
    """A docker config.json that cannot be read; the message names the file and key."""


def read_docker_config(path: Path) -> dict[str, Credential]:
    """The ``auths`` of a docker ``config.json`` by canonical host."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CredentialsError(f"{path}: cannot read docker config: {type(e).__name__}") from None
    auths = data.get("auths") if isinstance(data, dict) else None
    if auths is None:
        return {}
    if not isinstance(auths, dict):
        raise CredentialsError(f"{path}: auths must be an object of host: credentials")
    found: dict[str, Credential] = {}
    for host, entry in auths.items():
        if not isinstance(entry, dict):
            raise CredentialsError(f"{path}: auths.{host} must be an object")
        cred = _entry(path, str(host), entry)
        if cred is not None:
            found[canonical_host(str(host))] = cred
    return found


def _entry(path: Path, host: str, entry: Mapping[str, object]) -> Credential | None:
    source = f"{path} auths.{host}"
    token = entry.get("identitytoken")
    username, password = entry.get("username"), entry.get("password")
    encoded = entry.get("auth")
    if isinstance(encoded, str) and encoded:
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise CredentialsError(f"{source}.auth is not base64 of user:password") from None
        if ":" not in decoded:
            raise CredentialsError(f"{source}.auth is not base64 of user:password")
        username, password = decoded.split(":", 1)
    if isinstance(token, str) and token:
        return Credential(str(username or ""), "", token, source=source)
    if isinstance(username, str) and isinstance(password, str) and (username or password):
        return Credential(username, password, source=source)
    return None


@dataclass(frozen=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge: ``Bearer realm=...,service=...,scope=...``."""

    scheme: str
    params: Mapping[str, str]

    @property
    def realm(self) -> str:
        return self.params.get("realm", "")


_PARAM = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')
_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9_.-]*)(?:\s+|$)")


def parse_challenges(header: str) -> list[Challenge]:
    """Every challenge in a ``WWW-Authenticate`` value (RFC 7235 section 4.1).

    Parameters are ``key=value`` or ``key="quoted, value"``; a new scheme starts at
    a token that is not followed by ``=``.
    """
    challenges: list[Challenge] = []
    pos = 0
    text = header.strip()
    while pos < len(text):
        scheme = _SCHEME.match(text, pos)
        if scheme is None:
            break
        pos = scheme.end()
        params: dict[str, str] = {}
        while pos < len(text):
            param = _PARAM.match(text, pos)
            if param is None:
                break
            # a bare token followed by "=" is a parameter; one followed by a space is a scheme
            value = param[2] if param[2] is not None else param[3]
            params[param[1].lower()] = re.sub(r"\\(.)", r"\1", value or "")
            pos = param.end()
        challenges.append(Challenge(scheme[1].lower(), params))
        while pos < len(text) and text[pos] in ", ":
            pos += 1
    return challenges
