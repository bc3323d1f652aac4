"""Kubernetes Events against the sandbox: creation, client-go style deduplication, best effort."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.kube import KubeClient, RetryPolicy
from reconciler.kube.events import EventQueue, EventRecorder, Involved
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.runner import write_kubeconfig

FAST_RETRY = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05, timeout=(2.0, 5.0))
T0 = 1767225600.0  # 2026-01-01T00:00:00Z

INVENTORY = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "inventory-web", "namespace": "default", "uid": "1234-abcd"},
}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def client(sandbox: Any) -> Iterator[KubeClient]:
    with KubeClient.connect(sandbox.kubeconfig, retry=FAST_RETRY) as c:
        yield c


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def recorder(client: KubeClient, clock: Clock) -> EventRecorder:
    return EventRecorder(client, host="replica-0", dedupe_window=600, clock=clock)


def events(client: KubeClient, namespace: str = "default") -> list[dict[str, Any]]:
    return client.list("v1", "Event", namespace=namespace)


def test_record_creates_an_event_on_the_involved_object(
    recorder: EventRecorder, client: KubeClient
) -> None:
    written = recorder.record(INVENTORY, "ApplyFailed", "Deployment/web/podinfo: boom", "Warning")
    assert written is not None
    [event] = events(client)
    assert event["metadata"]["name"].startswith("inventory-web.")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "inventory-web",
        "namespace": "default",
        "uid": "1234-abcd",
    }
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "ApplyFailed", 1)
    assert event["message"] == "Deployment/web/podinfo: boom"
    assert event["source"] == {"component": "reconciler", "host": "replica-0"}
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["reportingComponent"] == "reconciler"


def test_a_repeat_within_the_window_bumps_the_count(
    recorder: EventRecorder, client: KubeClient, clock: Clock, sandbox: Any
) -> None:
    recorder.warning(INVENTORY, "HealthCheckFailed", "Deployment/web/podinfo: 1/2 ready")
    sandbox.reset_request_log()
    clock.now += 60
    recorder.warning(INVENTORY, "HealthCheckFailed", "Deployment/web/podinfo: 1/2 ready")
    clock.now += 60
    recorder.warning(INVENTORY, "HealthCheckFailed", "Deployment/web/podinfo: 1/2 ready")
    [event] = events(client)
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2026-01-01T00:02:00Z"
    verbs = [e.verb for e in sandbox.request_log() if "/events" in e.path]
    assert verbs[:2] == ["patch", "patch"]


def test_a_different_message_reason_or_type_is_a_new_event(
    recorder: EventRecorder, client: KubeClient
) -> None:
    recorder.warning(INVENTORY, "ApplyFailed", "first")
    recorder.warning(INVENTORY, "ApplyFailed", "second")
    recorder.warning(INVENTORY, "HealthCheckFailed", "first")
    recorder.normal(INVENTORY, "ApplyFailed", "first")
    assert len(events(client)) == 4


def test_a_repeat_after_the_window_is_a_new_event(
    recorder: EventRecorder, client: KubeClient, clock: Clock
) -> None:
    recorder.warning(INVENTORY, "ApplyFailed", "boom")
    clock.now += 601
    recorder.warning(INVENTORY, "ApplyFailed", "boom")
    assert sorted(e["count"] for e in events(client)) == [1, 1]


def test_an_expired_event_is_recreated(
    recorder: EventRecorder, client: KubeClient, clock: Clock
) -> None:
    first = recorder.warning(INVENTORY, "ApplyFailed", "boom")
    assert first is not None
    client.delete(ObjectRef("v1", "Event", "default", first["metadata"]["name"]))
    clock.now += 1
    again = recorder.warning(INVENTORY, "ApplyFailed", "boom")
    assert again is not None
    [event] = events(client)
    assert event["metadata"]["name"] != first["metadata"]["name"]
    assert event["count"] == 1


def test_cluster_scoped_objects_get_events_in_default(
    recorder: EventRecorder, client: KubeClient
) -> None:
    recorder.normal(ObjectRef("v1", "Namespace", "", "web"), "Created", "namespace created")
    [event] = events(client)
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Namespace", "name": "web"}


def test_flat_mappings_and_long_messages(recorder: EventRecorder, client: KubeClient) -> None:
    involved = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "namespace": "default",
    }
    written = recorder.warning(involved, "ApplyFailed", "x" * 5000)
    assert written is not None
    [event] = events(client)
    assert len(event["message"]) == 1024 and event["message"].endswith("...")
    assert Involved.of(involved) == Involved("apps/v1", "Deployment", "web", "default")


@pytest.mark.parametrize(
    ("involved", "reason", "type_", "why"),
    [
        ({"apiVersion": "v1", "kind": "ConfigMap"}, "ApplyFailed", "Warning", "apiVersion, kind"),
        (INVENTORY, "", "Warning", "needs a reason"),
        (INVENTORY, "ApplyFailed", "Error", "Normal or Warning"),
    ],
)
def test_bad_input_is_logged_and_dropped(
    recorder: EventRecorder,
    client: KubeClient,
    sandbox: Any,
    caplog: pytest.LogCaptureFixture,
    involved: dict[str, Any],
    reason: str,
    type_: Any,
    why: str,
) -> None:
    sandbox.reset_request_log()
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        assert recorder.record(involved, reason, "msg", type_) is None
    assert why in caplog.text
    assert sandbox.request_log() == []


def test_api_failures_are_swallowed(
    recorder: EventRecorder, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    missing = {**INVENTORY, "metadata": {"name": "inv", "namespace": "missing-ns"}}
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        assert recorder.warning(missing, "ApplyFailed", "boom") is None
    assert "ApplyFailed" in caplog.text and "missing-ns" in caplog.text


def test_an_unreachable_server_is_swallowed(
    client: KubeClient, sandbox: Any, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = EventRecorder(client, host="replica-0")
    sandbox.stop()
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        assert recorder.warning(INVENTORY, "ApplyFailed", "boom") is None
    assert "cannot reach the API server" in caplog.text


def test_annotations_name_the_last_recorder_and_leave_dedupe_alone(
    recorder: EventRecorder, client: KubeClient, clock: Clock
) -> None:
    """The daemon annotates each Event with its pass ID: a repeat by a later pass is still
    the same Event (count 2), and its annotation then names that later pass."""
    recorder.warning(INVENTORY, "ApplyFailed", "boom", annotations={"reconciler.dev/pass": "aaaa"})
    [event] = events(client)
    assert event["metadata"]["annotations"] == {"reconciler.dev/pass": "aaaa"}
    clock.now += 60
    recorder.warning(INVENTORY, "ApplyFailed", "boom", annotations={"reconciler.dev/pass": "bbbb"})
    [event] = events(client)
    assert event["count"] == 2
    assert event["metadata"]["annotations"] == {"reconciler.dev/pass": "bbbb"}


# -- EventQueue: Events off the pass's critical path ---------------------------------


@pytest.fixture(autouse=True)
def _closed_queues(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every queue a test makes is closed when the test ends, as a stopping daemon closes
    its own: a sender still holding an Event when the test's API server goes away would
    otherwise log the loss after the test, into its closed output ("Logging error")."""
    made: list[EventQueue] = []
    init = EventQueue.__init__

    def tracked(queue: EventQueue, *args: Any, **kwargs: Any) -> None:
        init(queue, *args, **kwargs)
        made.append(queue)

    monkeypatch.setattr(EventQueue, "__init__", tracked)
    yield
    for queue in made:
        queue.close()


