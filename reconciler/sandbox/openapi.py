"""The OpenAPI v3 documents kubectl reads before it writes, reduced to what it reads.

https://kubernetes.io/docs/concepts/overview/kubernetes-api/#openapi-v3 describes
them: ``/openapi/v3`` lists every group/version with a ``serverRelativeURL``, and
``/openapi/v3/apis/<group>/<version>`` (``/openapi/v3/api/v1`` for the core group)
is that group/version's document. ``kubectl apply`` and ``create`` download them to
decide whether the server validates fields itself: a PATCH operation tagged with the
kind's ``x-kubernetes-group-version-kind`` that declares the ``fieldValidation``
query parameter means it does, and kubectl then sends ``fieldValidation=Strict``
instead of validating against schemas on its side
(https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).
Without these documents kubectl refuses to apply unless given ``--validate=false``.

Only paths, operations and parameters are served: no component schemas. kubectl
then computes a client-side apply's strategic merge patch from its compiled-in
types, as it does for any operation whose document names no patch strategy.
``server.py`` serves them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconciler.sandbox.discovery import SERVER_VERSION
from reconciler.sandbox.kinds import Kind, KindRegistry

PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
# the query parameters the sandbox honours on writes (api-concepts: dry run, field
# management, field validation)
_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")


def _patch_types(kind: Kind) -> tuple[str, ...]:
    # custom resources have no strategic merge patch (patch.CUSTOM_RESOURCE_PATCHES)
    return tuple(t for t in PATCH_TYPES if not kind.crd or "strategic" not in t)


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _document(kinds: list[Kind], group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for kind in sorted(kinds, key=lambda k: k.plural):
        if "patch" not in kind.verbs:
            continue  # an access review is only created
        gvk = {"group": group, "version": version, "kind": kind.kind}
        scope = "namespaces/{namespace}/" if kind.namespaced else ""
        parameters = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _PARAMS
        ]
        patch = {
            "operationId": f"patch{kind.kind}",
            "parameters": parameters,
            "requestBody": {
                "content": {t: {"schema": {"type": "object"}} for t in _patch_types(kind)},
                "required": True,
            },
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[f"/{_prefix(group, version)}/{scope}{kind.plural}/{{name}}"] = {"patch": patch}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }


def group_version_document(registry: KindRegistry, path: str) -> dict[str, Any] | None:
    """The document of ``api/v1`` or ``apis/<group>/<version>``; None if not served."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"] and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    kinds = registry.in_version(group, version)
    return _document(list(kinds), group, version) if kinds else None


def index(registry: KindRegistry) -> dict[str, Any]:
    """``/openapi/v3``: each group/version and where its document is, with its hash."""
    paths: dict[str, Any] = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            prefix = _prefix(group, version)
            document = group_version_document(registry, prefix)
            if document is None:
                continue
            digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
            paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest.upper()}"}
    return {"paths": paths}
