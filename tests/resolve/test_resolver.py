"""Selection rules of SPEC section 2: channel, exact, range, latest, and every error."""

from __future__ import annotations

import pytest

from reconciler.model.errors import UsageError
from reconciler.model.resolution import Candidate
from reconciler.resolve import resolve_cluster, resolve_instance, selector_source
from tests.resolve.catalogs import catalog, entry, instance, version

PODINFO = entry(
    "6.4.0",
    version("6.5.0", deprecated="use 6.5.1"),
    "6.5.1",
    "6.6.0",
    version("6.7.0", yanked=True),
    "6.8.0-rc.9",
    "6.8.0-rc.10",
    "7.0.0",
    channels={"stable": "6.5.0", "fast": "6.6.0", "experimental": "6.8.0-rc.10"},
)


def reasons(candidates: tuple[Candidate, ...]) -> dict[str, tuple[bool, str]]:
    return {c.version: (c.kept, c.reason) for c in candidates}


@pytest.mark.parametrize(
    ("channel", "version", "source"),
    [
        ("stable", None, "channel:stable"),
        (None, "6.5.0", "exact"),
        (None, " 6.5.0 ", "exact"),
        (None, ">=6.0.0 <7.0.0", "range:>=6.0.0 <7.0.0"),
        (None, "=6.5.0", "range:=6.5.0"),
        (None, "6.5", "range:6.5"),
        (None, "v6.5.0", "range:v6.5.0"),
        (None, "latest", "latest"),
        (None, None, "none"),
    ],
)
def test_selector_source(channel: str | None, version: str | None, source: str) -> None:
    assert selector_source(instance(channel=channel, version=version)) == source
    # one string for every instance with the same selector: each resolution keeps it
    again = selector_source(instance(channel=channel, version=version))
    assert again is selector_source(instance(channel=channel, version=version))


def test_channel_chooses_its_version_with_deprecation_warning() -> None:
    r = resolve_instance(instance(channel="stable"), PODINFO)
    assert r.ok and r.version == "6.5.0" and r.reason is None
    assert r.source == "channel:stable"
    assert r.warnings == ("version 6.5.0 of app podinfo is deprecated: use 6.5.1",)
    assert (r.cluster, r.instance, r.app) == ("prod", "web", "podinfo")
    assert (r.file, r.line) == ("clusters/prod/instances/web.yaml", 5)
    assert reasons(r.candidates)["6.5.0"] == (True, "chosen: channel stable points here")
    assert reasons(r.candidates)["6.6.0"] == (False, "channel stable points to 6.5.0")
    assert [c.version for c in r.candidates] == [
        "7.0.0",
        "6.8.0-rc.10",
        "6.8.0-rc.9",
        "6.7.0",
        "6.6.0",
        "6.5.1",
        "6.5.0",
        "6.4.0",
    ]


def test_channel_may_point_to_a_prerelease() -> None:
    r = resolve_instance(instance(channel="experimental"), PODINFO)
    assert r.version == "6.8.0-rc.10" and r.warnings == ()


def test_unknown_channel_lists_known_ones_in_file_order() -> None:
    r = resolve_instance(instance(channel="stabel"), PODINFO)
    assert not r.ok and r.version is None and r.reason == "ResolveFailed"
    assert r.error == (
        'channel "stabel" is not defined for app podinfo (known: stable, fast, experimental)'
    )


def test_app_without_channels_file() -> None:
    r = resolve_instance(instance(channel="stable"), entry("1.0.0"))
    assert r.error == (
        "app podinfo has no channels file (apps/podinfo/channels.yaml), "
        'so channel "stable" cannot be resolved'
    )


def test_channel_to_missing_version() -> None:
    e = entry("1.0.0", "1.1.0", channels={"stable": "1.2.0"})
    r = resolve_instance(instance(channel="stable"), e)
    assert r.error == (
        'channel "stable" of app podinfo points to 1.2.0, which is not in the catalog '
        "(versions: 1.0.0, 1.1.0)"
    )
    assert all(not c.kept for c in r.candidates)


def test_channel_to_yanked_version() -> None:
    e = entry("1.0.0", version("1.1.0", yanked=True), channels={"stable": "1.1.0"})
    r = resolve_instance(instance(channel="stable"), e)
    assert r.error == 'channel "stable" of app podinfo points to 1.1.0, which is yanked'
    assert reasons(r.candidates)["1.1.0"] == (False, "yanked (a channel never picks one)")


