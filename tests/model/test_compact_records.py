"""What a daemon holds per instance for its whole life is as small as it can be."""

from __future__ import annotations

import pytest

from reconciler.daemon.memo import Reused, _Entry
from reconciler.daemon.plan import NO_IMAGES, InstancePlan
from reconciler.kube.apply import InstanceResult
from reconciler.kube.health import HealthReport, ObjectHealth
from reconciler.kube.inventory import Inventory
from reconciler.model.catalog import AppVersion, Instance, Origin
from reconciler.model.changeset import ChangeSet
from reconciler.model.resolution import Candidate, Resolution
from reconciler.model.status import Condition, InstanceStatus, Phase
from reconciler.model.version import parse_version


@pytest.mark.parametrize(
    "kind",
    [
        Reused,
        _Entry,
        InstancePlan,
        InstanceResult,
        HealthReport,
        ObjectHealth,
        Inventory,
        Instance,
        Origin,
        ChangeSet,
        Candidate,
        Resolution,
        Condition,
        InstanceStatus,
    ],
)
def test_per_instance_records_are_slotted(kind: type) -> None:
    """A daemon of 10,000 instances holds several of each per instance (its memo of
    settled instances, its last records, its catalog): an instance ``__dict__`` costs
    about 100 bytes more per object than slots (bench/scale.py measures the total)."""
    assert "__slots__" in vars(kind) and "__dict__" not in vars(kind)


def test_a_version_s_key_is_one_string() -> None:
    """Every plan, resolution and record of a version's instances keeps its key."""
    version = AppVersion("web", parse_version("1.2.3"), "apps/web/versions/1.2.3")
    assert version.key == "1.2.3" and version.key is version.key
    assert version == AppVersion("web", parse_version("1.2.3"), "apps/web/versions/1.2.3")


def test_records_at_rest_share_their_conditions() -> None:
    """Thousands of Ready instances of one version say the same: one tuple serves all."""
    one = InstanceStatus("prod", "a", "web", Phase.READY, message="web 1.0.0 is ready")
    two = InstanceStatus("prod", "b", "web", Phase.READY, message="web 1.0.0 is ready")
    assert one.with_default_conditions().conditions is two.with_default_conditions().conditions


def test_plans_without_pinned_builds_share_one_read_only_mapping() -> None:
    assert not NO_IMAGES and dict(NO_IMAGES) == {}
    with pytest.raises(TypeError):
        NO_IMAGES["web"] = "1.0.0-b1@sha256:00"  # type: ignore[index]
