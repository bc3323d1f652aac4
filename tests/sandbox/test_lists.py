"""List semantics: chunks, continue tokens, resourceVersion and resourceVersionMatch.

https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks
(limit/continue, a paged list is one consistent snapshot, 410 for an expired token,
remainingItemCount) and
https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list
(resourceVersion unset/0/N, resourceVersionMatch Exact/NotOlderThan, 410 Gone).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.kube import KubeClient
from reconciler.kube.client import LIST_RESTARTS
from reconciler.sandbox.listing import decode_continue, encode_continue
from reconciler.sandbox.namespaces import ROOT_CA
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from tests.sandbox.helpers import eventually, http

CMS = "/api/v1/namespaces/default/configmaps"  # holds ROOT_CA too, as every namespace


def make(core: client.CoreV1Api, *names: str, namespace: str = "default", **labels: str) -> None:
    for name in names:
        body = {"metadata": {"name": name, "labels": labels}, "data": {"v": "1"}}
        core.create_namespaced_config_map(namespace, body)


def cms(sandbox: SandboxHandle, query: str) -> tuple[int, Any]:
    return http(sandbox, "GET", f"{CMS}?{query}")


def names(body: Any) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


def test_pages_follow_each_other_with_remaining_item_count(core: client.CoreV1Api) -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks"""
    make(core, "a", "b", "c", "d", "e")
    first = core.list_namespaced_config_map("default", limit=2)
    assert [i.metadata.name for i in first.items] == ["a", "b"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 4
    second = core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    assert [i.metadata.name for i in second.items] == ["c", "d"]
    assert second.metadata.remaining_item_count == 2
    last = core.list_namespaced_config_map("default", limit=2, _continue=second.metadata._continue)
    assert [i.metadata.name for i in last.items] == ["e", ROOT_CA]
    assert last.metadata._continue is None and last.metadata.remaining_item_count is None
    assert first.metadata.resource_version == second.metadata.resource_version


def test_a_paged_list_is_one_snapshot(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """Later pages are served at the first page's resourceVersion: changes made in
    between do not show (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    make(core, "a", "b", "c", "d")
    _, first = cms(sandbox, "limit=2")
    core.delete_namespaced_config_map("c", "default")
    core.patch_namespaced_config_map("d", "default", {"data": {"v": "2"}})
    make(core, "e")
    _, rest = cms(sandbox, f"limit=10&continue={first['metadata']['continue']}")
    assert names(rest) == ["c", "d", ROOT_CA]
    assert rest["items"][1]["data"] == {"v": "1"}
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in rest["metadata"]


def test_an_expired_token_is_410_with_a_token_for_the_rest(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks:
    "If the continue token has expired ... 410 Gone" (the Status carries a token that
    continues, inconsistently, from the latest state)."""
    make(core, "a", "b", "c")
    _, first = cms(sandbox, "limit=1")
    core.delete_namespaced_config_map("c", "default")
    sandbox.compact_history()
    status, gone = cms(sandbox, f"limit=1&continue={first['metadata']['continue']}")
    assert status == 410 and gone["reason"] == "Expired"
    assert gone["message"].startswith("The provided continue parameter is too old")
    _, rest = cms(sandbox, f"continue={gone['metadata']['continue']}")
    assert names(rest) == ["b", ROOT_CA]  # the latest state: c is gone
    assert int(rest["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_selectors_page_without_remaining_item_count(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """remainingItemCount is only set when no selector filters the list
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    make(core, "a", "c", "e", tier="web")
    make(core, "b", "d", tier="db")
    _, first = cms(sandbox, "labelSelector=tier%3Dweb&limit=2")
    assert names(first) == ["a", "c"]
    assert first["metadata"]["continue"] and "remainingItemCount" not in first["metadata"]
    _, rest = cms(
        sandbox, f"labelSelector=tier%3Dweb&limit=2&continue={first['metadata']['continue']}"
    )
    assert names(rest) == ["e"] and "continue" not in rest["metadata"]


def test_items_come_in_storage_key_order(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """Lists are ordered by etcd key, <namespace>/<name>: "a-b/x" sorts before "a/x"
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    for ns in ("a", "a-b"):
        core.create_namespace({"metadata": {"name": ns}})
        make(core, "x", namespace=ns)
    _, listed = http(sandbox, "GET", "/api/v1/configmaps?labelSelector=")
    found = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]]
    assert found.index(("a-b", "x")) < found.index(("a", "x"))


def test_resource_version_zero_is_any_and_whole(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """resourceVersion="0" is served by the watch cache, which ignores limit
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list)."""
    make(core, "a", "b", "c")
    status, listed = cms(sandbox, "resourceVersion=0&limit=1")
    assert status == 200 and names(listed) == ["a", "b", "c", ROOT_CA]
    assert "continue" not in listed["metadata"]


def test_exact_reads_the_past(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """resourceVersionMatch=Exact returns the collection as it was at that version
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list)."""
    make(core, "a", "b")
    _, then = cms(sandbox, "")
    rv = then["metadata"]["resourceVersion"]
    core.delete_namespaced_config_map("a", "default")
    core.patch_namespaced_config_map("b", "default", {"data": {"v": "2"}})
    make(core, "c")
    _, past = cms(sandbox, f"resourceVersion={rv}&resourceVersionMatch=Exact")
    assert names(past) == ["a", "b", ROOT_CA] and past["items"][1]["data"] == {"v": "1"}
    assert past["metadata"]["resourceVersion"] == rv
    # the legacy form: a resourceVersion with a limit is Exact too
    _, legacy = cms(sandbox, f"resourceVersion={rv}&limit=1")
    assert names(legacy) == ["a"] and legacy["metadata"]["resourceVersion"] == rv
    # without a limit it is NotOlderThan: the latest state
    _, latest = cms(sandbox, f"resourceVersion={rv}")
    assert names(latest) == ["b", "c", ROOT_CA]
    _, newer = cms(sandbox, f"resourceVersion={rv}&resourceVersionMatch=NotOlderThan")
    assert names(newer) == ["b", "c", ROOT_CA]


def test_exact_is_410_once_compacted(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """ "If the requested resourceVersion is ... no longer available, the server responds
    410 Gone" (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list)."""
    make(core, "a")
    _, then = cms(sandbox, "")
    make(core, "b")
    sandbox.compact_history()
    rv = then["metadata"]["resourceVersion"]
    status, body = cms(sandbox, f"resourceVersion={rv}&resourceVersionMatch=Exact")
    assert (status, body["reason"], body["code"]) == (410, "Expired", 410)
    assert body["message"] == "The resourceVersion for the provided list is too old."
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map("default", resource_version=rv, limit=5)
    assert e.value.status == 410


def test_a_future_resource_version_times_out(sandbox: SandboxHandle) -> None:
    """A resourceVersion newer than the server's is a 504 Timeout that asks to retry
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list)."""
    status, body = cms(sandbox, "resourceVersion=999999")
    assert (status, body["reason"]) == (504, "Timeout")
    assert body["message"].startswith("Timeout: Too large resource version: 999999, current: ")
    assert body["details"]["retryAfterSeconds"] == 1
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    status, body = cms(sandbox, "resourceVersion=999999&resourceVersionMatch=Exact")
    assert status == 504 and "retryAfterSeconds" not in body["details"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "resourceVersionMatch=Exact",
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            "resourceVersion=5&resourceVersionMatch=Newest",
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: '
            '"Newest": supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            "resourceVersionMatch=NotOlderThan&continue=x",
            'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden unless resourceVersion is provided, "
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when "
            "continue is provided]",
        ),
    ],
)
def test_forbidden_option_mixes_are_invalid(
    sandbox: SandboxHandle, query: str, message: str
) -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list
    (which resourceVersion/resourceVersionMatch combinations are "Invalid")."""
    status, body = cms(sandbox, query)
    assert (status, body["reason"], body["message"]) == (422, "Invalid", message)
    assert body["details"]["kind"] == "ListOptions" and body["details"]["group"] == "meta.k8s.io"
    assert all(c["field"] == "resourceVersionMatch" for c in body["details"]["causes"])


def _token(data: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=ten", 'strconv.ParseInt: parsing "ten": invalid syntax'),
        ("resourceVersion=x1", 'invalid resource version: resourceVersion: Invalid value: "x1"'),
        ("continue=%%%%", "invalid continue token: continue key is not valid"),
        (f"continue={_token([1])}", "invalid continue token: continue key is not valid"),
        (
            f"continue={_token({'v': 'meta.k8s.io/v2', 'rv': 3, 'start': 'a'})}",
            "invalid continue token: continue key is not valid: server does not "
            "recognize this encoded version meta.k8s.io/v2",
        ),
        (
            f"continue={_token({'v': 'meta.k8s.io/v1', 'rv': 0, 'start': 'a'})}",
            "invalid continue token: continue key is not valid: incorrect encoded start "
            "resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            f"continue={_token({'v': 'meta.k8s.io/v1', 'rv': 3, 'start': ''})}",
            "invalid continue token: continue key is not valid: encoded start key empty",
        ),
        (
            f"continue={_token({'v': 'meta.k8s.io/v1', 'rv': 3, 'start': '../x'})}",
            "invalid continue token: continue key is not valid: ../x",
        ),
        (
            f"resourceVersion=7&continue={encode_continue('a', 3)}",
            "specifying resource version is not allowed when using continue",
        ),
    ],
)
def test_bad_list_parameters_are_bad_requests(
    sandbox: SandboxHandle, query: str, message: str
) -> None:
    """Parameters the server cannot decode are 400 BadRequest
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    status, body = cms(sandbox, query)
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"].startswith(message)


def test_tokens_round_trip() -> None:
    """The token is the API server's: base64url of {"v","rv","start"} without padding."""
    token = encode_continue("default/b\x00", 42)
    assert "=" not in token
    assert json.loads(base64.urlsafe_b64decode(token + "==")) == {
        "v": "meta.k8s.io/v1",
        "rv": 42,
        "start": "default/b\x00",
    }
    assert decode_continue(token) == ("default/b\x00", 42)


def test_engine_lists_in_pages(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """The engine's KubeClient.list follows continue tokens
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    make(core, "a", "b", "c", "d", "e")
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        kube.page_size = 2
        sandbox.reset_request_log()
        found = kube.list("v1", "ConfigMap", namespace="default")
    assert [o["metadata"]["name"] for o in found] == ["a", "b", "c", "d", "e", ROOT_CA]
    assert all(o["kind"] == "ConfigMap" for o in found)
    queries = [e.query for e in sandbox.request_log() if e.verb == "list"]
    assert len(queries) == 3 and all("limit=2" in q for q in queries)


def test_engine_starts_over_from_the_first_page_when_its_token_expires(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """A 410 on a continue token makes the engine list again from the first page, a new
    consistent snapshot (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks):
    what it kept of the expired snapshot is dropped (``restart``), so an object deleted
    meanwhile is not in the result, and no answer holds the whole list at once."""
    make(core, "a", "b", "c")
    compacted = []

    class CompactingOnce(KubeClient):
        """Deletes c and forgets the server's history before the first continued page."""

        def request(self, method: str, path: str, **kw: Any) -> Any:
            if not compacted and any(key == "continue" for key, _ in kw.get("query", ())):
                core.delete_namespaced_config_map("c", "default")
                sandbox.compact_history()
                compacted.append(True)
            return super().request(method, path, **kw)

    kept: dict[str, dict[str, Any]] = {}

    def keep(item: dict[str, Any]) -> dict[str, Any]:
        kept[item["metadata"]["name"]] = item
        return item

    with KubeClient.connect(sandbox.kubeconfig) as plain:
        kube = CompactingOnce(plain._api)
        kube.page_size = 2
        sandbox.reset_request_log()
        found, _ = kube.list_snapshot(
            "v1", "ConfigMap", namespace="default", keep=keep, restart=kept.clear
        )
    assert [o["metadata"]["name"] for o in found] == ["a", "b", ROOT_CA]
    assert sorted(kept) == ["a", "b", ROOT_CA]  # c was kept from the first page, then dropped
    pages = [(e.status, "limit=2" in e.query) for e in sandbox.request_log() if e.verb == "list"]
    assert pages == [(200, True), (410, True), (200, True), (200, True)]


def test_engine_reads_the_whole_list_at_once_when_pages_keep_expiring(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """When the list keeps changing faster than its pages are read, the engine ends
    with one list without pages, as client-go's pager does (after ``LIST_RESTARTS``
    fresh starts)."""
    make(core, "a", "b", "c")

    changes = []

    class Compacting(KubeClient):
        """Changes the list and forgets the server's history before every continued page."""

        def request(self, method: str, path: str, **kw: Any) -> Any:
            if any(key == "continue" for key, _ in kw.get("query", ())):
                changes.append(f"changed {len(changes) + 1}")
                core.patch_namespaced_config_map("a", "default", {"data": {"v": changes[-1]}})
                sandbox.compact_history()
            return super().request(method, path, **kw)

    with KubeClient.connect(sandbox.kubeconfig) as plain:
        kube = Compacting(plain._api)
        kube.page_size = 2
        sandbox.reset_request_log()
        found = kube.list("v1", "ConfigMap", namespace="default")
    assert [o["metadata"]["name"] for o in found] == ["a", "b", "c", ROOT_CA]
    assert found[0]["data"] == {"v": changes[-1]}  # the whole list, at the latest state
    pages = [(e.status, "limit" in e.query) for e in sandbox.request_log() if e.verb == "list"]
    assert pages == [(200, True), (410, True)] * (LIST_RESTARTS + 1) + [(200, False)]


def settled(sandbox: SandboxHandle) -> None:
    """Wait until the cluster's own pods (kube-system) stopped changing: Running, Ready."""

    def running() -> bool:
        _, pods = http(sandbox, "GET", "/api/v1/namespaces/kube-system/pods")
        conditions = [
            {c["type"]: c["status"] for c in p["status"].get("conditions") or []}
            for p in pods["items"]
        ]
        return bool(conditions) and all(c.get("Ready") == "True" for c in conditions)

    eventually(running)


def test_a_bounded_history_expires_old_tokens() -> None:
    """With the store's bounded history (store.DEFAULT_HISTORY_LIMIT, here 3 events) a token
    outlives its snapshot after enough writes, as etcd compaction expires it on a cluster
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)."""
    with running_sandbox(history_limit=3) as small:
        settled(small)  # only this test's writes may move the three-event window
        for name in ("a", "b"):
            http(small, "POST", CMS, {"metadata": {"name": name}})
        _, first = cms(small, "limit=1")
        token = first["metadata"]["continue"]
        http(small, "POST", CMS, {"metadata": {"name": "c"}})
        assert names(cms(small, f"limit=1&continue={token}")[1]) == ["b"]  # still in history
        for name in ("d", "e", "f"):
            http(small, "POST", CMS, {"metadata": {"name": name}})
        status, body = cms(small, f"limit=1&continue={token}")
        assert (status, body["reason"]) == (410, "Expired")
