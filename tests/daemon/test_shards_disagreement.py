"""Replicas given different ``--shards`` (issue 28) are told apart, loudly.

With one replica at ``--shards 2`` and one at ``--shards 3``, each counted the other
as a member of its own split, so a shard stayed without an owner for over 90 s with
``/readyz`` green. Now both see the other split in the Leases: a warning naming who
says what, ``reconciler_shards_disagreement`` 1, and ``/readyz`` 503 until they agree.
"""

from __future__ import annotations

import logging

import pytest

from reconciler.daemon.service import Service
from tests.daemon.conftest import World
from tests.daemon.test_service import eventually, running
from tests.daemon.test_shards import samples

COMMON = {
    "interval": 3600.0,
    "drift_interval": 3600.0,
    "leader_namespace": "default",
    "lease_name": "reconciler-prod",
    "lease_duration": 1.0,
    "renew_deadline": 0.6,
    "retry_period": 0.1,
}
KEY = ("reconciler_shards_disagreement", (("cluster", "prod"),))


def problem(service: Service) -> str | None:
    ready, body = service.health.readiness()
    return None if ready else body.get("problem")


def test_replicas_that_disagree_on_shards_say_so_and_are_not_ready(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    two = world.new_daemon(identity="two", cache_dir=world.cache / "two", shards=2, **COMMON)
    three = world.new_daemon(identity="three", cache_dir=world.cache / "three", shards=3, **COMMON)
    with running(two) as a:
        eventually(lambda: a.health.readiness()[0])  # alone: it agrees with itself
        assert samples(a.daemon.metrics)[KEY] == 0
        with running(three) as b:
            eventually(lambda: problem(a) is not None and problem(b) is not None)
            assert problem(a) == (
                "replicas disagree on --shards: two says 2, three says 3; some shards may "
                "have no owner until every replica is given the same --shards"
            )
            assert str(problem(b)).startswith(
                "replicas disagree on --shards: three says 3, two says 2;"
            )
            assert a.health.readiness()[1]["status"] == "degraded"
            assert samples(a.daemon.metrics)[KEY] == samples(b.daemon.metrics)[KEY] == 1
            warnings = [
                r.getMessage()
                for r in caplog.records
                if r.levelno == logging.WARNING and "disagree on --shards" in r.getMessage()
            ]
            assert warnings  # said when it began, not every tick:
            assert len(warnings) <= 2  # once by each replica
        # the other one stopped (its Leases released): agreement again, ready again
        eventually(lambda: a.health.readiness()[0])
        assert samples(a.daemon.metrics)[KEY] == 0
