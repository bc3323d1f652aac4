"""List requests as a real API server answers them: chunks, continue tokens, resourceVersion.

https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks
and #semantics-for-get-and-list describe the contract; the details follow kube-apiserver
v1.30 (the version the sandbox reports), whose lists the watch cache or etcd serve:

- items come in storage-key order (``<namespace>/<name>``, or ``<name>`` within one
  namespace or for a cluster-scoped kind);
- ``limit`` cuts a page; ``metadata.continue`` is then an opaque token (base64 of
  ``{"v":"meta.k8s.io/v1","rv":N,"start":"<next key>"}``) and every following page is
  read at the first page's resourceVersion N, so a paged list is one consistent
  snapshot. ``metadata.remainingItemCount`` is only set when no selector filters;
- a token whose resourceVersion was compacted away is ``410 Expired``; that Status
  carries a new token that continues from the latest state (an inconsistent list);
- ``resourceVersion`` unset is the latest state; ``0`` is "any" (served as the watch
  cache would: whole, ``limit`` ignored); ``N`` is "not older than N" (a future N is
  ``504 Timeout``), except with ``limit`` (legacy) or ``resourceVersionMatch=Exact``,
  which read the state at exactly N, ``410 Expired`` once compacted;
- option combinations the API forbids are ``422`` on ``ListOptions.meta.k8s.io``.

Past states come from :meth:`Store.snapshot` (the current objects with the recorded
history rolled back), so how far back a token or an Exact list reaches is bounded by
the store's history limit, like etcd compaction bounds a real cluster's.
``server.py`` calls :func:`list_collection` for every list that is not a watch.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.sandbox.api import SandboxApi, present
from reconciler.sandbox.apierrors import ApiError, field_errors
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.selectors import Matcher

TOKEN_VERSION = "meta.k8s.io/v1"
EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
_INVALID_KEY = "continue key is not valid"
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may "
    "show up in the list."
)


@dataclass(frozen=True)
class ListOptions:
    """The list query parameters that decide which state is read and how much of it."""

    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""


def parse_list_options(query: Mapping[str, str]) -> ListOptions:
    """Read and validate the options; 400 for unparsable values, 422 for forbidden mixes."""
    raw_limit = query.get("limit", "")
    try:
        limit = int(raw_limit) if raw_limit else 0
    except ValueError as e:
        raise ApiError(400, f'strconv.ParseInt: parsing "{raw_limit}": invalid syntax') from e
    opts = ListOptions(
        limit=limit,
        continue_token=query.get("continue", ""),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
    )
    errors: list[tuple[str, str, str]] = []
    match = opts.resource_version_match
    if match:
        forbidden = "FieldValueForbidden"
        if not opts.resource_version:
            why = "resourceVersionMatch is forbidden unless resourceVersion is provided"
            errors.append((forbidden, "resourceVersionMatch", f"Forbidden: {why}"))
        if opts.continue_token:
            why = "resourceVersionMatch is forbidden when continue is provided"
            errors.append((forbidden, "resourceVersionMatch", f"Forbidden: {why}"))
        if match not in (EXACT, NOT_OLDER_THAN):
            body = (
                f'Unsupported value: "{match}": supported values: "{EXACT}", "{NOT_OLDER_THAN}", ""'
            )
            errors.append(("FieldValueNotSupported", "resourceVersionMatch", body))
        if match == EXACT and opts.resource_version == "0":
            why = 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
            errors.append((forbidden, "resourceVersionMatch", f"Forbidden: {why}"))
    if errors:
        raise field_errors(("meta.k8s.io", "ListOptions"), "", errors)
    return opts


def encode_continue(start: str, rv: int) -> str:
    """The token for a page that starts at storage key ``start`` read at ``rv``."""
    token = {"v": TOKEN_VERSION, "rv": rv, "start": start}
    raw = json.dumps(token, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_continue(token: str) -> tuple[str, int]:
    """(start key, resourceVersion) of a token; 400 for anything this server did not issue."""

    def bad(why: str) -> ApiError:
        return ApiError(400, f"invalid continue token: {why}")

    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError) as e:
        raise bad(f"{_INVALID_KEY}: {e}") from e
    if not isinstance(data, dict):
        raise bad(_INVALID_KEY)
    version, rv, start = data.get("v"), data.get("rv", 0), data.get("start", "")
    if not isinstance(rv, int) or isinstance(rv, bool) or not isinstance(start, str):
        raise bad(_INVALID_KEY)
    if version != TOKEN_VERSION:
        raise bad(f"{_INVALID_KEY}: server does not recognize this encoded version {version}")
    if rv == 0:
        raise bad(f"{_INVALID_KEY}: incorrect encoded start resourceVersion (version {version})")
    if not start:
        raise bad(f"{_INVALID_KEY}: encoded start key empty (version {version})")
    key = start if start.startswith("/") else "/" + start
    if key.startswith("//") or posixpath.normpath(key) != key:  # Go's path.Clean check
        raise bad(f"{_INVALID_KEY}: {start}")
    return key[1:], rv


def _key(kind: Kind, namespace: str | None, obj: Mapping[str, Any]) -> str:
    """The object's storage key relative to the list's key prefix."""
    meta = obj["metadata"]
    if kind.namespaced and namespace is None:
        return f"{meta.get('namespace', '')}/{meta['name']}"
    return str(meta["name"])


def _too_large(rv: int, current: int, retry_after: int) -> ApiError:
    return ApiError(
        504,
        f"Timeout: Too large resource version: {rv}, current: {current}",
        reason="Timeout",
        causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        retry_after=retry_after,
    )


def _parse_rv(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit():
        why = f'strconv.ParseUint: parsing "{raw}": invalid syntax'
        raise ApiError(
            400, f'invalid resource version: resourceVersion: Invalid value: "{raw}": {why}'
        )
    return int(raw)


@dataclass(frozen=True)
class _Read:
    """Which state a list reads and from which key on (the store's own objects: copy to keep)."""

    objects: list[dict[str, Any]]
    rv: int
    start: str = ""
    paged: bool = True  # False: served whole, as the watch cache serves resourceVersion=0


def _read(api: SandboxApi, kind: Kind, namespace: str | None, opts: ListOptions) -> _Read:
    store = api.store
    current = store.resource_version
    if opts.continue_token:
        start, token_rv = decode_continue(opts.continue_token)
        if opts.resource_version not in ("", "0"):
            raise ApiError(400, "specifying resource version is not allowed when using continue")
        if token_rv < 0:  # issued with a 410: continue from the latest state
            return _Read(store.view(kind.resource, namespace), current, start)
        try:
            return _Read(
                store.snapshot(kind.resource, namespace, token_rv, copied=False), token_rv, start
            )
        except ApiError as e:
            if e.code != 410:
                raise
            raise ApiError(410, _CONTINUE_EXPIRED, list_continue=encode_continue(start, -1)) from e
    if not opts.resource_version:
        return _Read(store.view(kind.resource, namespace), current)
    if opts.resource_version == "0":
        return _Read(store.view(kind.resource, namespace), current, paged=opts.limit <= 0)
    rv = _parse_rv(opts.resource_version)
    match = opts.resource_version_match
    if match == EXACT or (not match and opts.limit > 0):
        return _Read(store.snapshot(kind.resource, namespace, rv, copied=False), rv)
    if rv > current:
        # without a limit the watch cache serves it and asks to retry in a second
        raise _too_large(rv, current, 0 if opts.limit > 0 else 1)
    return _Read(store.view(kind.resource, namespace), current)


def list_collection(
    api: SandboxApi,
    kind: Kind,
    namespace: str | None,
    labels: Matcher,
    fields: Matcher,
    query: Mapping[str, str],
    *,
    selective: bool,
) -> dict[str, Any]:
    """The ``<Kind>List`` for a list request; ``selective`` says a selector was given."""
    opts = parse_list_options(query)
    scope = namespace if kind.namespaced else None
    read = _read(api, kind, scope, opts)
    keyed = sorted(((_key(kind, scope, obj), obj) for obj in read.objects), key=lambda p: p[0])
    remaining = [(key, obj) for key, obj in keyed if key >= read.start]
    limit = opts.limit if read.paged else 0
    items: list[dict[str, Any]] = []
    last_key = ""
    more = False
    for key, obj in remaining:
        if limit > 0 and len(items) >= limit:
            more = True
            break
        last_key = key
        if labels(obj) and fields(obj):
            # the store's own object, shared: stored objects are replaced on every
            # write, never changed in place, and the list is serialized as it is
            items.append(present(kind, obj))
    meta: dict[str, Any] = {"resourceVersion": str(read.rv)}
    if more:
        meta["continue"] = encode_continue(last_key + "\x00", read.rv)
        if not selective:
            meta["remainingItemCount"] = len(remaining) - limit
    return {
        "apiVersion": kind.api_version,
        "kind": f"{kind.kind}List",
        "metadata": meta,
        "items": items,
    }
