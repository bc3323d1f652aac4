"""Range grammar: node-semver's own examples, our deliberate differences, bad input."""

from __future__ import annotations

import pytest

from reconciler.model.version import parse_version
from reconciler.resolve import Range, RangeSyntaxError, parse_range

# (range, version, include_prerelease) taken from node-semver's range-include fixtures,
# minus the forms we reject on purpose (leading v, +build, ~>, empty ranges).
INCLUDED = [
    ("1.0.0 - 2.0.0", "1.2.3", False),
    ("1.0.0", "1.0.0", False),
    (">=*", "0.2.4", False),
    ("*", "1.2.3", False),
    (">=1.0.0", "1.0.0", False),
    (">=1.0.0", "1.0.1", False),
    (">=1.0.0", "1.1.0", False),
    (">1.0.0", "1.0.1", False),
    (">1.0.0", "1.1.0", False),
    ("<=2.0.0", "2.0.0", False),
    ("<=2.0.0", "1.9999.9999", False),
    ("<=2.0.0", "0.2.9", False),
    ("<2.0.0", "1.9999.9999", False),
    ("<2.0.0", "0.2.9", False),
    (">= 1.0.0", "1.0.0", False),
    (">=  1.0.0", "1.0.1", False),
    ("> 1.0.0", "1.0.1", False),
    ("<=   2.0.0", "2.0.0", False),
    ("0.1.20 || 1.2.4", "1.2.4", False),
    (">=0.2.3 || <0.0.1", "0.0.0", False),
    (">=0.2.3 || <0.0.1", "0.2.3", False),
    (">=0.2.3 || <0.0.1", "0.2.4", False),
    ("2.x.x", "2.1.3", False),
    ("1.2.x", "1.2.3", False),
    ("1.2.x || 2.x", "2.1.3", False),
    ("1.2.x || 2.x", "1.2.3", False),
    ("x", "1.2.3", False),
    ("2.*.*", "2.1.3", False),
    ("1.2.*", "1.2.3", False),
    ("1.2.* || 2.*", "2.1.3", False),
    ("2", "2.1.2", False),
    ("2.3", "2.3.1", False),
    ("~0.0.1", "0.0.1", False),
    ("~0.0.1", "0.0.2", False),
    ("~x", "0.0.9", False),
    ("~2", "2.0.9", False),
    ("~2.4", "2.4.0", False),
    ("~2.4", "2.4.5", False),
    ("~1", "1.2.3", False),
    ("~ 1.0", "1.0.2", False),
    ("~ 1.0.3", "1.0.12", False),
    (">=1", "1.0.0", False),
    (">= 1", "1.0.0", False),
    ("<1.2", "1.1.1", False),
    ("< 1.2", "1.1.1", False),
    ("~0.5.4-pre", "0.5.5", False),
    ("~0.5.4-pre", "0.5.4", False),
    ("=0.7.x", "0.7.2", False),
    ("<=0.7.x", "0.7.2", False),
    (">=0.7.x", "0.7.2", False),
    ("<=0.7.x", "0.6.2", False),
    ("~1.2.1 >=1.2.3", "1.2.3", False),
    ("~1.2.1 =1.2.3", "1.2.3", False),
    ("~1.2.1 1.2.3", "1.2.3", False),
    ("~1.2.1 >=1.2.3 1.2.3", "1.2.3", False),
    (">=1.2.1 1.2.3", "1.2.3", False),
    (">=1.2.3 >=1.2.1", "1.2.3", False),
    (">=1.2", "1.2.8", False),
    ("^1.2.3", "1.8.1", False),
    ("^0.1.2", "0.1.2", False),
    ("^0.1", "0.1.2", False),
    ("^0.0.1", "0.0.1", False),
    ("^1.2", "1.4.2", False),
    ("^1.2 ^1", "1.4.2", False),
    ("^1.2.3-alpha", "1.2.3-pre", False),
    ("^1.2.0-alpha", "1.2.0-pre", False),
    ("^0.0.1-alpha", "0.0.1-beta", False),
    ("^0.0.1-alpha", "0.0.1", False),
    ("^0.1.1-alpha", "0.1.1-beta", False),
    ("^x", "1.2.3", False),
    ("x - 1.0.0", "0.9.7", False),
    ("x - 1.x", "0.9.7", False),
    ("1.0.0 - x", "1.9.7", False),
    ("1.x - x", "1.9.7", False),
    ("<=7.x", "7.9.9", False),
    ("2.x", "2.0.0-pre.0", True),
    ("2.x", "2.1.0-pre.0", True),
    ("1.1.x", "1.1.0-a", True),
    ("1.1.x", "1.1.1-a", True),
    ("*", "1.0.0-rc1", True),
    ("^1.0.0-0", "1.0.1-rc1", True),
    ("^1.0.0-rc2", "1.0.1-rc1", True),
    ("^1.0.0", "1.0.1-rc1", True),
    ("^1.0.0", "1.1.0-rc1", True),
    ("1 - 2", "2.0.0-pre", True),
    ("1 - 2", "1.0.0-pre", True),
    ("1.0 - 2", "1.0.0-pre", True),
    ("=0.7.x", "0.7.0-asdf", True),
    (">=0.7.x", "0.7.0-asdf", True),
    ("<=0.7.x", "0.7.0-asdf", True),
    (">=1.0.0 <=1.1.0", "1.1.0-pre", True),
]

