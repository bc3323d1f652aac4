"""Two replicas without ``--leader-elect`` (issue 28): the second refuses to start.

Both used to apply and both wrote ``status/prod``, each overwriting the other's
records with what it had seen. Without ``--leader-elect`` the daemon now takes
the cluster's Lease anyway, as its only writer; a second one waits for the Lease
to expire (its holder might have died) and then stops with an error naming the
holder, having applied and written nothing.
"""

from __future__ import annotations

from typing import Any

from reconciler.daemon.service import Service
from reconciler.model.errors import UsageError
from tests.daemon.conftest import World
from tests.daemon.test_service import eventually, serving, status_log

# The holder must renew within renew_deadline or it steps down (and the second replica
# rightly takes over): 3 s, not 0.6, so a machine other work keeps busy (load 20 on two
# cores) cannot make the first replica lose its Lease, which these tests are not about.
# A second replica waits one lease_duration before it refuses, so the bound stays short.
TIMINGS: dict[str, Any] = {
    "lease_duration": 4.0,
    "renew_deadline": 3.0,
    "retry_period": 0.1,
    "leader_namespace": "default",
    "lease_name": "reconciler-prod",
    "interval": 0.3,
    "jitter": 0.0,
    "drift_interval": 3600.0,
}


def holds(service: Service) -> bool:
    """The service took the Lease (``leading`` alone is true before it even tried)."""
    return service.elector is not None and service.elector.is_leader


def replica(world: World, name: str) -> Service:
    daemon = world.new_daemon(identity=f"replica-{name}", cache_dir=world.cache / name, **TIMINGS)
    return Service(daemon, install_signals=False)


def test_a_second_writer_without_leader_election_refuses_to_start(world: World) -> None:
    first = replica(world, "a")
    with serving(first) as first_errors:
        eventually(lambda: len(status_log(world)) == 2)  # the first one works
        head = status_log(world)
        second_daemon = world.new_daemon(
            identity="replica-b", cache_dir=world.cache / "b", **TIMINGS
        )
        passes: list[object] = []
        original = second_daemon.run_pass

        def counted(*args: Any, **kwargs: Any) -> Any:
            passes.append(1)
            return original(*args, **kwargs)

        second_daemon.run_pass = counted  # type: ignore[method-assign]
        second = Service(second_daemon, install_signals=False)
        with serving(second) as second_errors:
            # bounded: before the fix it ran for ever, a second writer
            eventually(lambda: bool(second_errors))
        (refused,) = second_errors
        assert isinstance(refused, UsageError)
        assert passes == []  # it never reconciled
        assert "another reconciler (replica-a) holds Lease/default/reconciler-prod" in str(refused)
        assert "a second writer of status/prod" in str(refused)
        assert "--leader-elect" in str(refused)
        assert holds(first) and first_errors == []
        assert status_log(world) == head  # nothing written meanwhile

    # the first one released its Lease on the way out: the next one starts at once
    third = replica(world, "c")
    with serving(third) as third_errors:
        eventually(lambda: holds(third))
    assert third_errors == []


def test_a_replica_that_died_holding_the_lease_is_waited_for(world: World) -> None:
    """A restarted pod's predecessor never released the Lease: the new one waits for it
    to expire and then runs, instead of refusing."""
    dead = replica(world, "dead")
    with serving(dead):
        eventually(lambda: holds(dead))
        assert dead.elector is not None
        dead.elector.release_on_cancel = False  # killed: the Lease stays behind
    restarted = replica(world, "new")
    with serving(restarted) as errors:
        eventually(lambda: holds(restarted))
    assert errors == []
