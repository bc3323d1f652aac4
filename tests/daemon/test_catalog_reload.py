"""The daemon reloads only what a new catalog commit changed (issue 12).

Through the real cached clone (shallow, fetched with ``--depth=1``): the
previous commit must still be there for ``git diff``, and the reloaded catalog
must equal a full load of the new checkout.
"""

from __future__ import annotations

from reconciler.catalog import load_catalog
from tests.daemon.conftest import World

WEB = """\
apiVersion: reconciler/v1
kind: Instance
name: web
app: podinfo
channel: stable
namespace: web
parameters: {replicas: 6}
"""


def test_a_new_commit_reloads_only_what_it_changed(world: World) -> None:
    daemon = world.daemon
    checkout, _ = daemon.sync()
    first = daemon.catalog_at(checkout)
    world.commit("clusters/prod/instances/web.yaml", WEB)
    checkout, moved = daemon.sync()
    assert moved
    catalog = daemon.catalog_at(checkout)
    assert catalog == load_catalog(checkout.path)
    assert catalog.clusters["prod"].instances["web"].parameters == {"replicas": 6}
    # read again: only the edited instance; the app and the other instance are kept
    assert catalog.apps["podinfo"] is first.apps["podinfo"]
    assert catalog.clusters["prod"].instances["api"] is first.clusters["prod"].instances["api"]
    assert daemon.catalog_at(checkout) is catalog  # the same commit is not read again
