"""Issue 8: an instance is applied whole or not at all.

An instance with an unknown kind used to be applied partly and then marked
failed. Now every object apply would write is first sent as a server-side
apply with ``dryRun=All``
(https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run); if the
API server refuses any, nothing of the instance is written.
"""

from __future__ import annotations

from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World, settle
from tests.factories import DEPLOYMENT_TEMPLATE

WIDGET = (
    DEPLOYMENT_TEMPLATE
    + """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${instance.name}-new-config
data: {a: "1"}
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: ${instance.name}-widget
"""
)


def test_unknown_kind_applies_nothing_of_the_instance(world: World) -> None:
    assert world.daemon.run_pass().ok
    before = world.client.get(ObjectRef("apps/v1", "Deployment", "team-api", "api"))
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", WIDGET, "add a widget")
    world.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    api = next(s for s in outcome.report.statuses if s.instance == "api")
    assert api.phase is Phase.FAILED and api.reason == "ApplyFailed"
    assert "Widget" in api.message
    assert world.client.get(ObjectRef("v1", "ConfigMap", "team-api", "api-new-config")) is None
    after = world.client.get(ObjectRef("apps/v1", "Deployment", "team-api", "api"))
    assert before is not None and after is not None
    # nothing the engine owns changed (its controller may still write the status)
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    web = next(s for s in outcome.report.statuses if s.instance == "web")
    assert web.phase is Phase.READY  # the other instance is not held back


BOOKS = """\
apiVersion: reconciler/v1
kind: Instance
name: books
app: podinfo
version: 6.6.0
namespace: team-books
"""


def test_a_new_instance_with_an_unknown_kind_leaves_nothing_behind(world: World) -> None:
    """A first install is not dry-run (issue 12: it cost three requests of seven per new
    instance); what it created is deleted again when an object is refused. The instance
    that already runs the same version is refused by its dry run and keeps running; the
    fixed commit installs the new one."""
    assert world.daemon.run_pass().ok
    world.commit("apps/podinfo/versions/6.6.0/manifests/deployment.yaml", WIDGET, "add a widget")
    world.commit("clusters/prod/instances/books.yaml", BOOKS, "add books")
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    books = next(s for s in outcome.report.statuses if s.instance == "books")
    assert books.phase is Phase.FAILED and books.reason == "ApplyFailed"
    assert "Widget" in books.message
    for ref in (
        ObjectRef("apps/v1", "Deployment", "team-books", "books"),
        ObjectRef("v1", "ConfigMap", "team-books", "books-new-config"),
        ObjectRef("v1", "ConfigMap", "team-books", "reconciler-inventory-books"),
    ):
        assert world.client.get(ref) is None, ref
    skipped = [
        e for e in outcome.report.changes.entries if e.instance == "books" and e.name == "books"
    ]
    assert [str(e.action) for e in skipped] == ["skipped"]
    assert "created and deleted again" in skipped[0].message
    api = next(s for s in outcome.report.statuses if s.instance == "api")
    assert api.phase is Phase.FAILED  # refused by its dry run, still running 6.6.0
    assert world.client.get(ObjectRef("apps/v1", "Deployment", "team-api", "api")) is not None
    world.commit(
        "apps/podinfo/versions/6.6.0/manifests/deployment.yaml", DEPLOYMENT_TEMPLATE, "fix"
    )
    last = settle(world.daemon)[-1]
    assert last.report is not None
    assert {s.instance: s.phase for s in last.report.statuses}["books"] is Phase.READY
