"""What the daemon reads of a pass's report after it: the counts of each action and the
entries of objects the pass wrote, made with one scan of the change set.

The metrics (``reconciler_apply_actions_total``), the pass's summary line and the log
line per changed instance read them; a no-op pass (every entry unchanged) has no
changed entry to log.
"""

from __future__ import annotations

from reconciler.daemon.loop import pass_summary
from reconciler.daemon.passes import PassReport
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.status import InstanceStatus, Phase


def entry(instance: str, name: str, action: Action) -> ChangeSetEntry:
    return ChangeSetEntry.for_ref(instance, ObjectRef("v1", "ConfigMap", "ns", name), action)


def test_counts_every_action_and_keeps_the_changed_entries_in_order() -> None:
    entries = (
        entry("web", "a", Action.UNCHANGED),
        entry("web", "b", Action.CONFIGURED),
        entry("api", "c", Action.CREATED),
        entry("api", "d", Action.UNCHANGED),
        entry("old", "e", Action.DELETED),
        entry("bad", "f", Action.FAILED),
        entry("bad", "g", Action.SKIPPED),
    )
    report = PassReport("prod", "c0ffee", changes=ChangeSet(entries))
    assert report.action_counts == {
        Action.CREATED: 1,
        Action.CONFIGURED: 1,
        Action.UNCHANGED: 2,
        Action.DELETED: 1,
        Action.SKIPPED: 1,
        Action.FAILED: 1,
    }
    assert list(report.action_counts) == list(Action)  # every action, in the metric's order
    assert report.changed_entries == tuple(e for e in entries if e.changed)
    assert [e.name for e in report.changed_entries] == ["b", "c", "e"]
    statuses = (InstanceStatus("prod", "web", "podinfo", Phase.READY),)
    report = PassReport("prod", "c0ffee", statuses=statuses, changes=ChangeSet(entries))
    line = pass_summary(7, report, set(), 0.25)
    assert line is not None and line.startswith("pass 7: 3 changed, 0 waiting for promotion")


def test_a_pass_that_changed_nothing_has_no_changed_entry() -> None:
    entries = tuple(entry("web", n, Action.UNCHANGED) for n in "abc")
    report = PassReport("prod", "c0ffee", changes=ChangeSet(entries))
    assert report.changed_entries == ()
    assert report.action_counts[Action.UNCHANGED] == 3
    assert sum(report.action_counts.values()) == 3
    assert pass_summary(1, report, set(), 0.1) is None
    # a status commit alone still makes the pass one that changed something
    assert pass_summary(1, report, {"web"}, 0.1) == (
        "pass 1: 1 changed, 0 waiting for promotion, 0 failed (0.1 s)"
    )
