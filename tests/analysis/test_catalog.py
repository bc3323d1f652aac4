"""``rollout.analysis.prometheus`` in catalog files (SPEC section 4c): loaded, and
every bad query, condition or duration a ``validate`` problem at its own line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.model.analysis import PrometheusAnalysis
from tests.factories import BASE_FILES, write_catalog
from tests.rollout.test_daemon_rollout import WEB

VERSION = "apps/podinfo/versions/6.6.0/version.yaml"
HEAD = (
    textwrap.dedent(str(BASE_FILES[VERSION])).replace(
        "  message: {default: hello}\n", "  message: {default: hello}\n  ceiling: {default: 0.01}\n"
    )
    + "  analysis:\n    prometheus:\n"
)
GOOD = (
    HEAD
    + """\
      address: http://prometheus.monitoring:9090
      interval: 1m30s
      count: 4
      failureLimit: 1
      inconclusiveLimit: 2
      queries:
        - name: error-rate
          query: sum(rate(http_requests_total{namespace="${instance.namespace}",code=~"5.."}[2m])) / sum(rate(http_requests_total{namespace="${instance.namespace}"}[2m]))
          successCondition: "< ${params.ceiling}"
        - name: new-pods
          query: count(up{version="${rollout.to}"}) - count(up{version="${rollout.from}"}) * 0
          successCondition: ">= 1"
"""
)


def _load(tmp_path: Path, files: dict[str, str | bytes | None]) -> tuple[object, list[str]]:
    catalog = load_catalog(write_catalog(tmp_path, files))
    problems = [f"{p.file}:{p.line}: {p.message}" for p in catalog.problems if p.is_error]
    return catalog, problems


def test_a_prometheus_analysis_loads_with_its_settings(tmp_path: Path) -> None:
    good = GOOD.replace('"< ${params.ceiling}"', '"< 0.01"')
    catalog, problems = _load(tmp_path, {VERSION: good})
    assert problems == []
    version = catalog.apps["podinfo"].versions["6.6.0"]  # type: ignore[attr-defined]
    analysis = version.rollout.analysis
    assert isinstance(analysis, PrometheusAnalysis)
    assert (analysis.interval_seconds, analysis.count) == (90, 4)
    assert (analysis.failure_limit, analysis.inconclusive_limit) == (1, 2)
    assert analysis.address == "http://prometheus.monitoring:9090"
    assert [q.name for q in analysis.queries] == ["error-rate", "new-pods"]
    assert str(analysis.queries[0].condition) == "< 0.01"
    assert analysis.queries[0].line == 23


def test_a_placeholder_in_a_condition_is_refused_at_its_line(tmp_path: Path) -> None:
    _, problems = _load(tmp_path, {VERSION: GOOD})
    assert problems == [
        f'{VERSION}:24: analysis query "error-rate": successCondition "< ${{params.ceiling}}" '
        "is not an operator (<, <=, >, >=, ==) and a number"
    ]


def test_wrong_promql_is_an_error_naming_the_query_line(tmp_path: Path) -> None:
    bad = GOOD.replace('"< ${params.ceiling}"', '"< 0.01"').replace("count(up{", "count(rate(up{")
    _, problems = _load(tmp_path, {VERSION: bad})
    assert len(problems) == 1
    assert problems[0].startswith(f'{VERSION}:26: analysis query "new-pods": PromQL: ')
    assert "unclosed left parenthesis" in problems[0] or "expected" in problems[0]


def test_unknown_placeholders_and_parameters_are_errors(tmp_path: Path) -> None:
    bad = (
        GOOD.replace('"< ${params.ceiling}"', '"< 0.01"')
        .replace("${rollout.to}", "${rollout.next}")
        .replace('namespace="${instance.namespace}",code', 'namespace="${params.nope}",code')
    )
    _, problems = _load(tmp_path, {VERSION: bad})
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{VERSION}:23: ") and "params.nope" in problems[0]
    assert problems[1].startswith(f"{VERSION}:26: ") and "rollout.next" in problems[1]


def test_bad_conditions_and_durations_each_at_their_line(tmp_path: Path) -> None:
    bad = (
        HEAD
        + """\
      interval: soon
      queries:
        - name: a
          query: up
          successCondition: "~ 3"
        - name: a
          query: up
          successCondition: "<"
