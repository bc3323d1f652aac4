"""Watch lists, the bookmark before a watch's timeout, and watches of Tables.

- https://kubernetes.io/docs/reference/using-api/api-concepts/#streaming-lists:
  ``sendInitialEvents=true`` with ``resourceVersionMatch=NotOlderThan`` streams the
  current state as ADDED events, then a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``; the parameters it needs are validated as
  ``ListOptions`` (422).
- https://kubernetes.io/docs/reference/using-api/api-concepts/#watch-bookmarks: with
  bookmarks allowed, the watch cache sends one 2 s before ``timeoutSeconds`` ends the
  watch, so the client resumes from the newest version.
- https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables:
  ``kubectl get -w`` watches with ``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``
  and gets each object as a Table row.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from tests.sandbox.helpers import http

CMS = "/api/v1/namespaces/default/configmaps"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
WATCH_LIST = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"


def stream(
    sandbox: SandboxHandle,
    query: str,
    accept: str = "",
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """The watch's events to its end, or (``until``) up to the first one ``until``
    accepts: the stream's own timeout is then only the bound, not a wait."""
    request = urllib.request.Request(f"{sandbox.url}{CMS}?{query}")
    if accept:
        request.add_header("Accept", accept)
    events: list[dict[str, Any]] = []
    with urllib.request.urlopen(request, timeout=30) as response:
        for line in response:
            if line.strip():
                events.append(json.loads(line))
                if until is not None and until(events[-1]):
                    break
    return events


def names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


def test_a_watch_list_sends_the_state_then_the_initial_events_end_bookmark(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    events = stream(sandbox, f"{WATCH_LIST}&allowWatchBookmarks=true&timeoutSeconds=0.5")
    added = [e for e in events if e["type"] == "ADDED"]
    assert "a" in [e["object"]["metadata"]["name"] for e in added]
    assert all(e["type"] == "ADDED" for e in events[: len(added)])  # the state, not history
    end = events[len(added)]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    newest = max(int(e["object"]["metadata"]["resourceVersion"]) for e in added)
    assert int(end["object"]["metadata"]["resourceVersion"]) >= newest


def test_a_watch_list_from_a_resource_version_still_sends_the_whole_state(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """NotOlderThan: a state at least as new as the version given, not the events after it."""
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    rv = created.metadata.resource_version
    query = f"{WATCH_LIST}&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=0.5"
    assert ("ADDED", "a") in names(stream(sandbox, query))


def test_without_initial_events_the_watch_starts_now(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    query = (
        "watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=0.5"
    )
    assert [e for e in stream(sandbox, query) if e["type"] == "ADDED"] == []


@pytest.mark.parametrize(
    ("query", "field", "why"),
    [
        (
            "sendInitialEvents=true&allowWatchBookmarks=true",
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks",
            "sendInitialEvents requires setting allowWatchBookmarks to true",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
    ],
)
def test_a_watch_list_without_what_it_needs_is_invalid(
    sandbox: SandboxHandle, query: str, field: str, why: str
) -> None:
    status, body = http(sandbox, "GET", f"{CMS}?watch=true&{query}")
    assert status == 422, body
    assert body["reason"] == "Invalid"
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {field}: Forbidden: {why}'
    assert body["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": f"Forbidden: {why}", "field": field}
    ]


def test_a_bookmark_comes_two_seconds_before_the_timeout(core: client.CoreV1Api) -> None:
    """The periodic bookmark is a minute away; the one before the 2.5 s timeout comes."""
    with running_sandbox(bookmark_interval=60.0) as sandbox:
        started = time.monotonic()
        events = stream(
            sandbox, "watch=true&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=2.5"
        )
        assert time.monotonic() - started < 60  # the stream ended at its timeout
        bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
        assert len(bookmarks) == 1
        assert bookmarks[0]["object"]["metadata"]["resourceVersion"]


def test_a_watch_shorter_than_two_seconds_gets_no_bookmark() -> None:
    with running_sandbox(bookmark_interval=0.05) as sandbox:
        query = "watch=true&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=1"
        assert [e for e in stream(sandbox, query) if e["type"] == "BOOKMARK"] == []


def test_a_table_watch_sends_one_row_tables_with_headers_only_first(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    events = stream(sandbox, "watch=true&timeoutSeconds=0.5", accept=TABLE)
    assert len(events) >= 2
    first, second = events[0]["object"], events[1]["object"]
    assert first["kind"] == "Table" and first["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in first["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert second["columnDefinitions"] is None
    rows = {e["object"]["rows"][0]["cells"][0]: e["object"]["rows"][0] for e in events}
    assert rows["a"]["cells"][1] == 1
    assert rows["a"]["object"]["kind"] == "PartialObjectMetadata"
    for event in events:
        assert len(event["object"]["rows"]) == 1
        row_rv = event["object"]["rows"][0]["object"]["metadata"]["resourceVersion"]
        assert event["object"]["metadata"]["resourceVersion"] == row_rv


def test_a_table_watch_sends_live_changes_and_bookmarks_as_tables(
    core: client.CoreV1Api,
) -> None:
    with running_sandbox(bookmark_interval=0.2) as sandbox:
        rv = http(sandbox, "GET", CMS)[1]["metadata"]["resourceVersion"]
        http(sandbox, "POST", CMS, {"metadata": {"name": "late"}})
        # read up to the first bookmark (about 0.2 s in), not to the stream's end
        query = f"watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=25"
        events = stream(sandbox, query, accept=TABLE, until=lambda e: e["type"] == "BOOKMARK")
        assert events[0]["type"] == "ADDED"
        assert events[0]["object"]["rows"][0]["cells"][0] == "late"
        bookmark = next(e["object"] for e in events if e["type"] == "BOOKMARK")
        assert bookmark["kind"] == "Table" and bookmark["rows"] == []
        assert int(bookmark["metadata"]["resourceVersion"]) > int(rv)


def test_a_watch_from_an_expired_version_answers_a_status_even_for_tables(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    sandbox.compact_history()
    (event,) = stream(sandbox, "watch=true&resourceVersion=1", accept=TABLE)
    assert event["type"] == "ERROR"
    assert event["object"]["kind"] == "Status" and event["object"]["code"] == 410


def test_a_table_watch_of_an_unknown_table_version_is_not_acceptable(
    sandbox: SandboxHandle,
) -> None:
    with pytest.raises(urllib.error.HTTPError) as e:
        stream(sandbox, "watch=true", accept="application/json;as=Table;g=meta.k8s.io;v=v9")
    assert e.value.code == 406
