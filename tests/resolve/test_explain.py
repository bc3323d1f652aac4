"""Text output of ``reconciler resolve`` with and without ``--explain``."""

from __future__ import annotations

from reconciler.resolve import format_resolutions, resolve_cluster
from tests.resolve.catalogs import catalog, entry, instance, version

PODINFO = entry(
    "4.2.0",
    version("6.5.0", deprecated="use 6.6.0"),
    version("6.6.0", upgrade_from=">=6.5.0"),
    version("6.7.0", yanked=True),
    "6.8.0-rc.1",
    channels={"stable": "6.5.0", "fast": "6.6.0"},
)
CATALOG = catalog(
    PODINFO,
    clusters={
        "prod": [
            instance("web", channel="stable"),
            instance("api", version="~6.5"),
            instance("old", version="6.6.0"),
            instance("bad", channel="stabel"),
            instance("held", version="6.5.0"),
        ]
    },
)
DEPLOYED = {"old": "4.2.0", "held": "6.6.0"}


def test_table_is_aligned_with_one_row_per_instance() -> None:
    text = format_resolutions(resolve_cluster(CATALOG, "prod", DEPLOYED), explain=False)
    lines = text.splitlines()
    assert lines[0].split() == ["INSTANCE", "APP", "SOURCE", "VERSION", "NOTE"]
    assert [line.split()[0] for line in lines[1:]] == ["api", "bad", "held", "old", "web"]
    version_column = lines[0].index("VERSION")
    assert all(line[version_column - 2 : version_column] == "  " for line in lines)
    assert lines[1][version_column:].startswith("6.5.0    warning: version 6.5.0 of app podinfo")
    assert '-        error: channel "stabel" is not defined' in lines[2]
    assert "DowngradeBlocked: chosen version 6.5.0 is lower than the deployed 6.6.0" in lines[3]
    assert lines[4].endswith("6.6.0    upgrade via 6.5.0 -> 6.6.0")
    assert "instance web" not in text  # no explanation blocks


def test_explain_lists_every_candidate_and_the_verdict() -> None:
    text = format_resolutions(resolve_cluster(CATALOG, "prod", DEPLOYED), explain=True)
    blocks = text.split("\n\n")
    assert len(blocks) == 6
    api = blocks[1]
    assert api.splitlines() == [
        "instance api (app podinfo, cluster prod) at clusters/prod/instances/api.yaml:6",
        "  selector:  range:~6.5  (means >=6.5.0 <6.6.0-0)",
        "  candidates:",
        "      6.8.0-rc.1  dropped  outside range ~6.5",
        "      6.7.0       dropped  outside range ~6.5",
        "      6.6.0       dropped  outside range ~6.5",
        "    * 6.5.0       chosen   chosen: highest non-yanked version in range",
        "      4.2.0       dropped  outside range ~6.5",
        "  verdict:   6.5.0",
        "  warning:   version 6.5.0 of app podinfo is deprecated: use 6.6.0",
    ]
    bad = blocks[2]
    assert "  candidates: none" in bad
    assert "  verdict:   no version (ResolveFailed)" in bad
    assert '  error:     channel "stabel" is not defined for app podinfo' in bad
    held = blocks[3]
    assert "  deployed:  6.6.0" in held
    assert "  verdict:   6.5.0, blocked (DowngradeBlocked): chosen version 6.5.0" in held
    old = blocks[4]
    assert "  verdict:   6.6.0, deploying 6.5.0 first" in old
    assert "  path:      4.2.0 -> 6.5.0 -> 6.6.0" in old


def test_range_with_kept_lower_versions_and_plain_selector() -> None:
    cat = catalog(entry("1.0.0", "1.1.0"), clusters={"c": [instance("a", version=">=1.0.0")]})
    text = format_resolutions(resolve_cluster(cat, "c"), explain=True)
    assert "  selector:  range:>=1.0.0\n" in text
    assert "      1.0.0  kept     lower than the chosen 1.1.0" in text


def test_no_instances() -> None:
    assert format_resolutions([], explain=True) == "no instances\n"
