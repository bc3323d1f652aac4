"""Downgrade guard and upgrade paths through ``upgradeFrom``."""

from __future__ import annotations

import inspect
import sys

import pytest

from reconciler.model.errors import NoUpgradePath, ResolveError
from reconciler.model.version import parse_version
from reconciler.resolve import find_upgrade_path, resolve_instance
from tests.resolve.catalogs import entry, instance, version


def test_same_version_deployed_means_nothing_to_do() -> None:
    r = resolve_instance(instance(version="1.0.0"), entry("1.0.0"), deployed="1.0.0")
    assert r.version == "1.0.0" and r.deployed == "1.0.0"
    assert r.upgrade_path == () and r.reason is None and r.message is None
    assert r.next_version == "1.0.0"


def test_downgrade_is_blocked_by_default() -> None:
    e = entry("6.5.0", "6.6.0", channels={"stable": "6.5.0"})
    r = resolve_instance(instance(channel="stable"), e, deployed="6.6.0")
    assert r.ok and r.blocked
    assert r.version == "6.5.0" and r.reason == "DowngradeBlocked"
    assert r.next_version == "6.6.0"
    assert r.message == (
        "chosen version 6.5.0 is lower than the deployed 6.6.0; staying at 6.6.0 "
        "(set allowDowngrade: true on instance web in clusters/prod/instances/web.yaml "
        "to allow the downgrade)"
    )
    assert r.to_dict()["reason"] == "DowngradeBlocked"


def test_downgrade_allowed_warns() -> None:
    e = entry("6.5.0", "6.6.0", channels={"stable": "6.5.0"})
    r = resolve_instance(instance(channel="stable", allow_downgrade=True), e, deployed="6.6.0")
    assert not r.blocked and r.reason is None and r.next_version == "6.5.0"
    assert r.warnings == ("downgrading from 6.6.0 to 6.5.0 (allowDowngrade is true)",)


def test_prerelease_to_release_of_same_tuple_is_an_upgrade() -> None:
    r = resolve_instance(instance(version="1.0.0"), entry("1.0.0"), deployed="1.0.0-rc.10")
    assert r.reason is None and r.next_version == "1.0.0"
    down = resolve_instance(
        instance(version="1.0.0-rc.9"), entry("1.0.0-rc.9"), deployed="1.0.0-rc.10"
    )
    assert down.reason == "DowngradeBlocked"


def test_direct_upgrade_has_no_path() -> None:
    e = entry("6.0.0", version("6.6.0", upgrade_from=">=6.0.0"))
    r = resolve_instance(instance(version="6.6.0"), e, deployed="6.2.0")
    assert r.reason is None and r.upgrade_path == () and r.next_version == "6.6.0"
    no_constraint = resolve_instance(instance(version="6.0.0"), e, deployed="1.0.0")
    assert no_constraint.upgrade_path == ()


def test_multi_step_path_takes_highest_step_each_time() -> None:
    e = entry(
        "4.2.0",
        version("5.0.0", upgrade_from=">=4.0.0"),
        version("5.1.0", upgrade_from=">=4.0.0"),
        version("5.2.0", upgrade_from=">=5.0.0"),
        version("6.0.0", upgrade_from="^5.1.0"),
        version("6.6.0", upgrade_from=">=6.0.0"),
    )
    r = resolve_instance(instance(version="6.6.0"), e, deployed="4.2.0")
    assert r.reason is None
    assert r.upgrade_path == ("5.1.0", "6.0.0", "6.6.0")
    assert r.next_version == "5.1.0"
    assert r.to_dict()["upgradePath"] == ["5.1.0", "6.0.0", "6.6.0"]


def test_path_skips_yanked_and_prereleases() -> None:
    e = entry(
        "1.0.0",
        version("1.5.0", yanked=True),
        "1.6.0-rc.1",
        "1.4.0",
        version("2.0.0", upgrade_from=">=1.4.0"),
    )
    r = resolve_instance(instance(version="2.0.0"), e, deployed="1.0.0")
    assert r.upgrade_path == ("1.4.0", "2.0.0")
    pre = resolve_instance(instance(version="2.0.0", allow_prerelease=True), e, deployed="1.0.0")
    assert pre.upgrade_path == ("1.6.0-rc.1", "2.0.0")


def test_prerelease_target_may_step_through_prereleases() -> None:
    e = entry("1.0.0", "1.1.0-rc.1", version("2.0.0-rc.1", upgrade_from=">=1.1.0-0"))
    path = find_upgrade_path(e.versions.values(), "1.0.0", e.versions["2.0.0-rc.1"])
    assert path == ("1.1.0-rc.1", "2.0.0-rc.1")