def test_unknown_app() -> None:
    r = resolve_instance(instance(app="nope", channel="stable"), None)
    assert r.error == 'app "nope" is not in the catalog'
    assert r.candidates == () and r.reason == "ResolveFailed"
    assert r.to_dict() == {
        "cluster": "prod",
        "instance": "web",
        "app": "nope",
        "source": "channel:stable",
        "error": 'app "nope" is not in the catalog',
        "reason": "ResolveFailed",
    }


def test_instance_without_selector() -> None:
    r = resolve_instance(instance(), PODINFO)
    assert r.error == "instance web sets neither channel nor version"
    assert r.source == "none"


def test_exact_version() -> None:
    r = resolve_instance(instance(version="6.6.0"), PODINFO)
    assert r.version == "6.6.0" and r.source == "exact" and r.warnings == ()
    assert r.line == 6
    assert reasons(r.candidates)["6.6.0"] == (
        True,
        "chosen: the instance names this version exactly",
    )
    assert reasons(r.candidates)["6.5.0"] == (False, "not the requested 6.6.0")


def test_exact_yanked_version_is_chosen_with_warning() -> None:
    r = resolve_instance(instance(version="6.7.0"), PODINFO)
    assert r.ok and r.version == "6.7.0" and r.reason is None
    assert r.warnings == (
        "version 6.7.0 of app podinfo is yanked; chosen only because the instance names it exactly",
    )


def test_exact_deprecated_version_warns() -> None:
    r = resolve_instance(instance(version="6.5.0"), PODINFO)
    assert r.warnings == ("version 6.5.0 of app podinfo is deprecated: use 6.5.1",)


def test_deprecated_without_text() -> None:
    r = resolve_instance(instance(version="1.0.0"), entry(version("1.0.0", deprecated="")))
    assert r.warnings == ("version 1.0.0 of app podinfo is deprecated",)


def test_exact_missing_version_lists_what_exists() -> None:
    r = resolve_instance(instance(version="6.9.0"), entry("6.4.0", "6.10.0", "6.5.0"))
    assert r.error == (
        "version 6.9.0 of app podinfo is not in the catalog (versions: 6.4.0, 6.5.0, 6.10.0)"
    )
    empty = resolve_instance(instance(version="1.0.0"), entry())
    assert empty.error == "version 1.0.0 of app podinfo is not in the catalog (versions: none)"


def test_range_chooses_highest_non_yanked_match() -> None:
    r = resolve_instance(instance(version=">=6.0.0 <7.0.0"), PODINFO)
    assert r.version == "6.6.0" and r.source == "range:>=6.0.0 <7.0.0"
    assert reasons(r.candidates) == {
        "7.0.0": (False, "outside range >=6.0.0 <7.0.0"),
        "6.8.0-rc.10": (False, "prerelease (allowPrerelease is false)"),
        "6.8.0-rc.9": (False, "prerelease (allowPrerelease is false)"),
        "6.7.0": (False, "yanked"),
        "6.6.0": (True, "chosen: highest non-yanked version in range"),
        "6.5.1": (True, "lower than the chosen 6.6.0"),
        "6.5.0": (True, "lower than the chosen 6.6.0"),
        "6.4.0": (True, "lower than the chosen 6.6.0"),
    }


def test_range_with_allow_prerelease_orders_rc10_above_rc9() -> None:
    r = resolve_instance(instance(version="~6.8.0-0", allow_prerelease=True), PODINFO)
    assert r.version == "6.8.0-rc.10"
    assert reasons(r.candidates)["6.8.0-rc.9"] == (True, "lower than the chosen 6.8.0-rc.10")


def test_range_allow_prerelease_admits_any_tuple() -> None:
    r = resolve_instance(instance(version=">=6.0.0 <7.0.0", allow_prerelease=True), PODINFO)
    assert r.version == "6.8.0-rc.10"


def test_range_prerelease_opt_in_without_allow_prerelease() -> None:
    r = resolve_instance(instance(version=">=6.8.0-0 <7.0.0"), PODINFO)
    assert r.version == "6.8.0-rc.10"
    other = resolve_instance(instance(version=">=6.6.0-0 <7.0.0"), PODINFO)
    assert other.version == "6.6.0"
    assert reasons(other.candidates)["6.8.0-rc.10"] == (
        False,
        "prerelease (allowPrerelease is false)",
    )


def test_range_deprecated_choice_warns() -> None:
    r = resolve_instance(instance(version="~6.5.0 !=6.5.1"), PODINFO)
    assert r.version == "6.5.0"
    assert r.warnings == ("version 6.5.0 of app podinfo is deprecated: use 6.5.1",)


def test_invalid_range_error_carries_syntax_error_text() -> None:
    r = resolve_instance(instance(version=">>6"), PODINFO)
    assert r.error == 'invalid range ">>6" at column 2: expected a version after ">", found ">"'
    assert r.reason == "ResolveFailed" and r.source == "range:>>6"