@pytest.fixture
def silent_client(tmp_path: Path) -> Iterator[KubeClient]:
    """A client whose API server accepts connections and never answers (a hung server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # connections complete in the backlog; nothing ever reads them
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    config = write_kubeconfig(tmp_path / "kubeconfig", url)
    try:
        with KubeClient.connect(config, retry=FAST_RETRY) as c:
            yield c
    finally:
        listener.close()


def test_the_queue_sends_the_same_events_the_recorder_would(client: KubeClient) -> None:
    queue = EventQueue(EventRecorder(client, host="replica-0"), senders=3)
    for i in range(30):
        queue.normal(
            ObjectRef("v1", "ConfigMap", "default", f"inv-{i}"), "ReconcileSucceeded", "ok"
        )
    for _ in range(4):  # repeats of one Event go down one lane, in order: one Event, counted
        queue.warning(INVENTORY, "ApplyFailed", "boom")
    assert queue.flush(timeout=60)
    written = events(client)
    assert len(written) == 31
    assert sorted(
        e["involvedObject"]["name"] for e in written if e["reason"] == "ReconcileSucceeded"
    ) == sorted(f"inv-{i}" for i in range(30))
    [failed] = [e for e in written if e["reason"] == "ApplyFailed"]
    assert failed["count"] == 4 and failed["type"] == "Warning"
    assert queue.pending == 0 and queue.dropped == 0


def test_recording_never_waits_for_a_hung_api_server(silent_client: KubeClient) -> None:
    queue = EventQueue(EventRecorder(silent_client, host="replica-0"), senders=2)
    for i in range(5):
        queue.normal(
            ObjectRef("v1", "ConfigMap", "default", f"inv-{i}"), "ReconcileSucceeded", "ok"
        )
    assert queue.pending == 5  # queued; the senders are stuck on the server, the caller is not
    assert queue.flush(timeout=0.05) is False


def test_a_full_queue_drops_new_events_and_counts_them(
    silent_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    queue = EventQueue(EventRecorder(silent_client, host="replica-0"), senders=1, limit=3)
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        for i in range(6):
            queue.normal(ObjectRef("v1", "ConfigMap", "default", f"inv-{i}"), "Reason", "m")
    assert queue.pending == 3 and queue.dropped == 3
    assert caplog.text.count("dropping new ones") == 1  # one line per overflow, not per Event


def test_a_queue_needs_a_sender_and_room() -> None:
    with pytest.raises(ValueError):
        EventQueue(EventRecorder.__new__(EventRecorder), senders=0)
    with pytest.raises(ValueError):
        EventQueue(EventRecorder.__new__(EventRecorder), limit=0)


def _dropped_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "Events dropped" in r.getMessage()]


def test_an_unreachable_api_server_drops_the_queue_in_one_line(
    client: KubeClient, sandbox: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A test's sandbox stops, or the cluster goes away, with Events still queued: one
    line names the cluster and how many were dropped, with no traceback, instead of a
    failure per Event, each after its own retries."""
    queue = EventQueue(EventRecorder(client, host="replica-0"), senders=3, cluster="prod")
    sandbox.stop()
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        for i in range(12):
            queue.normal(ObjectRef("v1", "ConfigMap", "default", f"inv-{i}"), "Reason", "m")
        assert queue.flush(timeout=60)
    [line] = _dropped_lines(caplog)
    assert line.getMessage().startswith("cluster prod: ")
    assert "cannot be reached" in line.getMessage()
    assert line.exc_info is None
    assert not [r for r in caplog.records if "not recorded" in r.getMessage()]
    assert queue.dropped == 12 and queue.pending == 0
    said = int(line.getMessage().split(": ")[1].split()[0])
    assert 1 <= said <= 12  # the rest failed in flight, in the same outage: not logged again