# node-semver's range-exclude fixtures, same selection.
EXCLUDED = [
    ("1.0.0 - 2.0.0", "2.2.3", False),
    ("^1.2.3", "1.2.3-pre", False),
    ("^1.2", "1.2.0-pre", False),
    (">1.2", "1.3.0-beta", False),
    ("<=1.2.3", "1.2.3-beta", False),
    ("^1.2.3", "1.2.3-beta", False),
    ("=0.7.x", "0.7.0-asdf", False),
    (">=0.7.x", "0.7.0-asdf", False),
    ("<=0.7.x", "0.7.0-asdf", False),
    ("1.0.0", "1.0.1", False),
    (">=1.0.0", "0.0.0", False),
    (">=1.0.0", "0.0.1", False),
    (">=1.0.0", "0.1.0", False),
    (">1.0.0", "0.0.1", False),
    (">1.0.0", "0.1.0", False),
    ("<=2.0.0", "3.0.0", False),
    ("<=2.0.0", "2.9999.9999", False),
    ("<=2.0.0", "2.2.9", False),
    ("<2.0.0", "2.9999.9999", False),
    ("<2.0.0", "2.2.9", False),
    (">=0.1.97", "0.1.93", False),
    ("0.1.20 || 1.2.4", "1.2.3", False),
    (">=0.2.3 || <0.0.1", "0.0.3", False),
    (">=0.2.3 || <0.0.1", "0.2.2", False),
    ("2.x.x", "1.1.3", False),
    ("2.x.x", "3.1.3", False),
    ("1.2.x", "1.3.3", False),
    ("1.2.x || 2.x", "3.1.3", False),
    ("1.2.x || 2.x", "1.1.3", False),
    ("2.*.*", "1.1.3", False),
    ("2.*.*", "3.1.3", False),
    ("1.2.*", "1.3.3", False),
    ("2", "1.1.2", False),
    ("2.3", "2.4.1", False),
    ("~0.0.1", "0.1.0-alpha", False),
    ("~0.0.1", "0.1.0", False),
    ("~2.4", "2.5.0", False),
    ("~2.4", "2.3.9", False),
    ("~1", "0.2.3", False),
    ("~1", "2.2.3", False),
    ("~1.0", "1.1.0", False),
    ("<1", "1.0.0", False),
    (">=1.2", "1.1.1", False),
    ("~0.5.4-beta", "0.5.4-alpha", False),
    ("=0.7.x", "0.8.2", False),
    (">=0.7.x", "0.6.2", False),
    ("<0.7.x", "0.7.2", False),
    ("<1.2.3", "1.2.3-beta", False),
    ("=1.2.3", "1.2.3-beta", False),
    (">1.2", "1.2.8", False),
    ("^0.0.1", "0.0.2-alpha", False),
    ("^0.0.1", "0.0.2", False),
    ("^1.2.3", "2.0.0-alpha", False),
    ("^1.2.3", "1.2.2", False),
    ("^1.2", "1.1.9", False),
    ("*", "1.2.3-foo", False),
    ("^1.0.0", "2.0.0-rc1", False),
    ("^1.0.0", "2.0.0-rc1", True),
    ("^1.2.3-rc2", "2.0.0", True),
    ("1 - 2", "3.0.0-pre", True),
    ("1 - 2", "2.0.0-pre", False),
    ("1 - 2", "1.0.0-pre", False),
    ("1.0 - 2", "1.0.0-pre", False),
    ("1.1.x", "1.0.0-a", False),
    ("1.1.x", "1.1.0-a", False),
    ("1.1.x", "1.2.0-a", False),
    ("1.1.x", "1.2.0-a", True),
    ("1.1.x", "1.0.0-a", True),
    ("1.x", "1.0.0-a", False),
    ("1.x", "1.1.0-a", False),
    ("1.x", "1.2.0-a", False),
    ("1.x", "0.0.0-a", True),
    ("1.x", "2.0.0-a", True),
    (">=1.0.0 <1.1.0", "1.1.0", False),
    (">=1.0.0 <1.1.0", "1.1.0", True),
    (">=1.0.0 <1.1.0", "1.1.0-pre", False),
    (">=1.0.0 <1.1.0-pre", "1.1.0-pre", False),
]


