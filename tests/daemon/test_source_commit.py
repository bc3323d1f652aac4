"""The record names the catalog commit that runs (issue 28, SPEC section 3).

A parameter-only change that stays Ready made no status commit, so the record kept
the old ``sourceCommit`` while the inventory moved to the new one. Now a pass that
changed an instance's objects records its commit; a catalog commit that changes
nothing for an instance still writes nothing.
"""

from __future__ import annotations

import textwrap

from reconciler.kube.inventory import from_configmap, inventory_name
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World
from tests.factories import BASE_FILES

# the baseline's api, saying something else
API = (
    textwrap.dedent(BASE_FILES["clusters/prod/instances/api.yaml"])
    + "parameters: {message: bonjour}\n"
)


def test_a_parameter_change_that_stays_ready_records_its_commit(world: World) -> None:
    first = world.daemon.run_pass()
    assert first.ok
    before = world.daemon.ledger.read()
    assert before["api"].phase is Phase.READY

    edited = world.commit("clusters/prod/instances/api.yaml", API, "api: say bonjour")
    outcome = world.daemon.run_pass()
    assert outcome.ok and outcome.report is not None and outcome.report.commit == edited
    config = world.client.get(ObjectRef("v1", "ConfigMap", world.ns("team-api"), "api-config"))
    assert config is not None and config["data"]["message"] == "bonjour"
    # one commit, for api only: it stays Ready, and says which catalog commit runs now
    assert [(c.instance, c.subject) for c in outcome.commits] == [
        ("api", f"prod/api: podinfo 6.6.0 applied catalog {edited[:12]} (Ready)")
    ]
    after = world.daemon.ledger.read()
    assert after["api"].phase is Phase.READY and after["api"].source_commit == edited
    ref = ObjectRef("v1", "ConfigMap", world.ns("team-api"), inventory_name("api"))
    stored = world.client.get(ref)
    inventory = from_configmap(stored) if stored is not None else None
    assert inventory is not None and inventory.source_commit == edited  # they agree
    assert after["web"] == before["web"]  # web's objects did not change: no commit

    # a commit that changes nothing any instance renders writes nothing
    world.commit("README.md", "# catalog\n", "docs only")
    quiet = world.daemon.run_pass()
    assert quiet.ok and quiet.commits == []
    assert world.daemon.ledger.read()["api"].source_commit == edited
