"""A pass applies independent instances concurrently, within the request budget.

The sandbox answers after ``request_latency`` (a real API server takes 5-10 ms),
so requests of different instances overlap when they are sent concurrently; its
request log says how many were in flight as each began. Assertions count
overlaps, never time.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from reconciler.daemon.lanes import run_lanes
from reconciler.kube import RetryPolicy
from reconciler.model.changeset import Action
from reconciler.model.status import Phase
from tests.daemon.conftest import World, sandbox_world

LATENCY = 0.01  # seconds per answer, as a real API server takes
QUICK = {"health_grace": 0.0}  # health is not what these tests look at


# One ConfigMap per instance: cheap for the sandbox, so its time is the requests'.
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${instance.name}
data:
  message: ${params.message}
"""


def instances(namespaces: list[str], **params: str) -> dict[str, str | None]:
    """One instance ``iNN`` per namespace given (the baseline's two removed), each
    with podinfo 6.5.0 rendering a ConfigMap; ``params["NN"]`` its parameters."""
    files: dict[str, str | None] = {
        "clusters/prod/instances/web.yaml": None,
        "clusters/prod/instances/api.yaml": None,
        "apps/podinfo/versions/6.5.0/manifests/deployment.yaml": CONFIGMAP,
    }
    for i, namespace in enumerate(namespaces):
        extra = f"parameters: {params[f'{i:02d}']}\n" if f"{i:02d}" in params else ""
        files[f"clusters/prod/instances/i{i:02d}.yaml"] = (
            "apiVersion: reconciler/v1\nkind: Instance\n"
            f"name: i{i:02d}\napp: podinfo\nchannel: stable\nnamespace: {namespace}\n{extra}"
        )
    return files


def taken_by_someone_else(world: World, namespace: str, name: str) -> None:
    """Another applier owns the ConfigMap's message: our apply conflicts with it.

    https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts
    """
    for path, body in (
        ("/api/v1/namespaces/" + namespace, {"metadata": {"name": namespace}}),
        (
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"metadata": {"name": name, "namespace": namespace}, "data": {"message": "mine"}},
        ),
    ):
        kind = "Namespace" if "configmaps" not in path else "ConfigMap"
        world.client.request(
            "PATCH",
            path,
            subject=path,
            verb="apply",
            query=[("fieldManager", "someone-else")],
            body={"apiVersion": "v1", "kind": kind, **body},
            content_type="application/apply-patch+yaml",
        )


def in_flight(world: World) -> list[int]:
    assert world.sandbox is not None
    return [e.in_flight for e in world.sandbox.request_log() if e.in_flight]


def test_instances_are_applied_concurrently_failures_alone_records_in_order(
    tmp_path: Path,
) -> None:
    """Requests of different instances overlap, never more than the budget; the
    instance the API server refuses fails alone; records come in plan order; the
    first instance (plan order) that needs a missing shared namespace creates it
    and says so, the others find it."""
    shared = ["team-shared"] * 3
    with sandbox_world(
        tmp_path,
        instances([*shared, "team-a", "team-b", "team-c"]),
        sandbox_options={"request_latency": LATENCY},
        client_options={"max_requests_in_flight": 3},
        **QUICK,
    ) as world:
        taken_by_someone_else(world, "team-b", "i04")
        outcome = world.daemon.run_pass()
        assert outcome.report is not None, outcome.error
        report = outcome.report
        assert [s.instance for s in report.statuses] == [f"i{i:02d}" for i in range(6)]
        phases = {s.instance: s.phase for s in report.statuses}
        assert phases.pop("i04") is Phase.FAILED
        assert set(phases.values()) == {Phase.READY}
        counts = in_flight(world)
        assert max(counts) <= 3
        assert sum(1 for c in counts if c > 1) >= 3  # requests of instances overlapped
        made = [
            (e.instance, e.ref.name)
            for e in report.changes.entries
            if e.ref.kind == "Namespace" and e.action is Action.CREATED
        ]
        assert sorted(made) == [("i00", "team-shared"), ("i03", "team-a"), ("i05", "team-c")]


