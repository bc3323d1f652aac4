"""A CRD's status goes the way the API server's naming and establishing controllers take it.

Imitates https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#create-a-customresourcedefinition
(``kubectl wait --for condition=established``): created with an empty status, then
``NamesAccepted`` with ``Established=False`` (``Installing``), then ``Established``;
a name another CRD of the group holds is a ``NameConflict``.
"""

from __future__ import annotations

import copy
from typing import Any

from kubernetes import client

from reconciler.sandbox.kinds import CRDS
from reconciler.sandbox.store import StoredEvent
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually
from tests.sandbox.test_discovery import WIDGET_CRD


def conditions(crd: Any) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in crd.status.conditions or ()}


def test_a_new_crd_is_accepted_then_established(
    sandbox: SandboxHandle, api_client: client.ApiClient
) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    seen: list[dict[str, tuple[str, str, str]]] = []

    def record(event: StoredEvent) -> None:
        if event.resource == CRDS:
            listed = event.obj["status"]["conditions"]
            seen.append({c["type"]: (c["status"], c["reason"], c["message"]) for c in listed})

    sandbox.observe(record)
    created = ext.create_custom_resource_definition(WIDGET_CRD)
    assert not created.status.conditions
    assert created.status.accepted_names.kind == ""
    assert created.status.stored_versions == ["v1"]
    done = eventually(
        lambda: (
            (c := ext.read_custom_resource_definition("widgets.example.com"))
            and conditions(c).get("Established", ("",))[0] == "True"
            and c
        )
    )
    assert conditions(done) == {
        "NamesAccepted": ("True", "NoConflicts", "no conflicts found"),
        "Established": ("True", "InitialNamesAccepted", "the initial names have been accepted"),
    }
    names = done.status.accepted_names
    assert (names.kind, names.plural, names.singular, names.list_kind, names.short_names) == (
        "Widget",
        "widgets",
        "widget",
        "WidgetList",
        ["wd"],
    )
    installing = {
        "NamesAccepted": ("True", "NoConflicts", "no conflicts found"),
        "Established": ("False", "Installing", "the initial names have been accepted"),
    }
    assert installing in seen


def test_a_name_another_crd_of_the_group_holds_is_a_conflict(
    api_client: client.ApiClient,
) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(WIDGET_CRD)
    eventually(
        lambda: (
            conditions(ext.read_custom_resource_definition("widgets.example.com")).get(
                "Established", ("",)
            )[0]
            == "True"
        )
    )
    rival = copy.deepcopy(WIDGET_CRD)
    rival["metadata"]["name"] = "gadgets.example.com"
    rival["spec"]["names"] = {"plural": "gadgets", "kind": "Gadget", "shortNames": ["wd"]}
    ext.create_custom_resource_definition(rival)
    found = eventually(
        lambda: conditions(ext.read_custom_resource_definition("gadgets.example.com")).get(
            "NamesAccepted"
        )
    )
    assert found == ("False", "NameConflict", '"wd" is already in use')
    assert conditions(ext.read_custom_resource_definition("gadgets.example.com"))[
        "Established"
    ] == ("False", "NotAccepted", "not all names are accepted")
