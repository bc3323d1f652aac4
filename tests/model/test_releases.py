"""Releases (a version and its pinned builds) in rollout records, statuses and inventories.

SPEC section 8: a rebuild keeps the version, so what runs is the version *and* the
builds; records written before builds.yaml (no ``images``) must read as before.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.kube.inventory import Inventory, from_configmap, to_configmap
from reconciler.model.rollout import (
    RollingState,
    RolloutFormatError,
    RolloutRecord,
    builds_label,
    release_key,
    release_label,
    split_release,
)
from reconciler.model.status import InstanceStatus, Phase, StatusFormatError
from reconciler.status.messages import commit_message, parse_trailers

D5, D6 = "sha256:" + "5" * 64, "sha256:" + "6" * 64
B5, B6 = f"2.6.2-rev1-b5.1@{D5}", f"2.6.2-rev1-b6.1@{D6}"


def test_a_release_key_is_the_version_without_builds_and_round_trips() -> None:
    assert release_key("2.6.2", {}) == "2.6.2"
    key = release_key("2.6.2", {"worker": "1.4-rev2-b3@" + D5, "web": B5})
    assert key == f"2.6.2|web={B5}|worker=1.4-rev2-b3@{D5}"  # sorted, stable
    assert split_release(key) == ("2.6.2", {"web": B5, "worker": "1.4-rev2-b3@" + D5})
    assert split_release("6.6.0") == ("6.6.0", {})
    assert release_label(key) == "2.6.2 (web 2.6.2-rev1-b5.1, worker 1.4-rev2-b3)"


def test_builds_label_names_only_what_changed() -> None:
    assert builds_label({"web": B5}, {"web": B6}) == "2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1"
    w3, w4 = "1.4-rev2-b3@" + D5, "1.4-rev2-b4@" + D6
    assert (
        builds_label({"web": B5, "worker": w3}, {"web": B6, "worker": w4})
        == "web=2.6.2-rev1-b5.1,worker=1.4-rev2-b3 -> web=2.6.2-rev1-b6.1,worker=1.4-rev2-b4"
    )
    assert builds_label({"web": B5, "worker": w3}, {"web": B5, "worker": w4}) == (
        "1.4-rev2-b3 -> 1.4-rev2-b4"
    )
    assert builds_label({}, {"web": B5}) == "2.6.2-rev1 -> 2.6.2-rev1-b5.1"  # first pin
    same_tag = builds_label({"web": B5}, {"web": f"2.6.2-rev1-b5.1@{D6}"})
    assert same_tag == "2.6.2-rev1-b5.1@sha256:555555555555 -> 2.6.2-rev1-b5.1@sha256:666666666666"


def test_a_build_rollout_record_is_named_by_builds_and_round_trips() -> None:
    record = RolloutRecord(
        "2.6.2",
        "2.6.2",
        RollingState.ROLLING,
        3,
        batch=1,
        from_images=(("web", B5),),
        to_images=(("web", B6),),
    )
    assert record.label == "2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1"
    assert record.from_key == f"2.6.2|web={B5}" and record.to_key == f"2.6.2|web={B6}"
    data = record.to_dict()
    assert (data["from"], data["to"]) == ("2.6.2", "2.6.2")
    assert data["fromImages"] == {"web": B5} and data["toImages"] == {"web": B6}
    assert RolloutRecord.from_dict(data) == record
    # a version change that also has builds is named by its versions, as before
    moved = RolloutRecord("2.6.2", "2.7.0", RollingState.ROLLING, 3, from_images=(("web", B5),))
    assert moved.label == "2.6.2 -> 2.7.0"
    old = RolloutRecord("6.5.0", "6.6.0", RollingState.ROLLING, 3)
    assert "fromImages" not in old.to_dict() and old.from_key == "6.5.0"
    with pytest.raises(RolloutFormatError, match="toImages"):
        RolloutRecord.from_dict({**data, "toImages": ["web"]})


def _status(**changes: object) -> InstanceStatus:
    base = InstanceStatus("prod", "web", "shop", Phase.READY, version="2.6.2", objects=3)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_status_records_images_and_reads_old_records() -> None:
    status = _status(images={"web": B6})
    data = status.to_dict()
    assert data["images"] == {"web": B6}
    assert InstanceStatus.from_dict(data) == status
    old = {k: v for k, v in data.items() if k != "images"}
    assert InstanceStatus.from_dict(old).images == {}
    with pytest.raises(StatusFormatError, match="images"):
        InstanceStatus.from_dict({**data, "images": "web"})
    assert _status(images={"web": B5}).state_key() != status.state_key()  # a rebuild commits


def test_a_rebuild_applied_at_once_is_named_in_subject_and_trailer() -> None:
    message = commit_message(_status(images={"web": B6}), _status(images={"web": B5}))
    subject = message.splitlines()[0]
    assert (
        subject == "prod/web: rebuilt shop 2.6.2: builds 2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1 (Ready)"
    )
    trailers = parse_trailers(message.split("\n\n")[-1])
    assert trailers["Reconciler-Rollout"] == "2.6.2-rev1-b5.1 -> 2.6.2-rev1-b6.1"
    plain = commit_message(_status(objects=4), _status())
    assert "Reconciler-Rollout" not in plain


def test_inventory_records_images_and_reads_old_inventories() -> None:
    inv = Inventory("prod", "web", "shop", app="shop", version="2.6.2", images={"web": B5})
    assert inv.release == f"2.6.2|web={B5}"
    cm = to_configmap(inv)
    back = from_configmap(cm)
    assert back is not None and back.images == {"web": B5} and back.same_as(inv)
    del cm["data"]["images"]
    old = from_configmap(cm)
    assert old is not None and old.images == {} and old.release == "2.6.2"
    cm["data"]["images"] = "{not json"
    assert from_configmap(cm) is not None


def test_status_wide_shows_the_builds_that_run() -> None:
    from reconciler.status.views import status_table

    table = status_table([_status(images={"web": B6, "worker": "1.4-rev2-b4@" + D5})], wide=True)
    header, row = table.splitlines()
    assert "BUILDS" in header.split()
    assert "web=2.6.2-rev1-b6.1,worker=1.4-rev2-b4" in row.split()
