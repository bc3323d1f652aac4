"""A Stalled instance keeps its objects running, and its record must say how many.

A broken instance file renders nothing, so the record used to say ``objects: 0``
(the status page showed "Objects 0") while the objects applied before still ran.
"""

from __future__ import annotations

from reconciler.model.status import Phase
from tests.daemon.conftest import World

BROKEN = """\
apiVersion: reconciler/v1
kind: Instance
name: api
app: podinfo
channel: stable
namespace: api
parameters: {replicas: 2
"""


def test_a_stalled_instance_records_the_objects_that_still_run(world: World) -> None:
    first = world.daemon.run_pass()
    assert first.report is not None
    installed = {s.instance: s for s in first.report.statuses}
    assert installed["api"].objects > 0
    world.commit("clusters/prod/instances/api.yaml", BROKEN, "api: oops")
    broken = world.daemon.run_pass()
    assert broken.report is not None
    api = next(s for s in broken.report.statuses if s.instance == "api")
    assert (api.phase, api.reason) == (Phase.STALLED, "CatalogInvalid")
    assert api.objects == installed["api"].objects
    recorded = world.daemon.ledger.read()["api"]
    assert recorded.objects == installed["api"].objects
