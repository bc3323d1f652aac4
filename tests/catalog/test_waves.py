"""waves.yaml (SPEC section 4b): loading, cluster membership and every validation error."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.catalog.incremental import reload_catalog
from reconciler.cli import main
from reconciler.model.catalog import Catalog
from reconciler.model.waves import DurationError, format_duration, parse_duration
from tests.factories import write_catalog

HEAD = "apiVersion: reconciler/v1\nkind: Waves\n"


def cluster(name: str, labels: str = "") -> dict[str, str | bytes | None]:
    text = f"apiVersion: reconciler/v1\nkind: Cluster\nname: {name}\n"
    if labels:
        text += f"labels: {labels}\n"
    instance = (
        f"apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
        f"channel: stable\nnamespace: web-{name}\n"
    )
    return {
        f"clusters/{name}/cluster.yaml": text,
        f"clusters/{name}/instances/web.yaml": instance,
    }


def fleet(tmp_path: Path, waves: str | None) -> Catalog:
    files: dict[str, str | bytes | None] = {}
    for name, labels in (
        ("staging", ""),
        ("prod-eu-1", "{region: eu}"),
        ("prod-eu-2", "{region: eu}"),
        ("prod-us", "{region: us}"),
    ):
        files.update(cluster(name, labels))
    if waves is not None:
        files["waves.yaml"] = HEAD + textwrap.dedent(waves)
    return load_catalog(write_catalog(tmp_path / "c", files))


def messages(catalog: Catalog) -> list[str]:
    return [str(p) for p in catalog.problems if p.file == "waves.yaml"]


GOOD = """\
waves:
  - name: canary
    clusters: [staging, prod]
  - name: eu
    clusters: [{matchLabels: {region: eu}}]
    soak: 1h
    approval: required
  - name: rest
    clusters: ["*"]
    soak: 30m
    maxFailures: 1
approvals:
  - {app: podinfo, version: 6.6.0, wave: eu}
