"""Watch contract: https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes

Streams start with ADDED for existing objects, resume after a resourceVersion,
end at ``timeoutSeconds``, and answer a compacted resourceVersion with an ERROR
event holding a 410 Expired Status.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from reconciler.sandbox.api import WriteOptions
from reconciler.sandbox.kinds import CONFIGMAPS, KindRegistry
from reconciler.sandbox.namespaces import ROOT_CA
from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.testing import SandboxHandle, running_sandbox
from reconciler.sandbox.watch import SharedLines
from tests.sandbox.helpers import watch_until

CONFIGMAPS_PATH = "/api/v1/namespaces/default/configmaps"


def raw_watch(sandbox: SandboxHandle, query: str) -> list[dict]:
    url = f"{sandbox.url}{CONFIGMAPS_PATH}?watch=true&{query}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return [json.loads(line) for line in response if line.strip()]


def test_watch_without_version_lists_existing_objects(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    events = raw_watch(sandbox, "timeoutSeconds=0.2")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", ROOT_CA),  # every namespace holds the cluster's root CA
    ]
    assert events[0]["object"]["kind"] == "ConfigMap"


def test_watch_resumes_after_resource_version(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    core.delete_namespaced_config_map("a", "default")
    rv = first.metadata.resource_version
    events = raw_watch(sandbox, f"resourceVersion={rv}&timeoutSeconds=0.2")
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]


def test_watch_streams_live_events_with_official_client(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    seen: list[tuple[str, str]] = []

    def writer() -> None:
        core.create_namespaced_config_map("default", {"metadata": {"name": "live"}})
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "skip", "labels": {"x": "n"}}}
        )
        core.delete_namespaced_config_map("live", "default")

    thread = threading.Timer(0.1, writer)
    thread.start()
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=rv,
        label_selector="!x",
        timeout_seconds=5,
    )
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            break
    thread.join()
    assert seen == [("ADDED", "live"), ("DELETED", "live")]


def test_compacted_history_gives_410_gone(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    old = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    sandbox.compact_history()
    events = raw_watch(sandbox, f"resourceVersion={old.metadata.resource_version}")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=old.metadata.resource_version,
            timeout_seconds=1,
        ):
            pass
    assert e.value.status == 410


def test_bounded_history_expires_old_versions() -> None:
    with running_sandbox(history_limit=3) as sandbox:
        api = client.CoreV1Api(_client(sandbox))
        first = api.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        for n in range(5):
            api.patch_namespaced_config_map("a", "default", {"data": {"n": str(n)}})
        events = raw_watch(sandbox, f"resourceVersion={first.metadata.resource_version}")
        assert events[0]["object"]["code"] == 410
        latest = api.read_namespaced_config_map("a", "default").metadata.resource_version
        assert raw_watch(sandbox, f"resourceVersion={latest}&timeoutSeconds=0.1") == []


def _client(sandbox: SandboxHandle) -> client.ApiClient:
    from kubernetes import config

    return config.new_client_from_config(str(sandbox.kubeconfig))


@pytest.mark.parametrize("query", ["resourceVersion=abc", "timeoutSeconds=soon"])
def test_bad_watch_parameters(sandbox: SandboxHandle, query: str) -> None:
    from tests.sandbox.helpers import http

    status, body = http(sandbox, "GET", f"/api/v1/configmaps?watch=true&{query}")
    assert status == 400 and body["kind"] == "Status"


def test_selector_watch_reports_objects_entering_and_leaving_the_selection(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """With a label selector, an object that starts matching is ADDED and one that stops
    matching is DELETED (carrying its last matching state).

    https://kubernetes.io/docs/reference/using-api/api-concepts/#watches-with-selectors
    """
    first = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a", "labels": {"x": "n"}}}
    )
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"x": "y"}}})
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"x": "n"}}})
    last = core.patch_namespaced_config_map("a", "default", {"data": {"k": "w"}})
    rv = first.metadata.resource_version
    events = raw_watch(sandbox, f"resourceVersion={rv}&labelSelector=x%3Dy&timeoutSeconds=0.2")
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    deleted = events[-1]["object"]
    assert deleted["metadata"]["labels"] == {"x": "y"} and deleted["data"] == {"k": "v"}
    assert int(deleted["metadata"]["resourceVersion"]) < int(last.metadata.resource_version)


def test_bookmarks_come_only_when_asked_and_carry_the_version_reached() -> None:
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#watch-bookmarks: with
    ``allowWatchBookmarks=true`` the server sends BOOKMARK events (kind and
    ``metadata.resourceVersion`` only) once it has sent every event up to that version;
    a real server sends one about every minute, this sandbox as often as it is told."""
    with running_sandbox(bookmark_interval=0.05) as sandbox:
        api = client.CoreV1Api(_client(sandbox))
        created = api.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        rv = created.metadata.resource_version
        plain = raw_watch(sandbox, f"resourceVersion={rv}&timeoutSeconds=0.3")
        assert plain == []
        # a watch of 2.3 s: bookmarks come until 2 s before its end, none are left out
        # for a watch shorter than those 2 s (the watch cache's nextBookmarkTime)
        events = raw_watch(
            sandbox, f"resourceVersion={rv}&timeoutSeconds=2.3&allowWatchBookmarks=true"
        )
        assert events and {e["type"] for e in events} == {"BOOKMARK"}
        mark = events[0]["object"]
        assert mark["kind"] == "ConfigMap" and mark["apiVersion"] == "v1"
        # the version the server reached: ours, or later when the cluster's own objects
        # (kube-system pods starting) changed meanwhile
        assert list(mark["metadata"]) == ["resourceVersion"]
        assert int(mark["metadata"]["resourceVersion"]) >= int(rv)