def test_closing_the_queue_drops_what_waits_in_one_line_and_refuses_new_events(
    silent_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon stops: Events still waiting are dropped (one line, with the cluster),
    and nothing is queued or logged after that."""
    queue = EventQueue(EventRecorder(silent_client, host="replica-0"), senders=1, cluster="prod")
    for i in range(5):
        queue.normal(ObjectRef("v1", "ConfigMap", "default", f"inv-{i}"), "Reason", "m")
    assert queue.flush(timeout=0.05) is False  # the sender hangs on the server
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        dropped = queue.close()
        queue.normal(ObjectRef("v1", "ConfigMap", "default", "late"), "Reason", "m")
    assert dropped in (4, 5)  # the one being sent, if it was taken already, is not dropped
    [line] = _dropped_lines(caplog)
    assert line.getMessage() == f"cluster prod: {dropped} Events dropped: the daemon is stopping"
    assert queue.dropped == dropped + 1  # the late one, refused
    assert queue.pending == 5 - dropped


def test_a_discard_drops_what_waits_and_the_queue_goes_on(
    silent_client: KubeClient, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A flush that timed out gives up on what waits (``Daemon.flush_events``); the queue
    is still open for the next pass."""
    stuck = EventQueue(EventRecorder(silent_client, host="replica-0"), senders=1, cluster="c1")
    for i in range(3):
        stuck.normal(ObjectRef("v1", "ConfigMap", "default", f"inv-{i}"), "Reason", "m")
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        count = stuck.discard("not sent within 0 s")
    assert count in (2, 3)
    [line] = _dropped_lines(caplog)
    assert line.getMessage() == f"cluster c1: {count} Events dropped: not sent within 0 s"
    queue = EventQueue(EventRecorder(client, host="replica-0"), senders=1, cluster="c2")
    assert queue.discard("nothing waits") == 0
    queue.normal(ObjectRef("v1", "ConfigMap", "default", "after"), "Reason", "m")
    assert queue.flush(timeout=60)
    assert [e["involvedObject"]["name"] for e in events(client)] == ["after"]