"""


def test_absent_file_is_none(tmp_path: Path) -> None:
    assert fleet(tmp_path, None).waves is None


def test_members_by_name_labels_and_glob(tmp_path: Path) -> None:
    catalog = fleet(tmp_path, GOOD)
    waves = catalog.waves
    assert waves is not None and waves.valid, messages(catalog)
    assert messages(catalog) == []
    assert [w.name for w in waves.waves] == ["canary", "eu", "rest"]
    assert dict(waves.members) == {
        "staging": 0,
        "prod": 0,
        "prod-eu-1": 1,
        "prod-eu-2": 1,
        "prod-us": 2,
    }
    eu = waves.waves[1]
    assert eu.soak == 3600 and eu.approval and eu.max_failures == 0 and eu.soak_text == "1h"
    assert waves.waves[2].max_failures == 1
    assert waves.approved("podinfo", "6.6.0", "eu")
    assert not waves.approved("podinfo", "6.7.0", "eu")
    assert waves.clusters_of(1) == ("prod-eu-1", "prod-eu-2")


def test_cluster_in_no_wave_follows_every_wave(tmp_path: Path) -> None:
    catalog = fleet(tmp_path, "waves:\n  - name: canary\n    clusters: [staging]\n")
    waves = catalog.waves
    assert waves is not None and waves.valid
    assert waves.wave_of("prod-us") == 1 == len(waves.waves)
    assert any('"prod-us" is in no wave' in m and "warning" in m for m in messages(catalog))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "waves:\n  - name: a\n    clusters: [staging, nope]\n",
            'waves.yaml:5: unknown cluster "nope" in wave "a" (clusters: prod, prod-eu-1',
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n  - name: b\n    clusters: [staging]\n",
            'waves.yaml:7: cluster "staging" is in two waves: "a" (line 5) and "b"',
        ),
        (
            "waves:\n  - name: a\n    clusters: [prod-eu-*]\n  - name: b\n    clusters: [prod-eu-1]\n",
            'waves.yaml:7: cluster "prod-eu-1" is in two waves: "a" (by a pattern or labels)',
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n    soak: 1hour\n",
            'waves.yaml:6: waves[0].soak "1hour" is not a duration',
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n    soak: 30\n",
            "waves.yaml:6: waves[0].soak must be a string",
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n    sock: 1h\n",
            'waves.yaml:6: unknown field "sock" in waves[0]',
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n    approval: yes\n",
            "waves.yaml:6: waves[0].approval must be one of required, none",
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n    maxFailures: -1\n",
            "waves.yaml:6: waves[0].maxFailures",
        ),
        (
            "waves:\n  - name: a\n    clusters: [{matchLabels: {'bad key!': x}}]\n",
            'waves.yaml:5: matchLabels: "bad key!" is not a valid label key',
        ),
        (
            "waves:\n  - name: a\n    clusters: [{matchLabels: {region: 'e u'}}]\n",
            'waves.yaml:5: matchLabels: "e u" is not a valid label value (region)',
        ),
        (
            "waves:\n  - name: a\n    clusters: [{labels: {region: eu}}]\n",
            "waves.yaml:5: waves[0].clusters[0]",
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n  - name: a\n    clusters: [prod]\n",
            'waves.yaml:6: wave "a" is defined twice (first at line 4)',
        ),
        (
            "waves:\n  - name: a\n    clusters: [staging]\n"
            "approvals:\n  - {app: podinfo, version: 6.6.0, wave: b}\n",
            'waves.yaml:7: approval names unknown wave "b"',
        ),
        ("waves: []\n", "waves.yaml:3: waves: [] should be non-empty"),
        ("wave:\n  - name: a\n", 'waves.yaml:3: unknown field "wave"'),
    ],
)
def test_each_bad_file_is_invalid_naming_the_line(tmp_path: Path, text: str, expected: str) -> None:
    catalog = fleet(tmp_path, text)
    assert catalog.waves is not None and not catalog.waves.valid
    found = messages(catalog)
    assert any(m.startswith(expected) for m in found), found
    assert catalog.waves.error.startswith("waves.yaml:")


def test_unreadable_yaml_and_wrong_kind(tmp_path: Path) -> None:
    catalog = fleet(tmp_path, "waves: [\n")
    assert catalog.waves is not None and not catalog.waves.valid
    path = tmp_path / "c" / "waves.yaml"
    path.write_text("apiVersion: reconciler/v1\nkind: Channels\nwaves: []\n")
    catalog = load_catalog(tmp_path / "c")
    assert catalog.waves is not None and not catalog.waves.valid
    assert "this file must be kind Waves" in catalog.waves.error


def test_warnings_leave_the_file_valid(tmp_path: Path) -> None:
    catalog = fleet(
        tmp_path,
        "waves:\n  - name: a\n    clusters: [staging, 'qa-*', {matchLabels: {region: mars}}]\n"
        "  - name: b\n    clusters: ['*']\n"
        "approvals:\n  - {app: podinfo, version: 9.9.9, wave: a}\n",
    )
    assert catalog.waves is not None and catalog.waves.valid
    found = " | ".join(messages(catalog))
    assert '"qa-*" matches no cluster' in found
    assert "matchLabels {'region': 'mars'} match no cluster" in found
    assert 'wave "a" needs no approval' in found
    assert "podinfo 9.9.9, not a version of the app" in found


def test_cluster_labels_are_loaded(tmp_path: Path) -> None:
    catalog = fleet(tmp_path, None)
    assert dict(catalog.clusters["prod-eu-1"].cluster.labels) == {"region": "eu"}
    assert dict(catalog.clusters["staging"].cluster.labels) == {}


def test_incremental_reload_reads_waves_again(tmp_path: Path) -> None:
    """A label change moves a cluster between waves; an edit of waves.yaml is seen."""
    before = fleet(tmp_path, GOOD)
    root = tmp_path / "c"
    path = root / "clusters/prod-us/cluster.yaml"
    path.write_text(path.read_text().replace("region: us", "region: eu"))
    after = reload_catalog(before, root, ["clusters/prod-us/cluster.yaml"])
    assert after.waves is not None and after.waves.wave_of("prod-us") == 1
    assert after.waves == load_catalog(root).waves
    (root / "waves.yaml").write_text(HEAD + "waves:\n  - name: a\n    clusters: [gone]\n")
    broken = reload_catalog(after, root, ["waves.yaml"])
    assert broken.waves is not None and not broken.waves.valid
    assert broken.problems == load_catalog(root).problems
    shutil.copy(root / "waves.yaml", tmp_path / "kept")
    (root / "waves.yaml").unlink()
    fixed = reload_catalog(broken, root, ["waves.yaml"])
    assert fixed.waves is None and not any(p.file == "waves.yaml" for p in fixed.problems)


def test_validate_reports_waves_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, "waves:\n  - name: a\n    clusters: [nope]\n")
    code = main(["validate", str(tmp_path / "c"), "--output", "json"])
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert code == 1
    errors = [p for p in problems if p["severity"] == "error"]
    assert [(p["file"], p["line"]) for p in errors] == [("waves.yaml", 5)]
    assert 'unknown cluster "nope"' in errors[0]["message"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("20m", 1200), ("1h30m", 5400), ("2d", 172800)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert format_duration(seconds) == text


@pytest.mark.parametrize("text", ["", "1", "h", "1x", "1h 30m", "-1h", "1.5h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def test_remaining_time_is_never_rounded_to_nothing() -> None:
    assert format_duration(0.2) == "1s"
    assert format_duration(0) == "0s"
