"""API discovery: which URL serves a kind, and whether it is namespaced.

Discovery is read lazily, one request per group-version actually used
(``/api/v1``, ``/apis/<group>/<version>``), and cached for the life of a
``KubeClient``. After apply creates CRDs, :meth:`Discovery.expect` marks their
group-versions so a lookup that misses waits for the API server to start
serving the new kind instead of failing at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from reconciler.kube.errors import UnknownKind

Fetch = Callable[[str], dict[str, Any] | None]


def segment(value: str) -> str:
    """One URL path segment, escaped: a name can never add a segment of its own.

    Names come from manifests in Git; ``team-x/../kube-system`` must reach the
    API server as one (invalid) name, never as a path into another namespace.
    """
    return quote(value, safe="")


def group_version_path(api_version: str) -> str:
    """``/api/v1`` or ``/apis/<group>/<version>``, each part escaped."""
    if "/" not in api_version:
        return f"/api/{segment(api_version)}"
    group, _, version = api_version.partition("/")
    return f"/apis/{segment(group)}/{segment(version)}"


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource: ``deployments`` in ``apps/v1``, namespaced."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str = "", name: str = "") -> str:
        """The collection URL (all namespaces when ``namespace`` is ""), or an object's URL."""
        base = group_version_path(self.api_version)
        if self.namespaced and namespace:
            base += f"/namespaces/{segment(namespace)}"
        base += f"/{segment(self.plural)}"
        return f"{base}/{segment(name)}" if name else base


class Discovery:
    """A lazily filled cache of group-version -> kind -> ``ResourceInfo``."""

    def __init__(self, fetch: Fetch, *, settle_seconds: float = 30.0) -> None:
        self._fetch = fetch
        self._cache: dict[str, dict[str, ResourceInfo]] = {}
        self._expected: set[str] = set()
        self._settle_seconds = settle_seconds

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Look a kind up, re-reading discovery while a freshly applied CRD settles."""
        found = self._kinds(api_version).get(kind)
        if found is not None:
            return found
        deadline = time.monotonic() + self._settle_seconds
        delay = 0.05
        while api_version in self._expected and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            self._cache.pop(api_version, None)
            found = self._kinds(api_version).get(kind)
            if found is not None:
                self._expected.discard(api_version)
                return found
        raise UnknownKind(
            f"{kind} ({api_version}): the API server does not serve this kind "
            "(is its CustomResourceDefinition installed?)"
        )

    def expect(self, api_versions: Iterable[str]) -> None:
        """Forget cached answers for these group-versions; a miss will wait for them."""
        for api_version in api_versions:
            self._cache.pop(api_version, None)
            self._expected.add(api_version)

    def refresh(self) -> None:
        self._cache.clear()

    def _kinds(self, api_version: str) -> dict[str, ResourceInfo]:
        # one lookup: another thread may ``expect`` (forget) this entry at any moment
        kinds = self._cache.get(api_version)
        if kinds is None:
            kinds = self._cache[api_version] = self._read(api_version)
        return kinds

    def _read(self, api_version: str) -> dict[str, ResourceInfo]:
        body = self._fetch(group_version_path(api_version)) or {}
        kinds: dict[str, ResourceInfo] = {}
        for res in body.get("resources") or ():
            name = str(res.get("name", ""))
            if not name or "/" in name:  # subresources such as deployments/scale
                continue
            kind = str(res.get("kind", ""))
            kinds.setdefault(
                kind, ResourceInfo(api_version, kind, name, bool(res.get("namespaced")))
            )
        return kinds


def crd_api_versions(crd: Mapping[str, Any]) -> list[str]:
    """The group-versions a CustomResourceDefinition object will serve."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group", ""))
    return [
        f"{group}/{v.get('name')}"
        for v in spec.get("versions") or ()
        if isinstance(v, dict) and v.get("served", True)
    ]
