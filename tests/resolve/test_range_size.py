"""A range's size is bounded (issue 28): 2,000 ``||`` alternatives tested against 5,018
versions moved ``validate`` from 45 s to 227 s. Past the bound a range is invalid, and
``validate`` names the file and line that holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.model.version import parse_version
from reconciler.resolve import RangeSyntaxError, parse_range
from reconciler.resolve.ranges import MAX_ALTERNATIVES, MAX_COMPARATORS
from tests.factories import write_catalog


def alternatives(n: int) -> str:
    return " || ".join(f"6.{i}.0" for i in range(n))


def test_ranges_up_to_the_bounds_parse_and_match() -> None:
    wide = parse_range(alternatives(MAX_ALTERNATIVES))
    assert wide.matches(parse_version(f"6.{MAX_ALTERNATIVES - 1}.0"))
    assert not wide.matches(parse_version(f"6.{MAX_ALTERNATIVES}.0"))
    # MAX_COMPARATORS in all, spread over alternatives of two
    pairs = " || ".join(f">=6.{i}.0 <6.{i}.5" for i in range(MAX_COMPARATORS // 2))
    assert parse_range(pairs).matches(parse_version("6.3.4"))


def test_one_alternative_too_many_is_a_syntax_error_naming_where() -> None:
    text = alternatives(2000)
    with pytest.raises(RangeSyntaxError) as caught:
        parse_range(text)
    error = caught.value
    assert f"more than {MAX_ALTERNATIVES} alternatives (||)" in error.problem
    assert error.column == text.index(f"6.{MAX_ALTERNATIVES}.0") + 1
    assert len(str(error)) < 400  # the message quotes the start of the range, not all of it


def test_one_comparator_too_many_is_a_syntax_error() -> None:
    text = " ".join(f">=1.{i}.0" for i in range(MAX_COMPARATORS + 1))
    with pytest.raises(RangeSyntaxError) as caught:
        parse_range(text)
    assert f"more than {MAX_COMPARATORS} comparators" in caught.value.problem
    assert caught.value.column == text.index(f">=1.{MAX_COMPARATORS}.0") + 1


def test_validate_names_the_file_and_line_of_an_oversized_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = alternatives(2000)
    root = write_catalog(tmp_path)
    instance = root / "clusters/prod/instances/api.yaml"
    instance.write_text(instance.read_text().replace('">=6.0.0 <7.0.0"', f'"{huge}"'))
    version = root / "apps/podinfo/versions/6.6.0/version.yaml"
    version.write_text(version.read_text().replace('">=6.0.0"', f'"{huge}"'))
    assert main(["validate", str(root), "--output", "json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    bound = f"more than {MAX_ALTERNATIVES} alternatives (||)"
    found = {(p["file"], p["line"]) for p in problems if bound in p["message"]}
    assert ("clusters/prod/instances/api.yaml", 5) in found
    assert ("apps/podinfo/versions/6.6.0/version.yaml", 5) in found
    assert all(len(p["message"]) < 600 for p in problems)
