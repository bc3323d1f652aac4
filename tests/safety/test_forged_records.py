"""Forged status records (issue 28): records of instances that do not exist stayed forever.

20,000 junk records pushed to ``status/prod`` made ``/ui`` 5 MB and 7.9 s. Now the
daemon drops, in one commit, every record of an instance that has neither an
instance file nor an inventory (a ``Removed`` tombstone stays), and the index page
draws at most ``INDEX_INSTANCES`` instances, saying how many more there are.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from reconciler.model.status import Phase
from reconciler.source.ledger import StatusLedger
from reconciler.status.report import ClusterReport, index_page
from reconciler.status.report.html import INDEX_INSTANCES, INDEX_ITEMS
from tests.daemon.conftest import World
from tests.ledger.test_ledger import NOW, status

JUNK = 300


def test_records_of_instances_nobody_has_are_dropped_in_one_commit(
    world: World, tmp_path: Path
) -> None:
    assert world.daemon.run_pass().ok
    forger = StatusLedger(str(world.repo.remote), "prod", cache_dir=tmp_path / "forger")
    forged = [status(f"junk-{i}", app=f"app-{i}") for i in range(JUNK)]
    tombstone = status("gone", phase=Phase.REMOVED, version=None)
    forger.record([*forged, tombstone], now=NOW)
    assert len(forger.read()) == JUNK + 3

    outcome = world.daemon.run_pass()
    assert outcome.error is None
    (drop,) = [c for c in outcome.commits if c.instance == ""]
    assert drop.subject == f"prod: dropped {JUNK} status records of unknown instances"
    assert set(world.daemon.ledger.read()) == {"web", "api", "gone"}
    # one commit deleted them all; its message names some and counts the rest
    message = subprocess.run(
        ["git", "-C", str(world.repo.remote), "log", "-1", "--format=%B", "status/prod"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "Dropped: junk-0, junk-1, " in message and f"and {JUNK - 20} more." in message
    assert "Reconciler-Cluster: prod" in message
    # the tree our own writer built is one Git agrees with
    git = ["git", "-C", str(world.repo.remote)]
    listed = subprocess.run(
        [*git, "ls-tree", "--name-only", "status/prod", "instances/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert listed == ["instances/api.yaml", "instances/gone.yaml", "instances/web.yaml"]
    subprocess.run([*git, "fsck", "--strict", "--no-dangling"], check=True, capture_output=True)
    # nothing left to drop: the next pass writes nothing
    assert world.daemon.run_pass().commits == []
    # a replica started afresh reads the branch as it is now, and drops nothing either
    assert world.new_daemon().run_pass().commits == []


def test_the_index_page_draws_a_bounded_number_of_instances() -> None:
    many = 2 * INDEX_INSTANCES + 7
    statuses = {f"i-{n:05d}": status(f"i-{n:05d}", app=f"app-{n}") for n in range(many)}
    report = ClusterReport(
        "prod",
        "status/prod",
        "c" * 40,
        statuses,
        problems=tuple(f"instances/bad-{n}.yaml: unreadable" for n in range(INDEX_ITEMS + 5)),
    )
    page = index_page([report], title="t", source="", generated="")
    assert page.count('class="inst ') == INDEX_INSTANCES
    assert f"and {many - INDEX_INSTANCES} more instances, not shown here" in page
    assert f"{many} instances" in page  # the summary still counts them all
    assert page.count("<li><strong>prod</strong>") == INDEX_ITEMS
    assert "and 5 more unreadable files" in page
    small = index_page(
        [ClusterReport("prod", "status/prod", "c" * 40, dict(list(statuses.items())[:3]))],
        title="t",
        source="",
        generated="",
    )
    assert small.count('class="inst ') == 3 and "more instances" not in small