"""
    )
    _, problems = _load(tmp_path, {VERSION: bad})
    assert problems == [
        f"{VERSION}:16: rollout.analysis.prometheus: interval must be a duration such as 30s, "
        "2m or 1h, got 'soon'",
        f'{VERSION}:20: analysis query "a": successCondition "~ 3" is not an operator '
        "(<, <=, >, >=, ==) and a number",
        f'{VERSION}:21: analysis query "a" is named twice',
        f'{VERSION}:23: analysis query "a": successCondition "<" is not an operator '
        "(<, <=, >, >=, ==) and a number",
    ]


def test_the_schema_bounds_the_shape(tmp_path: Path) -> None:
    bad = (
        HEAD
        + """\
      count: 0
      queries:
        - name: b
          query: up
          extra: 1
          successCondition: "< 1"
"""
    )
    _, problems = _load(tmp_path, {VERSION: bad})
    assert problems == [
        f"{VERSION}:16: rollout.analysis.prometheus.count: 0 is less than the minimum of 1",
        f'{VERSION}:20: unknown field "extra" in rollout.analysis.prometheus.queries[0] '
        "(known: name, query, successCondition)",
    ]


def test_an_instance_file_may_carry_the_queries(tmp_path: Path) -> None:
    instance = WEB.format(
        extra="""\
  analysis:
    prometheus:
      queries:
        - name: latency
          query: histogram_quantile(0.99, sum by (le) (rate(req_bucket{x="${params.any}"}[5m]))) > bool
          successCondition: "< 0.5"
"""
    )
    path = "clusters/prod/instances/web.yaml"
    _, problems = _load(tmp_path, {path: instance})
    assert problems == [
        f'{path}:14: analysis query "latency": PromQL: unexpected end of input '
        "in expression (column 87)"
    ]
    fixed = instance.replace(" > bool\n", "\n")
    catalog, problems = _load(tmp_path / "b", {path: fixed})
    assert problems == []
    inst = catalog.clusters["prod"].instances["web"]  # type: ignore[attr-defined]
    assert isinstance(inst.rollout.analysis, PrometheusAnalysis)
    assert inst.rollout.analysis.interval_seconds == 30  # the default


def test_validate_names_the_file_and_line_of_a_wrong_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = GOOD.replace('"< ${params.ceiling}"', '"< 0.01"').replace("[2m])) / sum", "[2m]) / sum")
    root = write_catalog(tmp_path, {VERSION: bad})
    assert main(["validate", str(root), "--output", "json"]) == 1
    (problem,) = json.loads(capsys.readouterr().out)["problems"]
    assert (problem["file"], problem["line"], problem["severity"]) == (VERSION, 23, "error")
    assert problem["message"].startswith('analysis query "error-rate": PromQL: ')


def test_the_documented_podinfo_query_validates(tmp_path: Path) -> None:
    """The worked query of README.md and docs/ROLLOUTS.md, as a user copies it."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "ROLLOUTS.md").read_text()
    start = docs.index("rollout:\n  batches: [1, 50%, 50%]\n  onFailure: rollback\n  analysis:")
    block = docs[start : docs.index("```", start)]
    version = textwrap.dedent(str(BASE_FILES[VERSION])).split("rollout:\n")[0] + block.replace(
        "http://prometheus.monitoring:9090", "http://prometheus:9090"
    )
    catalog, problems = _load(tmp_path, {VERSION: version})
    assert problems == []
    analysis = catalog.apps["podinfo"].versions["6.6.0"].rollout.analysis  # type: ignore[attr-defined]
    assert isinstance(analysis, PrometheusAnalysis) and analysis.count == 4
