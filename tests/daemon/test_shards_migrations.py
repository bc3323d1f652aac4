"""Global migrations under ``--shards``: run once, by the replica holding shard 0.

With 2 shards, ``cards`` hashes to shard 0 and ``books`` to shard 1. Both move to a
version shipping a global ``pre`` migration; the replica of shard 1 must not run it
(it would run twice, or race the other replica) and must not upgrade ``books``
before the cluster's ledger records it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from reconciler.daemon.loop import Daemon
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.model.shards import ShardScope, shard_of
from reconciler.model.status import Phase
from tests.daemon.test_migrations import (
    REGISTRY,
    Cluster,
    global_migration_files,
    instance,
    make_cluster,
)

__all__ = ["make_cluster"]
SHARD_OF_BOOKS = ShardScope(2, frozenset({1}))
SHARD_ZERO = ShardScope(2, frozenset({0}))


def test_only_shard_zero_runs_a_global_pre_migration_and_the_others_wait_for_it(
    make_cluster: Any,
) -> None:
    assert (shard_of("cards", 2), shard_of("books", 2)) == (0, 1)
    files = global_migration_files()
    files["clusters/prod/instances/cards.yaml"] = instance("1.5.0").replace("books", "cards")
    cluster: Cluster = make_cluster(files=files)
    other = cluster.daemon
    settings = replace(other.settings, cache_dir=other.settings.cache_dir.parent / "zero")  # type: ignore[union-attr]
    zero = Daemon(settings, cluster.client, metrics=DaemonMetrics(), registry=REGISTRY)

    waiting = other.run_pass(SHARD_OF_BOOKS)
    assert waiting.report is not None
    (books,) = waiting.report.statuses  # shard 1 records its own instance only
    assert (books.instance, books.phase, books.reason) == ("books", Phase.PROGRESSING, "Migrating")
    assert "run by the replica holding shard 0" in books.message
    assert waiting.report.next_look is not None  # it looks again soon
    assert cluster.jobs_created() == []

    ran = zero.run_pass(SHARD_ZERO)
    assert ran.ok, ran
    assert [s.instance for s in ran.report.statuses] == ["cards"]  # type: ignore[union-attr]
    assert cluster.jobs_created() == ["cards-register-schemas"]
    env = cluster.jobs.created[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    components = json.loads({e["name"]: e["value"] for e in env}["RECONCILER_COMPONENTS"])
    assert {c["instance"] for c in components} == {"books", "cards"}  # every shard's change

    done = other.run_pass(SHARD_OF_BOOKS)
    assert done.ok, done
    (books,) = done.report.statuses  # type: ignore[union-attr]
    assert (books.phase, books.version) == (Phase.READY, "1.5.0")
    assert cluster.jobs_created() == ["cards-register-schemas"]  # once in all
    records = other.ledger.read()
    assert [m["scope"] for m in records["cards"].migrations or ()] == ["global"]
