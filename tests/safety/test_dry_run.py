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
from tests.daemon.conftest import World
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
    world.sandbox.reset_request_log()
    outcome = world.daemon.run_pass()
    assert outcome.report is not None
    api = next(s for s in outcome.report.statuses if s.instance == "api")
    assert api.phase is Phase.FAILED and api.reason == "ApplyFailed"
    assert "Widget" in api.message
    assert world.client.get(ObjectRef("v1", "ConfigMap", "team-api", "api-new-config")) is None
    after = world.client.get(ObjectRef("apps/v1", "Deployment", "team-api", "api"))
    assert before is not None and after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    web = next(s for s in outcome.report.statuses if s.instance == "web")
    assert web.phase is Phase.READY  # the other instance is not held back