@pytest.mark.parametrize(("expression", "version", "include"), INCLUDED)
def test_node_semver_includes(expression: str, version: str, include: bool) -> None:
    assert parse_range(expression).matches(parse_version(version), include_prerelease=include)


@pytest.mark.parametrize(("expression", "version", "include"), EXCLUDED)
def test_node_semver_excludes(expression: str, version: str, include: bool) -> None:
    assert not parse_range(expression).matches(parse_version(version), include_prerelease=include)


@pytest.mark.parametrize(
    ("expression", "normalized"),
    [
        ("~1.2.3", ">=1.2.3 <1.3.0-0"),
        ("^1.2.3", ">=1.2.3 <2.0.0-0"),
        ("^0.2.3", ">=0.2.3 <0.3.0-0"),
        ("^0.0.3", ">=0.0.3 <0.0.4-0"),
        ("^0.0", ">=0.0.0 <0.1.0-0"),
        ("^0", ">=0.0.0 <1.0.0-0"),
        ("~1", ">=1.0.0 <2.0.0-0"),
        ("~1.2", ">=1.2.0 <1.3.0-0"),
        ("1.2.x", ">=1.2.0 <1.3.0-0"),
        ("1.x", ">=1.0.0 <2.0.0-0"),
        ("X", "*"),
        ("*", "*"),
        (">=1.2", ">=1.2.0"),
        ("<1.2", "<1.2.0-0"),
        (">1.2", ">=1.3.0"),
        ("<=1.2", "<1.3.0-0"),
        (">1", ">=2.0.0"),
        ("<*", "<0.0.0-0"),
        ("1.2.3 - 2.3.4", ">=1.2.3 <=2.3.4"),
        ("1.2 - 2.3", ">=1.2.0 <2.4.0-0"),
        ("!=1.2.3", "!=1.2.3"),
        ("!=1.2", "!(>=1.2.0 <1.3.0-0)"),
        (">=1.0.0, <2.0.0 || 3.x", ">=1.0.0 <2.0.0 || >=3.0.0 <4.0.0-0"),
    ],
)
def test_expansions(expression: str, normalized: str) -> None:
    assert parse_range(expression).normalized == normalized


@pytest.mark.parametrize("expression", [">=6.0.0 <7.0.0", "  ~1.2 ", "1.x || >=3.0.0-rc.1", "*"])
def test_str_gives_back_the_expression(expression: str) -> None:
    parsed = parse_range(expression)
    assert isinstance(parsed, Range)
    assert str(parsed) == expression


def test_spec_prerelease_example() -> None:
    r = parse_range(">=1.2.0-0 <2.0.0")
    assert r.matches(parse_version("1.2.0-beta.1"))
    assert not r.matches(parse_version("2.0.0-rc.1"))
    assert not r.matches(parse_version("1.3.0-beta"))
    assert r.matches(parse_version("1.3.0-beta"), include_prerelease=True)


def test_prerelease_opt_in_is_per_and_set() -> None:
    r = parse_range(">=1.2.0-0 <1.3.0 || >=2.0.0")
    assert r.matches(parse_version("1.2.0-rc.1"))
    assert not r.matches(parse_version("2.1.0-rc.1"))


def test_numeric_prerelease_identifiers_order_as_numbers() -> None:
    r = parse_range(">1.0.0-rc.9 <1.0.0")
    assert r.matches(parse_version("1.0.0-rc.10"))
    assert not r.matches(parse_version("1.0.0-rc.8"))


