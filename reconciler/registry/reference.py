"""Image reference -> the registry to ask and the repository name to ask it about.

Docker's normalisation (distribution/reference): a first path component with a
``.`` or ``:``, or ``localhost``, is a registry host; otherwise the image lives on
Docker Hub, whose API answers at ``registry-1.docker.io`` and whose one-component
names are official images under ``library/``. Loopback registries and the hosts
listed in ``RECONCILER_REGISTRY_INSECURE`` are spoken to over plain HTTP (a local
test or mirror registry has no certificate); every other registry over HTTPS.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
INSECURE_ENV = "RECONCILER_REGISTRY_INSECURE"


@dataclass(frozen=True)
class Repository:
    """One repository of one registry, as the Distribution API names it.

    ``host`` is the registry as people write it (``docker.io``, ``127.0.0.1:5000``);
    ``api_host`` is where its API answers; ``name`` is the repository path
    (``library/nginx``).
    """

    host: str
    name: str
    api_host: str
    scheme: str = "https"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.api_host}"

    def __str__(self) -> str:
        return f"{self.host}/{self.name}"


def split_name(name: str) -> tuple[str, str]:
    """``(registry host, repository path)`` of an image name without tag or digest."""
    if name.startswith("["):  # an IPv6 literal, optionally with a port
        end = name.find("]")
        slash = name.find("/", end)
        if end < 0 or slash < 0:
            raise ValueError(f'image "{name}": a registry address needs a repository after it')
        return name[:slash], name[slash + 1 :]
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return DOCKER_HUB, name


def strip_reference(image: str) -> str:
    """The name part of ``name[:tag][@digest]`` (IPv6 hosts and ports kept)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash and not name[colon:].endswith("]"):
        name = name[:colon]
    return name


def insecure_hosts(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Hosts (``host`` or ``host:port``) named in ``RECONCILER_REGISTRY_INSECURE``."""
    env = os.environ if environ is None else environ
    return frozenset(h.strip() for h in env.get(INSECURE_ENV, "").split(",") if h.strip())


def host_without_port(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if ":" in host else host


def repository_of(image: str, insecure: Collection[str] | None = None) -> Repository:
    """Where to ask about ``image`` (``name[:tag][@digest]``)."""
    host, path = split_name(strip_reference(image))
    if not path:
        raise ValueError(f'image "{image}" has no repository name')
    if host in _HUB_ALIASES:
        host = DOCKER_HUB
        if "/" not in path:
            path = f"library/{path}"
    allowed = insecure_hosts() if insecure is None else insecure
    plain = host_without_port(host) in _LOOPBACK or host in allowed
    plain = plain or host_without_port(host) in allowed
    api_host = DOCKER_HUB_API if host == DOCKER_HUB else host
    return Repository(host, path, api_host, "http" if plain else "https")


def canonical_host(host: str) -> str:
    """A registry host as credentials are keyed: no scheme, no path, Docker Hub unified.

    docker ``config.json`` keys Docker Hub as ``https://index.docker.io/v1/`` and
    other registries as ``host[:port]``, sometimes with a scheme or ``/v2/``.
    """
    text = host.strip()
    for prefix in ("https://", "http://"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.split("/", 1)[0].lower()
    return DOCKER_HUB if text in _HUB_ALIASES else text