def test_dead_end_greedy_step_backtracks() -> None:
    # 3.0.0 is the highest step from 1.0.0, but nothing accepts it; 2.0.0 leads on.
    e = entry(
        "1.0.0",
        version("2.0.0", upgrade_from="^1.0.0"),
        version("3.0.0", upgrade_from=">=1.0.0"),
        version("3.5.0", upgrade_from="^2.0.0"),
        version("4.0.0", upgrade_from=">=3.5.0"),
    )
    target = e.versions["4.0.0"]
    assert find_upgrade_path(e.versions.values(), "1.0.0", target) == ("2.0.0", "3.5.0", "4.0.0")
    assert find_upgrade_path(e.versions.values(), parse_version("1.0.0"), target) == (
        "2.0.0",
        "3.5.0",
        "4.0.0",
    )


def test_direct_path_is_the_target_alone() -> None:
    e = entry("1.0.0", "2.0.0")
    assert find_upgrade_path(e.versions.values(), "1.0.0", e.versions["2.0.0"]) == ("2.0.0",)


def test_upgrade_from_matches_deployed_prereleases_by_precedence() -> None:
    e = entry(version("2.0.0", upgrade_from=">=1.0.0"))
    assert find_upgrade_path(e.versions.values(), "1.5.0-rc.1", e.versions["2.0.0"]) == ("2.0.0",)


def test_no_path_names_the_gap() -> None:
    e = entry("4.2.0", "5.0.0-rc.1", version("6.6.0", upgrade_from=">=6.0.0"))
    r = resolve_instance(instance(version="6.6.0"), e, deployed="4.2.0")
    assert r.ok and r.blocked and r.version == "6.6.0"
    assert r.reason == "NoUpgradePath" and r.next_version == "4.2.0"
    assert r.message == (
        "no catalog version between 4.2.0 and 6.6.0 accepts an upgrade from 4.2.0 "
        "(6.6.0 requires upgradeFrom >=6.0.0)"
    )


def test_no_path_after_some_steps_names_the_highest_reachable() -> None:
    e = entry(
        "4.2.0",
        version("5.0.0", upgrade_from="^4.0.0"),
        version("5.1.0", upgrade_from="^5.0.0"),
        version("5.9.0", upgrade_from=">=5.5.0"),
        version("6.6.0", upgrade_from=">=5.9.0"),
    )
    with pytest.raises(NoUpgradePath) as caught:
        find_upgrade_path(e.versions.values(), "4.2.0", e.versions["6.6.0"])
    assert str(caught.value) == (
        "no catalog version between 5.1.0 and 6.6.0 accepts an upgrade from 5.1.0 "
        "(the highest version reachable from 4.2.0; 6.6.0 requires upgradeFrom >=5.9.0)"
    )


def test_invalid_upgrade_from_names_the_version_file() -> None:
    e = entry("1.0.0", version("2.0.0", upgrade_from=">>1"))
    r = resolve_instance(instance(version="2.0.0"), e, deployed="1.0.0")
    assert not r.ok and r.version is None and r.reason == "ResolveFailed"
    assert r.error == (
        "apps/podinfo/versions/2.0.0/version.yaml:5: upgradeFrom of 2.0.0 is not a valid range: "
        'invalid range ">>1" at column 2: expected a version after ">", found ">"'
    )
    with pytest.raises(ResolveError, match=r"version\.yaml:5"):
        find_upgrade_path(e.versions.values(), "1.0.0", e.versions["2.0.0"])


def test_invalid_upgrade_from_outside_the_path_is_ignored() -> None:
    e = entry("1.0.0", "2.0.0", version("3.0.0", upgrade_from=">>1"))
    r = resolve_instance(instance(version="2.0.0"), e, deployed="1.0.0")
    assert r.ok and r.reason is None


def test_invalid_deployed_version_warns_and_skips_guards() -> None:
    r = resolve_instance(instance(version="1.0.0"), entry("1.0.0"), deployed="banana")
    assert r.ok and r.reason is None and r.version == "1.0.0"
    assert r.warnings == (
        'deployed version "banana" is not a valid version; downgrade guard and upgrade path '
        "skipped",
    )


def test_long_chain_resolves_without_blowup() -> None:
    """A chain longer than the stack may be deep: the search keeps its own stack.

    The recursion limit is lowered to a little above this test's own depth, so a
    search that recursed once per hop would fail here with 300 hops as it would
    with 1,100 under the default limit; each hop scans the steps above it, so the
    chain is kept short enough for that quadratic scan to stay cheap.
    """
    texts = [f"1.{i}.0" for i in range(300)]
    versions = [version(texts[0])] + [
        version(t, upgrade_from=f"^{texts[i]} <{t}") for i, t in enumerate(texts[1:])
    ]
    e = entry(*versions)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 100)
    try:
        path = find_upgrade_path(e.versions.values(), "1.0.0", e.versions["1.299.0"])
    finally:
        sys.setrecursionlimit(limit)
    assert path == tuple(texts[1:])