def test_throttled_requests_are_retried_after_retry_after_and_counted(tmp_path: Path) -> None:
    """The API server's in-flight limit answers 429 with Retry-After; nothing fails for it.

    https://kubernetes.io/docs/concepts/cluster-administration/flow-control/
    (our retry policy caps the wait at ``max_delay``: here 50 ms, not the 1 s asked).
    """
    retry = RetryPolicy(base_delay=0.01, max_delay=0.05)
    with sandbox_world(
        tmp_path,
        instances([f"team-{i}" for i in range(6)]),
        sandbox_options={"request_latency": LATENCY, "max_requests_in_flight": 2},
        client_options={"max_requests_in_flight": 6, "retry": retry},
        **QUICK,
    ) as world:
        outcome = world.daemon.run_pass()
        assert outcome.report is not None, outcome.error
        assert {s.phase for s in outcome.report.statuses} == {Phase.READY}
        assert world.sandbox is not None
        # the pass's Events go out in the background through the same budget: once they
        # are sent, the client and the server have seen the same requests
        world.daemon.flush_events()
        log = world.sandbox.request_log()
        refused = [e for e in log if e.status == 429]
        assert refused, "a budget of 6 against a limit of 2 must be turned away sometimes"
        assert world.client.budget.throttled == len(refused)
        # exported as the pass ends: what the background Events met after is in the next
        exported = re.search(
            r'^reconciler_api_throttled_total\{cluster="prod"\} (\S+)$',
            world.daemon.metrics.render().decode(),
            re.M,
        )
        assert exported is not None and 0 < float(exported[1]) <= len(refused)
        assert max(e.in_flight for e in log if e.status != 429) <= 2


def test_lanes_run_concurrently_and_return_results_in_order() -> None:
    """Two lanes meet at a barrier (they can only pass it together); a lane's own
    items run in order; results come back in item order."""
    barrier = threading.Barrier(2, timeout=10)
    seen: list[str] = []

    def work(item: str) -> str:
        if item in ("a1", "b1"):
            barrier.wait()  # raises BrokenBarrierError if the lanes ran one after another
        seen.append(item)
        return item.upper()

    items = ["a1", "b1", "a2", "b2", "a3"]
    assert run_lanes(items, lambda i: i[0], work, workers=2) == ["A1", "B1", "A2", "B2", "A3"]
    assert [i for i in seen if i[0] == "a"] == ["a1", "a2", "a3"]


def test_lanes_raise_a_failure_and_one_worker_runs_inline() -> None:
    calls: list[str] = []

    def work(item: str) -> str:
        calls.append(threading.current_thread().name)
        if item.startswith("x"):
            raise ValueError(item)
        return item

    with pytest.raises(ValueError, match="x1"):
        run_lanes(["a", "x1", "b"], lambda i: i, work, workers=4)
    calls.clear()
    assert run_lanes(["a", "b"], lambda i: i, work, workers=1) == ["a", "b"]
    assert calls == [threading.current_thread().name] * 2


def test_lanes_carry_the_pass_id_into_their_threads() -> None:
    """Log lines of concurrent applies carry the pass ID like the rest of the pass."""
    from reconciler.daemon.logs import current_pass_id, pass_scope

    with pass_scope() as pass_id:
        seen = run_lanes(list(range(6)), lambda i: i, lambda _i: current_pass_id(), workers=3)
    assert seen == [pass_id] * 6


def test_instances_sharing_a_new_namespace_go_concurrently_once_it_exists(
    tmp_path: Path,
) -> None:
    """A new cluster whose instances all live in one namespace: the first instance
    (plan order) creates it and says so, alone; the others then find it and are
    applied concurrently, not one after another as the namespace's lane had it."""
    with sandbox_world(
        tmp_path,
        instances(["team-one"] * 8),
        sandbox_options={"request_latency": LATENCY},
        client_options={"max_requests_in_flight": 4},
        **QUICK,
    ) as world:
        outcome = world.daemon.run_pass()
        assert outcome.report is not None, outcome.error
        report = outcome.report
        assert [s.instance for s in report.statuses] == [f"i{i:02d}" for i in range(8)]
        assert {s.phase for s in report.statuses} == {Phase.READY}
        made = [
            (e.instance, e.ref.name)
            for e in report.changes.entries
            if e.ref.kind == "Namespace" and e.action is Action.CREATED
        ]
        assert made == [("i00", "team-one")]
        assert world.sandbox is not None
        writes = [
            e
            for e in world.sandbox.request_log()
            if e.method == "PATCH" and "/namespaces/team-one/configmaps/" in e.path
        ]
        assert len(writes) >= 16  # each instance's ConfigMap and its inventory
        assert max(e.in_flight for e in writes) <= 4
        assert sum(1 for e in writes if e.in_flight > 1) >= 4  # instances overlapped