def test_leading_v_is_rejected() -> None:
    r = resolve_instance(instance(version="v6.5.0"), PODINFO)
    assert r.error is not None and 'must not start with "v" (write 6.5.0)' in r.error


def test_range_without_match() -> None:
    e = entry("1.0.0", version("2.1.0", yanked=True), "2.2.0-rc.1")
    r = resolve_instance(instance(version="^2.0.0"), e)
    assert r.error == (
        'no version of app podinfo matches "^2.0.0" (versions: 1.0.0, 2.1.0, 2.2.0-rc.1); '
        "set allowPrerelease: true to consider 2.2.0-rc.1; in range but yanked: 2.1.0"
    )
    assert reasons(r.candidates) == {
        "2.2.0-rc.1": (False, "prerelease (allowPrerelease is false)"),
        "2.1.0": (False, "yanked"),
        "1.0.0": (False, "outside range ^2.0.0"),
    }
    plain = resolve_instance(instance(version=">=3"), entry("1.0.0"))
    assert plain.error == 'no version of app podinfo matches ">=3" (versions: 1.0.0)'


def test_latest_skips_yanked_and_prereleases() -> None:
    e = entry("1.0.0", "1.1.0", version("1.2.0", yanked=True), "1.3.0-rc.1")
    r = resolve_instance(instance(version="latest"), e)
    assert r.version == "1.1.0" and r.source == "latest"
    assert reasons(r.candidates) == {
        "1.3.0-rc.1": (False, "prerelease (allowPrerelease is false)"),
        "1.2.0": (False, "yanked"),
        "1.1.0": (True, "chosen: highest non-yanked release version"),
        "1.0.0": (True, "lower than the chosen 1.1.0"),
    }


def test_latest_with_allow_prerelease_counts_prereleases_like_helm_devel() -> None:
    # SPEC section 2: with allowPrerelease: true prereleases count too
    e = entry("1.0.0", "1.1.0", version("1.2.0", yanked=True), "1.3.0-rc.1", "1.3.0-rc.10")
    r = resolve_instance(instance(version="latest", allow_prerelease=True), e)
    assert r.version == "1.3.0-rc.10" and r.source == "latest"
    assert reasons(r.candidates) == {
        "1.3.0-rc.10": (True, "chosen: highest non-yanked version"),
        "1.3.0-rc.1": (True, "lower than the chosen 1.3.0-rc.10"),
        "1.2.0": (False, "yanked"),
        "1.1.0": (True, "lower than the chosen 1.3.0-rc.10"),
        "1.0.0": (True, "lower than the chosen 1.3.0-rc.10"),
    }
    yanked_rc = entry("1.0.0", version("1.1.0-rc.1", yanked=True))
    assert (
        resolve_instance(instance(version="latest", allow_prerelease=True), yanked_rc).version
        == "1.0.0"
    )


def test_latest_with_allow_prerelease_and_only_prereleases() -> None:
    r = resolve_instance(instance(version="latest", allow_prerelease=True), entry("1.0.0-rc.1"))
    assert r.version == "1.0.0-rc.1"


def test_latest_without_release() -> None:
    r = resolve_instance(instance(version="latest"), entry("1.0.0-rc.1"))
    assert r.error == (
        "app podinfo has no non-yanked release version for latest (versions: 1.0.0-rc.1)"
    )


def test_resolve_cluster_sorts_instances_and_passes_deployed() -> None:
    cat = catalog(
        PODINFO,
        clusters={
            "prod": [
                instance("web", channel="fast"),
                instance("api", version="latest"),
                instance("broken", app="nope", version="1.0.0"),
            ],
            "dev": [],
        },
    )
    out = resolve_cluster(cat, "prod", {"web": "6.6.0", "api": "6.4.0"})
    assert [r.instance for r in out] == ["api", "broken", "web"]
    assert [r.version for r in out] == ["7.0.0", None, "6.6.0"]
    assert out[0].deployed == "6.4.0" and out[1].deployed is None
    assert out[1].error == 'app "nope" is not in the catalog'
    assert resolve_cluster(cat, "dev") == []


def test_resolve_cluster_unknown_cluster_names_known_ones() -> None:
    cat = catalog(PODINFO, clusters={"prod": [], "dev": []})
    with pytest.raises(
        UsageError, match=r'cluster "stage" is not in the catalog \(known: dev, prod\)'
    ):
        resolve_cluster(cat, "stage")
    with pytest.raises(UsageError, match=r"\(known: none\)"):
        resolve_cluster(catalog(), "prod")