def test_exclusions() -> None:
    r = parse_range(">=1.0.0 !=1.2.3, !=1.4")
    assert r.matches(parse_version("1.2.2"))
    assert not r.matches(parse_version("1.2.3"))
    assert not r.matches(parse_version("1.4.7"))
    assert r.matches(parse_version("1.5.0"))
    assert not parse_range("!=*").matches(parse_version("1.0.0"))


def test_exclusion_never_opts_a_prerelease_in() -> None:
    r = parse_range(">=1.0.0 !=1.2.3-beta.1")
    assert not r.matches(parse_version("1.2.3-beta.2"))
    assert not r.matches(parse_version("1.2.3-beta.1"), include_prerelease=True)
    assert r.matches(parse_version("1.2.3-beta.2"), include_prerelease=True)


def test_hyphen_range_inside_an_and_set() -> None:
    r = parse_range("1.0.0 - 2.0.0 !=1.5.0")
    assert r.matches(parse_version("1.4.0"))
    assert not r.matches(parse_version("1.5.0"))
    assert r.matches(parse_version("2.0.0"))


@pytest.mark.parametrize(
    ("expression", "column", "fragment"),
    [
        (">=", 3, 'expected a version after ">="'),
        ("1.2.3.4", 7, "at most three parts"),
        (">>1", 2, 'expected a version after ">", found ">"'),
        ("~>1", 1, '"~>" is not supported'),
        ("v1.2.3", 1, 'must not start with "v" (write 1.2.3)'),
        (">=v1.2.3", 3, 'must not start with "v"'),
        ("", 1, "empty range"),
        ("   ", 1, "empty range"),
        ("1.2.3 ||", 9, "empty alternative"),
        ("|| 1.2.3", 1, "empty alternative"),
        ("1 | 2", 3, 'single "|"'),
        ("1.2.3+build", 6, "build metadata"),
        ("1.2-beta", 4, "full MAJOR.MINOR.PATCH"),
        ("01.2.3", 1, "leading zero"),
        ("1.x.3", 5, "wildcard must be the last part"),
        ("1..3", 3, "empty version part"),
        ("1.2.3-", 7, "empty prerelease identifier"),
        ("1.2.3-01", 7, 'invalid prerelease identifier "01"'),
        ("1.2.3-a..b", 9, "empty prerelease identifier"),
        ("1.2.3 -", 7, 'expected a version after " - "'),
        ("- 1.2.3", 1, "hyphen range needs a version on both sides"),
        ("1.2.3 - >2", 9, 'expected a version, found ">"'),
        ("1.2.3 -2", 7, 'expected a version, found "-"'),
        ("latest", 1, 'expected a number, x or *, found "latest"'),
        (">=1.0.0,", 8, 'expected a comparator after ","'),
        (", 1.0.0", 1, 'expected a comparator before ","'),
        ("1.0.0,,2.0.0", 7, 'expected a comparator before ","'),
        ("==1.0.0", 1, '"==" is not an operator'),
        ("=>1.0.0", 2, 'expected a version after "=", found ">"'),
        ("!1.0.0", 1, 'expected a version, found "!"'),
        (">= ,1.0.0", 3, 'expected a version after ">="'),
    ],
)
def test_garbage_is_rejected_with_position(expression: str, column: int, fragment: str) -> None:
    with pytest.raises(RangeSyntaxError) as caught:
        parse_range(expression)
    assert caught.value.column == column
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f'invalid range "{expression}" at column {column}: ')
    assert isinstance(caught.value, ValueError)


def test_non_string_is_a_syntax_error() -> None:
    with pytest.raises(RangeSyntaxError, match="must be a string"):
        parse_range(6.5)  # type: ignore[arg-type]


def test_a_range_read_again_is_the_same_value_and_a_bad_one_fails_again() -> None:
    """Ranges are parsed once per text (a bounded memo): the second answer is the same
    frozen value, and an error is raised every time it is asked, never remembered as
    a range."""
    first = parse_range(">=1.0.0 <2.0.0")
    assert parse_range(">=1.0.0 <2.0.0") is first
    assert first.matches(parse_version("1.5.0")) and not first.matches(parse_version("2.0.0"))
    for _ in range(2):
        with pytest.raises(RangeSyntaxError, match="empty range"):
            parse_range("  ")
        with pytest.raises(RangeSyntaxError, match="must be a string"):
            parse_range(["1.0.0"])  # type: ignore[arg-type]
