"""A wave's ``analysis:`` in waves.yaml: the batch analysis's shape, checked at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.analysis import WAVE_KEYS, check_wave_query, fill_query
from reconciler.model.catalog import Catalog
from reconciler.model.waveanalysis import settings_digest
from tests.catalog.test_waves import fleet, messages


def analysed(query: str, *, extra: str = "", condition: str = '"< 0.01"', first: str = "") -> str:
    """Waves whose second wave measures ``query`` (its ``query:`` at line 16); ``extra``:
    more keys of ``prometheus``; ``first``: lines added to the first wave."""
    return (
        "waves:\n"
        "  - name: canary\n"
        "    clusters: [staging]\n"
        f"{first}"
        "  - name: eu\n"
        "    clusters: [{matchLabels: {region: eu}}]\n"
        "    analysis:\n"
        "      prometheus:\n"
        "        interval: 1m\n"
        "        count: 4\n"
        "        failureLimit: 1\n"
        "        inconclusiveLimit: 2\n"
        f"{extra}"
        "        queries:\n"
        "          - name: error-rate\n"
        f"            query: '{query}'\n"
        f"            successCondition: {condition}\n"
        "  - name: rest\n"
        '    clusters: ["*"]\n'
    )


QUERY = (
    'sum(rate(http_requests_total{cluster=~"${wave.clusters}",status=~"5.."}[5m]))'
    ' / sum(rate(http_requests_total{cluster=~"${wave.clusters}"}[5m]))'
)


def errors(catalog: Catalog) -> list[str]:
    return [m for m in messages(catalog) if "warning" not in m]


def test_a_wave_carries_the_batch_analysis_shape(tmp_path: Path) -> None:
    catalog = fleet(tmp_path, analysed(QUERY))
    waves = catalog.waves
    assert waves is not None and waves.valid, messages(catalog)
    eu = waves.waves[1]
    assert eu.analysis is not None and waves.waves[0].analysis is None
    assert (eu.analysis.interval_seconds, eu.analysis.count) == (60, 4)
    assert (eu.analysis.failure_limit, eu.analysis.inconclusive_limit) == (1, 2)
    (query,) = eu.analysis.queries
    assert (query.name, query.query, str(query.condition)) == ("error-rate", QUERY, "< 0.01")
    assert query.line == 16
    assert len(settings_digest(eu.analysis)) == 12


@pytest.mark.parametrize(
    ("query", "line", "text"),
    [
        ("rate(http_requests_total[5m]", 16, 'analysis query "error-rate": PromQL:'),
        (
            'up{namespace="${params.ns}"}',
            16,
            'unknown placeholder "${params.ns}" in a wave\'s query',
        ),
        ('up{cluster=~"${rollout.to}"}', 16, 'unknown placeholder "${rollout.to}"'),
        ('up{x="${wave.name', 16, "unterminated placeholder"),
    ],
)
def test_a_bad_query_is_an_error_at_its_line(
    tmp_path: Path, query: str, line: int, text: str
) -> None:
    catalog = fleet(tmp_path, analysed(query))
    assert catalog.waves is not None and not catalog.waves.valid
    found = errors(catalog)
    assert any(m.startswith(f"waves.yaml:{line}:") and text in m for m in found), found
    assert catalog.waves.error.startswith(f"waves.yaml:{line}:")


def test_a_bad_condition_and_interval_name_their_lines(tmp_path: Path) -> None:
    bad = analysed(QUERY, condition='"about 1"').replace("interval: 1m", "interval: soon")
    catalog = fleet(tmp_path, bad)
    found = errors(catalog)
    assert any(m.startswith("waves.yaml:10:") and "interval must be a duration" in m for m in found)
    assert any(
        m.startswith("waves.yaml:17:") and 'successCondition "about 1" is not' in m for m in found
    ), found


def test_unknown_keys_and_bounds_come_from_the_schema(tmp_path: Path) -> None:
    catalog = fleet(tmp_path, analysed(QUERY, extra="        treshold: 2\n"))
    assert any("waves.yaml:14:" in m and "treshold" in m for m in errors(catalog)), errors(catalog)
    catalog = fleet(tmp_path / "b", analysed(QUERY).replace("count: 4", "count: 0"))
    assert any("waves.yaml:11:" in m and "count" in m for m in errors(catalog)), errors(catalog)


def test_the_first_wave_has_nothing_to_measure(tmp_path: Path) -> None:
    first = (
        "    analysis:\n      prometheus:\n        queries:\n"
        "          - {name: up, query: 'up', successCondition: '== 1'}\n"
    )
    catalog = fleet(tmp_path, analysed(QUERY, first=first))
    assert any(
        m.startswith("waves.yaml:6:") and 'wave "canary" is the first' in m for m in errors(catalog)
    ), errors(catalog)


def test_every_wave_placeholder_fills_and_checks() -> None:
    query = " + ".join(f'count(up{{l="${{{key}}}"}})' for key in WAVE_KEYS)
    assert check_wave_query(query) is None
    values = {key: key.upper() for key in WAVE_KEYS}
    assert 'l="WAVE.CLUSTERS"' in fill_query(query, values)


def test_the_documented_wave_analysis_validates(tmp_path: Path) -> None:
    """The worked query of docs/WAVES.md, as a user copies it (with this fleet's canary)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "WAVES.md").read_text()
    start = docs.index(
        "waves:\n  - name: canary\n    clusters: [staging, prod-canary]\n  - name: rest"
    )
    block = docs[start : docs.index("```", start)].replace("[staging, prod-canary]", "[staging]")
    catalog = fleet(tmp_path, block)
    assert catalog.waves is not None and catalog.waves.valid, messages(catalog)
    analysis = catalog.waves.waves[1].analysis
    assert analysis is not None and (analysis.count, analysis.interval_seconds) == (4, 300)
    (query,) = analysis.queries
    assert 'cluster=~"${wave.clusters}"' in query.query