def _burst(sandbox: SandboxHandle, count: int) -> None:
    """``count`` ConfigMaps written in one turn of the server's loop (every second one
    labelled ``x=y``), then ``c00000`` relabelled out of ``x=y``: a watch finds them all
    queued at once, as it finds a burst of controller writes."""

    def write() -> None:
        api = sandbox._running.server.api
        kind = api.kinds.by_resource("", "configmaps")
        assert kind is not None
        opts = WriteOptions("test")
        for i in range(count):
            labels = {"x": "y"} if i % 2 == 0 else {}
            api.create(kind, "default", {"metadata": {"name": f"c{i:05d}", "labels": labels}}, opts)
        old = api.store.view_one(CONFIGMAPS, "default", "c00000")
        assert old is not None
        api.commit(kind, old, {**old, "metadata": {**old["metadata"], "labels": {}}}, opts)

    sandbox.call(write)


def test_a_burst_of_writes_streams_every_event_in_order(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """A burst queued behind one event goes out in as few writes as the stream likes,
    but the client reads the same lines: every event, in resourceVersion order, each
    filtered by the selector (the one leaving it as DELETED)."""
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    count = 600  # more than one write's worth of lines
    got: list[list[dict]] = []
    reader = threading.Thread(
        target=lambda: got.append(
            watch_until(
                sandbox,
                CONFIGMAPS_PATH,
                f"resourceVersion={rv}&labelSelector=x%3Dy&timeoutSeconds=120",
                lambda event: event["type"] == "DELETED",
            )
        )
    )
    reader.start()
    time.sleep(0.5)  # the watch is open (what it misses it reads from history anyway)
    _burst(sandbox, count)
    reader.join()
    events = got[0]
    names = [f"c{i:05d}" for i in range(0, count, 2)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        *[("ADDED", name) for name in names],
        ("DELETED", "c00000"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)


def test_a_watch_from_now_lists_a_large_namespace_whole(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """Without a resourceVersion, every stored object comes first as ADDED, however
    many (sent in several writes)."""
    _burst(sandbox, 600)
    events = raw_watch(sandbox, "timeoutSeconds=0.5")
    added = sorted(e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED")
    assert added == sorted([f"c{i:05d}" for i in range(600)] + [ROOT_CA])


def test_two_watches_of_a_kind_read_the_same_events(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """Watches of one kind share each event's encoded line: each still reads every
    event it selects, as its own selector shows it (here one watch selects ``x=y``)."""
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    got: dict[str, list[dict]] = {}
    # each read up to the burst's last event as its selector shows it (the relabelled
    # c00000), not to a stream's end: a timeout is the bound, not a wait
    queries = {
        "all": ("", "MODIFIED"),
        "x=y": ("labelSelector=x%3Dy&", "DELETED"),
    }
    readers = [
        threading.Thread(
            target=lambda name=name, q=q, last=last: got.__setitem__(
                name,
                watch_until(
                    sandbox,
                    CONFIGMAPS_PATH,
                    f"{q}resourceVersion={rv}&timeoutSeconds=120",
                    lambda event: event["type"] == last,
                ),
            )
        )
        for name, (q, last) in queries.items()
    ]
    for reader in readers:
        reader.start()
    time.sleep(0.5)  # both watches are open (what they miss they read from history)
    _burst(sandbox, 40)
    for reader in readers:
        reader.join()
    shown = {k: [(e["type"], e["object"]["metadata"]["name"]) for e in v] for k, v in got.items()}
    assert shown["all"] == [("ADDED", f"c{i:05d}") for i in range(40)] + [("MODIFIED", "c00000")]
    assert shown["x=y"] == [("ADDED", f"c{i:05d}") for i in range(0, 40, 2)] + [
        ("DELETED", "c00000")
    ]
    # the object a line carries is the same whichever watch sent it
    first = {
        e["object"]["metadata"]["name"]: e["object"] for e in got["x=y"] if e["type"] == "ADDED"
    }
    for event in got["all"]:
        name = event["object"]["metadata"]["name"]
        if event["type"] == "ADDED" and name in first:
            assert event["object"] == first[name]


def test_shared_lines_are_bounded_and_encode_each_event_once_per_type() -> None:
    """The shared lines keep the latest ``limit`` (the oldest go first); an event shown
    as another type, or at another kind, is a line of its own."""
    kinds = KindRegistry()
    kind = kinds.by_resource("", "configmaps")
    assert kind is not None
    lines = SharedLines(3)
    events = [
        StoredEvent(i + 1, "ADDED", CONFIGMAPS, "default", {"metadata": {"name": f"c{i}"}})
        for i in range(5)
    ]
    first = lines.line(kind, events[0], "ADDED")
    assert lines.line(kind, events[0], "ADDED") is first
    assert json.loads(first) == {
        "type": "ADDED",
        "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c0"}},
    }
    assert json.loads(lines.line(kind, events[0], "MODIFIED"))["type"] == "MODIFIED"
    for event in events[1:]:
        lines.line(kind, event, "ADDED")
    assert len(lines) == 3
    again = lines.line(kind, events[0], "ADDED")  # forgotten: encoded anew, same bytes
    assert again == first and again is not first
